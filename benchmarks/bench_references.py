"""Evidence vs the number K of reference models on a pre-training testbed (issue 19).

Per-sample (1000 members vs 1000 non-members of ``tiny-pretrain``): AUROC and TPR at 1% FPR
of the model-based methods (TDDBench A.1.3) on a bank of K OUT + K IN reference models, and of
the audit's reference features, for K = 1, 2, 4, 8; dataset inference with the default audit,
every K on the same trial streams, with the saving against today's single-reference audit
(studies.reference_bank has the rows and their definitions).

    python benchmarks/bench_references.py [--testbed tiny-pretrain] [--ks 1,2,4,8]
        [--trials 1000] [--null-trials 2000]
    python benchmarks/bench_references.py --render      # references.md and the figure from references.json

Writes benchmarks/results/<testbed>/references.{md,json} and references_auroc.png.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from studies.reference_bank import (HAYES, bank_inputs, dataset_inference, per_sample_rows,
                                                    plot_references, refl_rows, render_references)

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--testbed", default="tiny-pretrain")
    ap.add_argument("--ks", default="1,2,4,8")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--null-trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot-only", action="store_true", help="redraw the figure from references.json")
    ap.add_argument("--render", action="store_true", help="rewrite references.md and the figure from references.json")
    args = ap.parse_args()
    out = RESULTS / args.testbed
    if args.plot_only or args.render:
        report = json.loads((out / "references.json").read_text())
        if args.render:
            (out / "references.md").write_text(render_references(report, args.testbed))
        return plot_references(out / "references_auroc.png", report["per_sample"], report["ks"])
    ks = sorted({int(k) for k in args.ks.split(",")})
    t0 = time.perf_counter()
    bank = bank_inputs(args.testbed, ks)
    per_sample, di_rows = [], []
    for k in ks:
        rows, di = per_sample_rows(bank, k, args.seed)
        per_sample, di_rows = per_sample + rows, di_rows + di
        print(f"K = {k}: per-sample done ({time.perf_counter() - t0:.0f} s)", flush=True)
    per_sample += refl_rows(bank, args.seed)
    di = dataset_inference(di_rows, args.trials, args.null_trials, args.seed)
    builds = {m: {k: e[k] for k in ("build_seconds", "final_loss", "torch_threads")} for m, e in bank["manifest"].items()}
    report = {"ks": ks, "per_sample": per_sample, "di": di, "builds": builds, "seconds": time.perf_counter() - t0,
              "trials": args.trials, "null_trials": args.null_trials, "hayes_2025": HAYES}
    out.mkdir(parents=True, exist_ok=True)
    (out / "references.json").write_text(json.dumps(report, indent=1))
    (out / "references.md").write_text(render_references(report, args.testbed))
    plot_references(out / "references_auroc.png", per_sample, ks)
    print(f"wrote {out}/references.md in {report['seconds']:.0f} s")


if __name__ == "__main__":
    main()
