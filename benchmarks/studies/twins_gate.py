"""The MiniLM similarity gate of ``make_twins`` (``twins.gate``; ``benchmarks/bench_twins_gate.py``),
before and after the original's embedding is kept per passage (``twins.gate.OriginalCache``), on
passages of the generative twins testbed with their SmolLM2 paraphrases replayed from its table
(``TableRewriter``, the split's keys), gated as the testbed build gates them (MiniLM similarity ≥
0.7, one redraw). "old" (``OldGate``) encodes the original and the variant on every attempt, "new"
the original once per passage; every run must give the same twins; the texts encoded are counted
exactly. ``exactness``: whether batched embeddings (padded to the batch's longest text) equal
one-text-per-pass embeddings, the reason the gate encodes one text per pass."""

from __future__ import annotations

import random
import time

import numpy as np

__all__ = ["passages_and_rewriter", "exactness", "OldGate", "timed", "gate_rounds", "render_gate"]


def passages_and_rewriter(n: int):
    """The first ``n`` member passages (by text digest) that the tiny-pretrain-twins-smollm2 table
    paraphrases, its ``TableRewriter`` and the member split's keys."""
    from trainspotter.assets import wikipedia_leads
    from trainspotter.testbeds.build import PRESETS
    from trainspotter.testbeds.twins_variant import rewriter_of, split_keys
    from trainspotter.rewriters.generative import key_fingerprint, text_digest

    config = PRESETS["tiny-pretrain-twins-smollm2"]
    rewriter = rewriter_of(config)[0]
    keys = split_keys(config, "member")
    fingerprints = {key_fingerprint(k) for k in keys}
    shas = sorted({s for (s, f, _) in rewriter.rows if f in fingerprints})
    by_sha = {text_digest(r["text"]): r for r in wikipedia_leads()}
    rows = [{"id": by_sha[s]["id"], "text": by_sha[s]["text"]} for s in shas[:n]]
    return rows, rewriter, keys


def exactness(rows, rewriter, keys) -> dict:
    """Batched (64) against one-text-per-pass embeddings and similarities."""
    from trainspotter.twins.gate import _encode

    originals = [r["text"] for r in rows]
    variants = [rewriter.rewrite(r["text"], k) for r in rows for k in keys]
    one_o = np.concatenate([_encode([t]) for t in originals])
    one_v = np.concatenate([_encode([t]) for t in variants])
    bat_o, bat_v = _encode(originals), _encode(variants)
    reps = len(keys)
    s_one = (np.repeat(one_o, reps, axis=0) * one_v).sum(axis=1)
    s_bat = (np.repeat(bat_o, reps, axis=0) * bat_v).sum(axis=1)
    return {"originals": len(originals), "variants": len(variants),
            "originals_bit_identical": int((one_o == bat_o).all(axis=1).sum()),
            "variants_bit_identical": int((one_v == bat_v).all(axis=1).sum()),
            "max_abs_embedding_diff": float(max(np.abs(one_o - bat_o).max(), np.abs(one_v - bat_v).max())),
            "max_abs_similarity_diff": float(np.abs(s_one - s_bat).max()),
            "similarities_differing_at_6_decimals": int((np.round(s_one.astype(float), 6)
                                                         != np.round(s_bat.astype(float), 6)).sum()),
            "closest_to_0.7": float(np.abs(s_one - 0.7).min())}


class OldGate:
    """The gate before: original and variant encoded on every attempt."""

    def __init__(self):
        self.encoded = 0

    def similarity(self, original: str, variant: str) -> float:
        from trainspotter.twins.gate import minilm_similarity

        self.encoded += 2
        return minilm_similarity([original], [variant])[0]


def timed(rows, rewriter, keys, gate_class) -> tuple[float, object, int]:
    """One ``make_twins`` with ``gate_class`` in the gate's place: seconds, twins, texts encoded."""
    import trainspotter.twins.make as twins

    made = []
    real = twins.OriginalCache
    twins.OriginalCache = lambda: made.append(gate_class()) or made[-1]
    try:
        t0 = time.perf_counter()
        out = twins.make_twins(rows, len(keys), rewriter, keys=list(keys), rng=random.Random(7), similarity=False,
                               max_edit_rate=1.0, min_similarity=0.7, retries=1)
        return time.perf_counter() - t0, out, sum(g.encoded for g in made)
    finally:
        twins.OriginalCache = real


