"""Black-box audits against how often the suspect text was trained on (issue 20).

BADI's black-box evidence comes from Pythia on the Pile, whose subsets were repeated 1 to 3
times in one pass over it (Gao et al. 2020, Table 1: Pile-CC and GitHub once, Books3, FreeLaw
and OpenSubtitles 1.5 times, Wikipedia 3 times, most others twice). On `tiny-pretrain-2k`
(members seen once) no black-box test decides within 2000 pairs. This script measures how
the black-box audit's power grows with the exposures k, all else fixed:

- testbeds ``tiny-pretrain-2k`` (k = 1) and ``tiny-pretrain-2k-xK`` (each member block K times
  per epoch, the copies spread by the shuffle; same corpus and seed, the reference is the run
  without the members), built if needed;
- their extraction: the benchmark's own cached chunks (``flows.benchmark.features_table``;
  gray and black, six perturbations and suffix generation, the testbed's reference);
- per sample (2000 members vs 2000 non-members): the cross-fitted scoring model's AUROC on
  the audit's default gray set (`lean`), its default black set (`lean`) and every black
  feature (BADI's set), 95% bootstrap CIs;
- dataset inference, members vs held-out (TPR, censored pairs to decision) and two negative
  controls: non-members vs held-out (the benchmark's FPR) and the pooled control, a fresh
  random split of non-members ∪ held-out into suspect and held-out halves in every trial
  (``simulate(null=True)``); the audit's default test on each set and BADI's ons/mmd on every
  black feature, N_max pairs, the same trial streams for every set of one testbed. With N_max
  near the pool's size every non-member vs held-out trial reorders the same two sets, so
  that rate is conditional on one realised split (its binomial test treats the trials as
  independent, which they are not); the pooled control re-draws the split and is what the
  guarantee FPR ≤ α is about.

The computation: studies.exposures.

    python benchmarks/bench_exposures.py [--repeats 1 2 4] [--trials 500] [--null-trials 1000]
    python benchmarks/bench_exposures.py --render   # exposures.md from exposures.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

OUT = Path(__file__).parent / "results" / "exposures"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, nargs="+", default=[1, 2, 4], help="exposures k (testbeds)")
    ap.add_argument("--trials", type=int, default=500, help="member trials per test")
    ap.add_argument("--null-trials", type=int, default=1000, help="negative-control trials per test")
    ap.add_argument("--n-max", type=int, default=2000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--render", action="store_true", help="only rewrite exposures.md from exposures.json "
                    "(one written before it recorded torch's threads: 2, as it was run)")
    args = ap.parse_args()
    from studies.exposures import render_exposures

    if args.render:
        return (OUT / "exposures.md").write_text(render_exposures(json.loads((OUT / "exposures.json").read_text()), 2))
    import torch
    from prefect import flow

    from trainspotter.evaluation.benchmark import BenchmarkConfig
    from studies.exposures import exposure_result, exposure_rows, feature_sets, exposure_testbed
    from trainspotter.evaluation.plots import power_plot
    from trainspotter.testbeds.build import PRESETS, build_testbed, load_manifest
    from trainspotter.flows.benchmark import features_table
    from trainspotter.stats.sequential import TestConfig

    table_of = flow(name="bench-exposures")(features_table)
    default, badi = TestConfig(alpha=args.alpha), TestConfig(alpha=args.alpha, strategy="ons", payoff="mmd")
    results, curves = [], {}
    for k in args.repeats:
        name, t0 = exposure_testbed(k), time.time()
        build_testbed(PRESETS[name])
        table = table_of(BenchmarkConfig(testbed=name, methods=("scoring_gray", "scoring_black"), n_max=args.n_max,
                                         alphas=(args.alpha,), seed=0))
        extract_s = time.time() - t0
        rows, curves[f"k = {k}"] = exposure_rows(table, feature_sets(table, default, badi), args.alpha, args.trials,
                                                 args.null_trials, args.n_max, args.n_boot)
        results.append(exposure_result(k, load_manifest(name), table, rows, {
            "build_and_features": round(extract_s, 1), "simulation": round(time.time() - t0 - extract_s, 1)}))
    OUT.mkdir(parents=True, exist_ok=True)
    power_plot(curves, OUT / "black_power_by_exposures.png",
               title=f"Black-box audit (lean, {default.strategy}/{default.payoff}), α = {args.alpha:g}, "
                     f"{args.trials} trials, by exposures")
    report = {"date": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}",
              "args": {k: v for k, v in vars(args).items() if k != "render"}, "results": results,
              "torch_threads": torch.get_num_threads()}
    (OUT / "exposures.json").write_text(json.dumps(report, indent=1))
    text = render_exposures(report)
    (OUT / "exposures.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
