"""Making twins (docs/architecture.md, "Twins"): k ≥ 2 rewrites of every passage, each variant
under its own secret key, held to one quality gate, then a commitment to every variant and to a
secret (``trainspotter.twins.draw``), before any draw: the public versions are drawn later from
that secret and a beacon round (``twins.release``); ``trainspotter.twins.folder``: the folder.
"""

from __future__ import annotations

import difflib
import random
import secrets
from collections.abc import Callable

from trainspotter.errors import InputError
from trainspotter.twins.draw import VERSION, commit, seeded_draw
from trainspotter.twins.folder import FORMAT, KEY_BYTES, Twins
from trainspotter.twins.gate import OriginalCache, minilm_similarity
from trainspotter.rewriters.lexical import KeyedLexicalRewriter
from trainspotter.rewriters.base import EmptyRewrite, Rewriter

# make_twins' quality gate per kind of rewriter (`twins make`'s defaults): a paraphrase changes most
# of the words by design, so a generative variant is held to its meaning (MiniLM) instead
GATES = {"lexical": {"max_edit_rate": 0.5, "min_similarity": None, "retries": 8},
         "generative": {"max_edit_rate": 1.0, "min_similarity": 0.7, "retries": 3}}

__all__ = ["GATES", "edit_rate", "make_twins"]


def edit_rate(original: str, variant: str) -> float:
    """Share of the original's whitespace-separated words not kept, in order, by the variant:
    1 − difflib's matching ratio of the two word sequences (0: same words, 1: none kept)."""
    return 1.0 - difflib.SequenceMatcher(None, original.split(), variant.split(), autojunk=False).ratio()


def _norm(text: str) -> str:
    return " ".join(text.split())  # how check_disjoint compares the two sides


def make_twins(passages: list[dict], k: int = 2, rewriter: Rewriter | None = None, *,
               keys: list[bytes] | None = None, beacon_round: int | None = None, rng: random.Random | None = None,
               similarity: bool = False, max_edit_rate: float = 0.5, retries: int = 8,
               min_similarity: float | None = None, progress: Callable[[int, int], None] | None = None) -> Twins:
    """k ≥ 2 variants of every passage, committed to (``draw.commit``: a secret and a salt per variant
    from the operating system's generator; ``beacon_round``: the round whose value will draw the
    public versions, ``twins.release``) and not yet drawn. ``rng``: draw them now with that
    generator instead (a built-in testbed's seeded draw, ``draw.seeded_draw``: reproducible, never
    shown random). ``keys``: one per variant, default ``secrets.token_bytes(32)`` each, drawn
    independently of the secret. Variant j is ``rewriter.rewrite(text,
    keys[j])``; where it equals an earlier variant of the passage (whitespace aside), changes more
    than ``max_edit_rate`` of its words, is empty (a generative rewriter's ``EmptyRewrite``) or,
    with ``min_similarity``, has a MiniLM similarity to the original below it, it is redrawn, up to
    ``retries`` times (``rewriter.redraw``: the lexical rewriter with a key derived for that
    passage, HMAC(keys[j], id ‖ attempt); a generative one samples again under the variant's
    watermark); a passage whose variants still fail is skipped (``manifest["skipped"]``): an
    audit could not tell its versions apart anyway. The gate treats every variant alike and the
    draw comes after all variants exist and reads nothing of them, so it costs passages, never
    validity. ``similarity``: score each variant with MiniLM's cosine similarity to the original
    (stored; used to choose only through ``min_similarity``). ``progress(done, total)`` after
    each passage."""
    if k < 2:
        raise InputError(f"k = {k}: twins need at least 2 variants per passage (one public, one private)")
    rewriter = rewriter or KeyedLexicalRewriter()
    keys = keys or [secrets.token_bytes(KEY_BYTES) for _ in range(k)]
    if len(keys) != k:
        raise ValueError(f"{len(keys)} keys for k = {k} variants")
    seen: dict[str, str] = {}
    for p in passages:
        if p["id"] in seen:
            raise InputError(f"passage id {p['id']!r} appears twice; twins are matched by id, so ids must be unique")
        seen[p["id"]] = p["text"]
    ids, variants, quality, skipped, redrawn = [], {}, {}, [], 0
    gate = OriginalCache() if min_similarity is not None else None  # each original encoded once
    for n, p in enumerate(passages, start=1):
        texts: list[str] = []
        for j in range(k):
            made = _variant(rewriter, p, keys[j], texts, max_edit_rate, retries, min_similarity, gate)
            if made is None:
                break
            texts.append(made[0])
            redrawn += made[1] > 0
        if progress:
            progress(n, len(passages))
        if len(texts) < k:
            skipped.append({"id": p["id"], "reason": f"no {k} distinct variants within {retries} redraws"})
            continue
        ids.append(p["id"])
        variants[p["id"]] = dict(enumerate(texts))
        quality[p["id"]] = {j: {"edit_rate": round(edit_rate(p["text"], t), 6)} for j, t in enumerate(texts)}
    if (similarity or min_similarity is not None) and ids:
        flat = [(i, j) for i in ids for j in range(k)]
        sims = minilm_similarity([seen[i] for i, _ in flat], [variants[i][j] for i, j in flat])
        for (i, j), s in zip(flat, sims):
            quality[i][j]["similarity"] = s
    manifest = {"format": FORMAT, "version": VERSION, "k": k, "passages": len(ids), "rewriter": rewriter.describe(),
                "max_edit_rate": max_edit_rate, "min_similarity": min_similarity, "skipped": skipped,
                "redrawn": redrawn, "quality": _summary(quality, k)}
    twins = Twins(ids, variants, {}, k, manifest, quality, list(keys))
    manifest["commitment"] = commit(twins, rewriter.describe(), None if rng else beacon_round)
    if rng is not None:  # every variant exists and the draw reads none of them
        seeded_draw(twins, {i: rng.randrange(k) for i in ids}, "a seeded generator's draw at twins make")
    return twins


def _variant(rewriter: Rewriter, p: dict, key: bytes, earlier: list[str], max_edit_rate: float, retries: int,
             min_similarity: float | None, gate: OriginalCache | None = None) -> tuple[str, int] | None:
    """(the variant, its attempt) passing ``make_twins``' gate within ``retries`` redraws, or None.
    A rewriter empty on every attempt is an InputError naming the passage's id. The similarity:
    ``gate.similarity``, ``minilm_similarity([original], [variant])`` with the original encoded
    once (twins.gate)."""
    empty = 0
    for attempt in range(retries + 1):
        try:
            text = (rewriter.rewrite(p["text"], key) if attempt == 0
                    else rewriter.redraw(p["text"], key, attempt, p["id"]))
        except EmptyRewrite:
            empty += 1
            continue
        if _norm(text) in map(_norm, earlier) or edit_rate(p["text"], text) > max_edit_rate:
            continue
        if min_similarity is not None and (gate or OriginalCache()).similarity(p["text"], text) < min_similarity:
            continue
        return text, attempt
    if empty == retries + 1:
        raise InputError(f"passage {p['id']!r}: the rewriter {rewriter.name} returned an empty rewrite on all "
                         f"{retries + 1} attempts")
    return None


def _summary(quality: dict[str, dict[int, dict]], k: int) -> dict:
    """Per variant index: mean edit rate (and similarity), and how many passages it was made for."""
    out = {}
    for j in range(k):
        rows = [q[j] for q in quality.values()]
        out[str(j)] = {"passages": len(rows)} | {
            m: round(sum(r[m] for r in rows) / len(rows), 4) for m in ("edit_rate", "similarity")
            if rows and all(m in r for r in rows)}
    return out