def gate_rounds(rows, rewriter, keys, repeats: int) -> dict:
    """``repeats`` rounds of old, new, new, old in one process (so that a machine busier at one time
    than another favours neither): each one's seconds and texts encoded, whether every run made
    the same twins (variants, draw, quality, skipped), and ``exactness``."""
    from trainspotter.twins.gate import OriginalCache, _encode

    _encode(["warm up"])  # the encoder's load is no part of either gate
    times, made, encoded = {"old": [], "new": []}, [], {}
    for name in ["old", "new", "new", "old"] * repeats:
        seconds, twins, n = timed(rows, rewriter, keys, OldGate if name == "old" else OriginalCache)
        times[name].append(round(seconds, 1))
        encoded[name] = n
        made.append((twins.ids, twins.variants, twins.public, twins.quality, twins.manifest["quality"],
                     twins.manifest["skipped"]))
        print(name, f"{seconds:.1f} s", n, "texts encoded", flush=True)
    old_s, new_s = sum(times["old"]), sum(times["new"])
    return {"passages": len(rows), "k": len(keys), "kept": len(made[0][0]), "old_s": times["old"],
            "new_s": times["new"], "ratio": round(old_s / new_s, 2), "old_encoded": encoded["old"],
            "new_encoded": encoded["new"], "encoded_ratio": round(encoded["old"] / encoded["new"], 2),
            "same_twins": all(m == made[0] for m in made), "exactness": exactness(rows, rewriter, keys)}


def render_gate(result: dict) -> str:
    """twins_gate.md from twins_gate.json's ``result``."""
    e, times = result["exactness"], {"old": result["old_s"], "new": result["new_s"]}
    old_s, new_s, old_n, new_n = sum(times["old"]), sum(times["new"]), result["old_encoded"], result["new_encoded"]
    return (
        f"# make_twins' MiniLM gate: the original encoded once per passage\n\n"
        f"`python benchmarks/bench_twins_gate.py` on {result['passages']} passages of tiny-pretrain-twins-smollm2's "
        f"member split, k = {result['k']} paraphrases each (the testbed's table), gate MiniLM similarity ≥ 0.7 with "
        f"one redraw; CPU (2 shared cores), both gates in one process, in the order old, new, new, old.\n\n"
        f"| gate | texts encoded | seconds per run |\n|---|---|---|\n"
        f"| old: original and variant on every attempt | {old_n} | {', '.join(map(str, times['old']))} |\n"
        f"| new: original once per passage | {new_n} | {', '.join(map(str, times['new']))} |\n\n"
        f"Speed-up **{old_s / new_s:.2f}×** in time ({old_n / new_n:.2f}× fewer texts encoded); "
        f"{result['kept']} passages kept; every run made the same twins (variants, draw, quality, skipped): "
        f"**{result['same_twins']}**.\n\n"
        f"Why not batch: batched (64, padded) against one-text-per-pass embeddings of the same texts: "
        f"{e['originals_bit_identical']} of {e['originals']} originals and {e['variants_bit_identical']} of "
        f"{e['variants']} paraphrases bit-identical; embeddings differ by up to {e['max_abs_embedding_diff']:.1e}, "
        f"similarities by up to {e['max_abs_similarity_diff']:.1e}, and "
        f"{e['similarities_differing_at_6_decimals']} of {e['variants']} differ after rounding to 6 decimals "
        f"(closest similarity to the 0.7 threshold here: {e['closest_to_0.7']:.1e} away). A batched gate could "
        f"decide a borderline variant otherwise, so the gate encodes one text per pass, as before, and keeps the "
        f"original's embedding. The machine's 2 cores are shared with other work: times are wall-clock, the "
        f"encodings counted are exact.\n")
