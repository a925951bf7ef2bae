"""The MiniLM similarity gate of ``make_twins``, before and after the original's embedding is
kept per passage (``twins.gate.OriginalCache``), on ~200 passages of the generative twins testbed.

Input: 200 passages of tiny-pretrain-twins-smollm2's member split (Wikipedia leads) with their
four SmolLM2 paraphrases, replayed from the testbed's table (``TableRewriter``, the split's keys),
gated as the testbed build gates them (MiniLM similarity ≥ 0.7, one redraw; the table holds no
attempt 1, so a failed variant drops its passage). ``make_twins`` runs in one process, without the
stored scores (the gate alone), in the order old, new, new, old (``--repeats`` such rounds, so
that a machine busier at one time than another favours neither): "old" encodes the original and
the variant on every attempt (``minilm_similarity([original], [variant])``, the gate before),
"new" the original once per passage; every run must give the same twins (variants, draw,
quality). The ratio: old's total time over new's; the texts encoded are counted exactly.

It also measures whether batched embeddings (sentence-transformers pads a batch to its longest
text) equal one-text-per-pass embeddings, on the same originals and attempt-0 paraphrases.

The measurement: studies.twins_gate.

    python benchmarks/bench_twins_gate.py [--passages 200]
    python benchmarks/bench_twins_gate.py --render   # twins_gate.md from twins_gate.json

Writes benchmarks/results/twins_gate.json and .md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from studies.twins_gate import gate_rounds, passages_and_rewriter, render_gate

OUT = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=1, help="rounds of old, new, new, old")
    parser.add_argument("--render", action="store_true", help="only rewrite twins_gate.md from twins_gate.json")
    args = parser.parse_args()
    if args.render:
        return (OUT / "twins_gate.md").write_text(render_gate(json.loads((OUT / "twins_gate.json").read_text())))
    result = gate_rounds(*passages_and_rewriter(args.passages), args.repeats)
    print(json.dumps(result, indent=1), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "twins_gate.json").write_text(json.dumps(result, indent=1) + "\n")
    (OUT / "twins_gate.md").write_text(render_gate(result))


if __name__ == "__main__":
    main()
