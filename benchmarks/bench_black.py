"""Black-box dataset inference at BADI's scale (issue 20): what the black features carry and
how many pairs a black-box audit of data seen once needs.

Run after the benchmark of the same testbed and references, whose cached extraction it
reads (same configuration, so every extraction task is a cache hit):

    trainspotter benchmark --testbed tiny-pretrain-2k --reference testbed:tiny-pretrain-2k/reference \
        --reference testbed:tiny-pretrain-2k/out-0 ... --trials 1000 --null-trials 2000 \
        --cost-samples 8 --cost-repeats 1 --out benchmarks/results/tiny-pretrain-2k/black
    python benchmarks/bench_black.py --results benchmarks/results/tiny-pretrain-2k/black

1. **Feature-group ablation** (members vs non-members, per sample): the cross-fitted
   scoring model (``trainspotter.evaluation.mia.cross_fit``, the one ``scoring_black`` uses)
   on each group of black-box columns alone, AUROC with a 95% stratified bootstrap CI.
   Groups: label-only greedy match; BADI's estimated probabilities (App. A.6) with the
   sigmoid, raw and PETAL estimators (token-level, no perturbation or reference); the
   perturbations; suffix similarity; the reference-relative ones; all black; and the gray
   sets for comparison. The raw estimator needs its own (cached) extraction.
2. **Gray vs black on the same pairs** (BADI Fig. 4): the audit's default test
   (``TestConfig()``) on the gray and on the black features, the same trial streams
   (same seed: trial t draws the same members and held-out passages for both), sequential
   power Power(t) up to N_max; plotted with the mean log-wealth.
3. **Pairs a black audit would need, extrapolated**: the mean log-wealth E[log W_t] grows
   about linearly once the scoring model has learned; a line fitted over the last half of
   the stream gives the pairs at which it reaches log(1/α). An extrapolation of the
   typical (mean log-wealth) crossing, stated as such, not a measured stopping time.
4. **Where the membership signal sits**: every token position of the members and the
   non-members, binned by the reference's margin of the true token (log p_ref(x_i) minus the
   largest log-prob of another token: ≥ 0 where the reference's greedy token is x_i). Per
   bin: the target's greedy-match rate (all a label-only API reveals about that position)
   and the target's gain in log p over the reference (what gray-box RefL reads), members
   minus non-members, with 95% bootstrap CIs over passages. Training moves the greedy token
   only near the decision boundary (margins near 0); wherever the gain sits far below it, a
   label-only audit cannot see it at any number of queries of the original text.

The computation: studies.black_signal.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def tables(config):
    """The benchmark's features table (its own extraction: cache hits) with the raw estimator's
    black columns beside it (raw_*: an extraction of its own, cached), as a Prefect flow."""
    import pandas as pd
    from prefect import flow

    from trainspotter.evaluation.benchmark import split_passages
    from trainspotter.features.features import FeatureConfig
    from trainspotter.flows.benchmark import _extract, features_table

    @flow(name="bench-black")
    def run() -> pd.DataFrame:
        table = features_table(config)
        raw = FeatureConfig(estimator="raw", perturbations=False, sequence=False,
                            batch_size=config.features.batch_size)
        parts = []
        for split in table["split"].unique():  # the table's row order
            ps = split_passages(config.testbed, split, config.limit)
            df = _extract(ps, f"testbed:{config.testbed}", config.references, "black", raw, config.chunk_size)
            parts.append(df.rename(columns=lambda c: "raw_" + c.removeprefix("black_")))
        return pd.concat([table, pd.concat(parts, ignore_index=True)], axis=1)
    return run()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True, help="the benchmark's output folder (its results.json)")
    ap.add_argument("--trials", type=int, default=1000, help="trials of the gray vs black comparison")
    ap.add_argument("--n-boot", type=int, default=1000)
    args = ap.parse_args()

    from trainspotter.evaluation.benchmark import BenchmarkConfig, mia_rows
    from studies.black_signal import ablation, boundary_table, gray_vs_black, render_black
    from trainspotter.evaluation.plots import power_plot
    from trainspotter.features.extract import feature_columns
    from trainspotter.features.features import FEATURE_SETS
    from trainspotter.stats.sequential import TestConfig

    out = Path(args.results)
    summary = json.loads((out / "results.json").read_text())
    config = BenchmarkConfig.model_validate(summary["config"])
    t0 = time.time()
    table = tables(config)
    extract_s = time.time() - t0
    mia, labels = mia_rows(table)
    lean_gray = set(feature_columns(FEATURE_SETS["lean"], "gray", len(config.references)))
    rows = ablation(mia, labels, lean_gray, config.folds, config.seed, args.n_boot)
    test, t0 = TestConfig(alpha=config.alphas[0]), time.time()
    growth, curves = gray_vs_black(table, test, args.trials, config.n_max, config.seed, config.alphas)
    sim_s = time.time() - t0
    power_plot(curves, out / "gray_vs_black_power.png",
               title=f"Same pairs, gray vs black, α = {test.alpha:g} ({config.testbed}, {args.trials} trials)")
    reference = config.references[0] if config.references else f"testbed:{config.testbed}/reference"
    boundary = boundary_table(config.testbed, reference, config.limit, config.features.batch_size, args.n_boot,
                              config.seed)
    result = {"config": summary["config"], "testbed": config.testbed, "trials": args.trials,
              "test": f"{test.strategy}/{test.payoff}", "alpha": test.alpha, "ablation": rows,
              "gray_vs_black": growth, "boundary": {"reference": reference, "bins": boundary},
              "seconds": {"features": round(extract_s, 1), "simulation": round(sim_s, 1)}}
    (out / "black.json").write_text(json.dumps(result, indent=1))
    text = render_black(result, str(out), labels, config.references, config.alphas)
    (out / "black.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
