"""make_twins' MiniLM gate (trainspotter.twins.gate): each original encoded once per passage,
every decision, variant, draw and stored similarity what the gate before made (a similarity per
attempt from ``minilm_similarity([original], [variant])``), checked against a plain
reimplementation of that gate."""

import difflib
import random

import pytest

from trainspotter.twins.gate import OriginalCache, minilm_similarity
from trainspotter.twins.make import make_twins
from trainspotter.rewriters.base import EmptyRewrite, Rewriter

PASSAGES = [
    {"id": "a", "text": "The river town grew quickly after the railway arrived in the valley, and its market "
                        "became the largest in the region within twenty years."},
    {"id": "b", "text": "A small observatory on the hill recorded the comet every night for three weeks before "
                        "clouds covered the sky."},
    {"id": "c", "text": "The old bridge was rebuilt in stone after a flood destroyed the wooden one, and it still "
                        "carries traffic across the river today."},
]
UNRELATED = "Bananas are rich in potassium and are often eaten at breakfast with cereal and milk."


class Scripted(Rewriter):
    """Variant j of a passage: attempt a's entry of the passage's script for j ("u": an unrelated
    text that fails a 0.7 similarity gate, "e": empty, "s": the passage itself, so a duplicate of
    an earlier variant that kept it, else a word swapped); calls are logged."""

    name = "scripted"
    SCRIPT = {("a", 0): "w", ("a", 1): "uw", ("a", 2): "ueuw",
              ("b", 0): "uuw", ("b", 1): "s", ("b", 2): "uuuu",  # b: variant 2 never passes: skipped
              ("c", 0): "es", ("c", 1): "sw", ("c", 2): "w"}

    def __init__(self):
        self.calls = []

    def rewrite(self, text, key):
        return self.redraw(text, key, 0, "")

    def redraw(self, text, key, attempt, passage):
        pid = next(p["id"] for p in PASSAGES if p["text"] == text)
        self.calls.append((pid, key[0], attempt))
        what = self.SCRIPT[pid, key[0]][min(attempt, len(self.SCRIPT[pid, key[0]]) - 1)]
        if what == "e":
            raise EmptyRewrite("empty")
        if what == "u":
            return UNRELATED
        if what == "s":
            return text
        words = text.split()
        words[2 + key[0] + attempt] = "remarkable"
        return " ".join(words)


def reference(passages, k, rewriter, keys, rng, retries, min_similarity):
    """The gate as it was: per passage, variant and attempt in order, a similarity computed anew."""
    norm = " ".join
    ids, variants, redrawn = [], {}, 0
    for p in passages:
        texts = []
        for key in keys:
            for attempt in range(retries + 1):
                try:
                    text = rewriter.rewrite(p["text"], key) if attempt == 0 else rewriter.redraw(p["text"], key,
                                                                                               attempt, p["id"])
                except EmptyRewrite:
                    continue
                kept = 1 - difflib.SequenceMatcher(None, p["text"].split(), text.split(), autojunk=False).ratio()
                if norm(text.split()) in [norm(t.split()) for t in texts] or kept > 1.0:
                    continue
                if minilm_similarity([p["text"]], [text])[0] < min_similarity:
                    continue
                texts.append(text)
                redrawn += attempt > 0
                break
            else:
                break
        if len(texts) == k:
            ids.append(p["id"])
            variants[p["id"]] = dict(enumerate(texts))
    flat = [(i, j) for i in ids for j in range(k)]
    text = {p["id"]: p["text"] for p in passages}
    sims = minilm_similarity([text[i] for i, _ in flat], [variants[i][j] for i, j in flat])
    return ids, variants, {i: rng.randrange(k) for i in ids}, redrawn, dict(zip(flat, sims))


def test_the_cached_gate_makes_the_twins_the_per_attempt_gate_made(monkeypatch):
    """Same keys and a seeded draw: the same variants (redrawn where unrelated, empty or a
    duplicate), the same skipped passage, public draw, stored similarities and redraw count as
    the reimplemented gate; the rewriter asked the same things in the same order; each original
    encoded once, not once per attempt."""
    import trainspotter.twins.gate as gate

    keys = [bytes([j]) * 32 for j in range(3)]
    expected_rewriter = Scripted()
    ids, variants, public, redrawn, sims = reference(PASSAGES, 3, expected_rewriter, keys, random.Random(5), 3, 0.7)
    assert ids == ["a", "c"] and variants["a"][2] != UNRELATED and redrawn >= 4  # the script does what it says
    encoded = []
    real = gate._encode
    monkeypatch.setattr(gate, "_encode", lambda texts: encoded.append(list(texts)) or real(texts))
    scored, similarity = [], gate.OriginalCache.similarity
    monkeypatch.setattr(gate.OriginalCache, "similarity", lambda self, o, v: scored.append(v) or similarity(self, o, v))
    rewriter = Scripted()
    twins = make_twins(PASSAGES, 3, rewriter, keys=keys, rng=random.Random(5), max_edit_rate=1.0, retries=3,
                       min_similarity=0.7, similarity=True)
    assert rewriter.calls == expected_rewriter.calls
    assert (twins.ids, twins.variants, twins.public, twins.manifest["redrawn"]) == (ids, variants, public, redrawn)
    assert [s["id"] for s in twins.manifest["skipped"]] == ["b"]
    assert {(i, j): q["similarity"] for i in ids for j, q in twins.quality[i].items()} == sims
    for j in range(3):
        rows = [sims[i, j] for i in ids]
        assert twins.manifest["quality"][str(j)]["similarity"] == round(sum(rows) / len(rows), 4)
    gate_calls = encoded[:-2]  # the last two: the stored similarities, originals and variants batched
    assert all(len(t) == 1 for t in gate_calls) and len(scored) >= 10  # one text per pass, as before
    assert len(gate_calls) == len(scored) + len(PASSAGES)  # each variant scored, each original encoded once


@pytest.mark.parametrize("variant", [PASSAGES[0]["text"].replace("quickly", "rapidly"), UNRELATED, "Railway."])
def test_the_cached_similarity_is_the_one_pair_similarity_bit_for_bit(variant):
    cache = OriginalCache()
    for _ in range(2):  # the second time from the kept embedding
        assert cache.similarity(PASSAGES[0]["text"], variant) == minilm_similarity([PASSAGES[0]["text"]], [variant])[0]
    assert cache.encoded == 3
