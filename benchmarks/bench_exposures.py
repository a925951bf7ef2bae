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

    python benchmarks/bench_exposures.py [--repeats 1 2 4] [--trials 500] [--null-trials 1000]
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


def testbed_name(k: int) -> str:
    return "tiny-pretrain-2k" if k == 1 else f"tiny-pretrain-2k-x{k}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, nargs="+", default=[1, 2, 4], help="exposures k (testbeds)")
    ap.add_argument("--trials", type=int, default=500, help="member trials per test")
    ap.add_argument("--null-trials", type=int, default=1000, help="negative-control trials per test")
    ap.add_argument("--n-max", type=int, default=2000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--n-boot", type=int, default=1000)
    args = ap.parse_args()

    import numpy as np
    import torch
    from prefect import flow
    from scipy.stats import binomtest

    from trainspotter.auditing.tables import simulate_many
    from trainspotter.evaluation.benchmark import BenchmarkConfig, mia_rows
    from trainspotter.evaluation.benchmark_di import di_frame, di_row
    from trainspotter.evaluation.metrics import method_metrics
    from trainspotter.evaluation.mia import cross_fit
    from trainspotter.evaluation.plots import power_plot
    from trainspotter.evaluation.testbed import PRESETS, build_testbed, load_manifest
    from trainspotter.features.extract import feature_columns
    from trainspotter.features.features import FEATURE_SETS
    from trainspotter.flows.benchmark import features_table
    from trainspotter.stats.sequential import TestConfig

    @flow(name="bench-exposures")
    def table_of(config):
        return features_table(config)

    default, badi = TestConfig(alpha=args.alpha), TestConfig(alpha=args.alpha, strategy="ons", payoff="mmd")
    results, curves = [], {}
    for k in args.repeats:
        name = testbed_name(k)
        t0 = time.time()
        build_testbed(PRESETS[name])
        manifest = load_manifest(name)
        config = BenchmarkConfig(testbed=name, methods=("scoring_gray", "scoring_black"), n_max=args.n_max,
                                 alphas=(args.alpha,), seed=0)
        table = table_of(config)
        extract_s = time.time() - t0
        sets = {"gray lean (audit default)": ("gray", feature_columns(FEATURE_SETS["lean"], "gray", 1), [default]),
                "black lean (audit default)": ("black", feature_columns(FEATURE_SETS["lean"], "black", 1), [default]),
                "black, every feature (BADI's set)": (
                    "black", [c for c in table.columns if str(c).startswith("black_")], [default, badi])}
        mia, labels = mia_rows(table)
        rows = []
        for set_name, (access, cols, tests) in sets.items():
            m = method_metrics(labels, cross_fit(mia[cols].to_numpy(dtype=float), labels, 5, 0),
                               n_boot=args.n_boot, seed=0)
            frames = {s: di_frame(table[["split", *cols]], s, access) for s in ("member", "nonmember")}
            # the pooled control: members as the (unused) suspect rows, the rest split per trial
            pool = table[["split", *cols]].rename(columns={"split": "set"})
            pool["set"] = np.where(table["split"] == "member", "suspect", "heldout")
            pos = simulate_many(frames["member"], tests, trials=args.trials, n_max=args.n_max, seed=0)
            neg = simulate_many(frames["nonmember"], tests, trials=args.null_trials, n_max=args.n_max, seed=0)
            pooled = simulate_many(pool, tests, trials=args.null_trials, n_max=args.n_max, null=True, seed=0)
            for test, tpr, fpr, fpr_pooled in zip(tests, pos, neg, pooled):
                row = di_row(access, test, args.alpha, tpr, fpr)
                k_pooled = round(fpr_pooled["rejection_rate"] * args.null_trials)
                rows.append({"set": set_name, "columns": len(cols), "auroc": m["auroc"],
                             "auroc_ci": [m["auroc_ci_low"], m["auroc_ci_high"]],
                             **{f: row[f] for f in ("test", "tpr", "fpr", "fpr_binom_p", "mean_pairs",
                                                    "mean_stop", "std_stop", "pairs", "trials", "null_trials")},
                             "fpr_pooled": fpr_pooled["rejection_rate"],
                             "fpr_pooled_binom_p": binomtest(k_pooled, args.null_trials, args.alpha,
                                                             alternative="greater").pvalue})
                if access == "black" and test is default and set_name.startswith("black lean"):
                    curves[f"k = {k}"] = tpr["by_alpha"][str(args.alpha)]["power_curve"]
                print(name, json.dumps(rows[-1]), flush=True)
        heldout = table[table["split"] == "heldout"]
        results.append({"repeats": k, "testbed": name, "member_fraction": manifest["member_fraction"],
                        # how good the target is on text it never saw: all a black-box audit reads
                        "heldout_loglik": float(-np.log(heldout["gray_ppl"]).mean()),
                        "heldout_match_rate": float(heldout["black_match_rate"].mean()),
                        "target_final_loss": manifest["target_final_loss"],
                        "reference_final_loss": manifest["reference_final_loss"],
                        "build_seconds": manifest["build_seconds"], "rows": rows,
                        "seconds": {"build_and_features": round(extract_s, 1),
                                    "simulation": round(time.time() - t0 - extract_s, 1)}})

    OUT.mkdir(parents=True, exist_ok=True)
    power_plot(curves, OUT / "black_power_by_exposures.png",
               title=f"Black-box audit (lean, {default.strategy}/{default.payoff}), α = {args.alpha:g}, "
                     f"{args.trials} trials, by exposures")
    date = f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}"
    (OUT / "exposures.json").write_text(json.dumps({"date": date, "args": vars(args), "results": results},
                                                   indent=1))
    lines = ["# Black-box audits by exposures: members seen k times in pre-training", "",
             f"{date} · `python benchmarks/bench_exposures.py --repeats {' '.join(map(str, args.repeats))} "
             f"--trials {args.trials} --null-trials {args.null_trials} --n-max {args.n_max}` · "
             f"{torch.get_num_threads()} CPU threads · α = {args.alpha:g} · reference: the testbed's own "
             "(the same run without the members)", "",
             "Per sample: the cross-fitted scoring model, 2000 members vs 2000 non-members, AUROC [95% CI]. "
             "DI: members vs held-out (TPR; pairs to decision, censored mean: a non-rejection counts as "
             "N_max); FPR of non-members vs held-out (every trial reorders the same two sets: conditional on "
             "that split) and of the pooled control (non-members ∪ held-out split at random in every trial: "
             "the guarantee's FPR), each with the binomial p of FPR ≤ α; one trial stream per trial index for "
             "every set of a testbed.", "",
             "| k | members' share of tokens | target on held-out: log-lik per token, greedy-match rate | "
             "features | AUROC [95% CI] | test | TPR | FPR, "
             "non-members vs held-out (binomial p) | FPR, pooled split per trial (binomial p) | pairs to decision "
             "(censored) | rejecting: mean ± std |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for row in r["rows"]:
            stop = "—" if row["mean_stop"] is None else f"{row['mean_stop']:.1f} ± {row['std_stop']:.1f}"
            lines.append(f"| {r['repeats']} | {r['member_fraction']:.3f} | {r['heldout_loglik']:.3f}, "
                         f"{r['heldout_match_rate']:.3f} | "
                         f"{row['set']} ({row['columns']}) | {row['auroc']:.3f} [{row['auroc_ci'][0]:.3f}, "
                         f"{row['auroc_ci'][1]:.3f}] | {row['test']} | {row['tpr']:.3f} | {row['fpr']:.4f} "
                         f"({row['fpr_binom_p']:.3f}) | {row['fpr_pooled']:.4f} ({row['fpr_pooled_binom_p']:.3f}) | "
                         f"{row['mean_pairs']:.1f} | {stop} |")
    lines += ["", "Plot: `black_power_by_exposures.png` (sequential power of the default black audit)."]
    (OUT / "exposures.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
