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

The measurement: studies.rewriters. Writes benchmarks/results/twins/rewriters.json
(rewriters.md beside it is its reading, written by hand).

    nice -n 10 python benchmarks/bench_rewriters.py [--passages 32] [--max-seconds 1200]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

OUT = Path(__file__).parent / "results" / "twins"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", type=int, default=32)
    ap.add_argument("--max-seconds", type=float, default=1200)
    ap.add_argument("--min-similarity", type=float, default=0.7)
    args = ap.parse_args()
    import torch
    from transformers.utils import logging as hf_logging

    from studies.rewriters import report

    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    out = report(args.passages, args.max_seconds, args.min_similarity)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "rewriters.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({k: {m: v for m, v in out[k].items() if m not in ("examples", "rewriter")}
                      for k in ("lexical", "generative")}, indent=1))


if __name__ == "__main__":
    main()
