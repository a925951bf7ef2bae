"""Black-box audits against how often the suspect text was trained on (issue 20,
``benchmarks/bench_exposures.py``): testbeds ``tiny-pretrain-2k`` (members seen once) and
``tiny-pretrain-2k-xK`` (each member block K times per epoch), all else fixed.

Per testbed, on the benchmark's features table: per sample, the cross-fitted scoring model's AUROC
(95% bootstrap CI) on the audit's default gray and black sets and on every black feature (BADI's
set); dataset inference (BADI Sec. 5.1), members against held-out (TPR, censored pairs to decision)
and two negative controls, non-members against held-out (conditional on that one split) and the
pooled control, non-members ∪ held-out split afresh per trial (``simulate(null=True)``: the FPR
the guarantee FPR ≤ α is about), each with the one-sided binomial p of FPR ≤ α.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

__all__ = ["exposure_testbed", "feature_sets", "exposure_rows", "exposure_result", "render_exposures"]


def exposure_testbed(k: int) -> str:
    return "tiny-pretrain-2k" if k == 1 else f"tiny-pretrain-2k-x{k}"


def feature_sets(table: pd.DataFrame, default, badi) -> dict:
    """name: (access, columns, tests): the audit's default gray and black sets (``default`` test)
    and every black column (``default`` and BADI's ``badi`` test)."""
    from trainspotter.features.extract import feature_columns
    from trainspotter.features.features import FEATURE_SETS

    return {"gray lean (audit default)": ("gray", feature_columns(FEATURE_SETS["lean"], "gray", 1), [default]),
            "black lean (audit default)": ("black", feature_columns(FEATURE_SETS["lean"], "black", 1), [default]),
            "black, every feature (BADI's set)": (
                "black", [c for c in table.columns if str(c).startswith("black_")], [default, badi])}


def exposure_rows(table: pd.DataFrame, sets: dict, alpha: float, trials: int, null_trials: int, n_max: int,
                  n_boot: int) -> tuple[list[dict], dict]:
    """One row per set and test (module docstring); and the sequential power curve of the default
    black audit (the first test of the black lean set)."""
    from scipy.stats import binomtest

    from trainspotter.auditing.tables import simulate_many
    from trainspotter.evaluation.benchmark import mia_rows
    from trainspotter.evaluation.benchmark_di import di_frame, di_row
    from trainspotter.evaluation.metrics import method_metrics
    from trainspotter.evaluation.mia import cross_fit

    mia, labels = mia_rows(table)
    rows, curve = [], None
    for set_name, (access, cols, tests) in sets.items():
        m = method_metrics(labels, cross_fit(mia[cols].to_numpy(dtype=float), labels, 5, 0), n_boot=n_boot, seed=0)
        frames = {s: di_frame(table[["split", *cols]], s, access) for s in ("member", "nonmember")}
        # the pooled control: members as the (unused) suspect rows, the rest split per trial
        pool = table[["split", *cols]].rename(columns={"split": "set"})
        pool["set"] = np.where(table["split"] == "member", "suspect", "heldout")
        pos = simulate_many(frames["member"], tests, trials=trials, n_max=n_max, seed=0)
        neg = simulate_many(frames["nonmember"], tests, trials=null_trials, n_max=n_max, seed=0)
        pooled = simulate_many(pool, tests, trials=null_trials, n_max=n_max, null=True, seed=0)
        for i, (test, tpr, fpr, fpr_pooled) in enumerate(zip(tests, pos, neg, pooled)):
            row = di_row(access, test, alpha, tpr, fpr)
            k_pooled = round(fpr_pooled["rejection_rate"] * null_trials)
            rows.append({"set": set_name, "columns": len(cols), "auroc": m["auroc"],
                         "auroc_ci": [m["auroc_ci_low"], m["auroc_ci_high"]],
                         **{f: row[f] for f in ("test", "tpr", "fpr", "fpr_binom_p", "mean_pairs",
                                                "mean_stop", "std_stop", "pairs", "trials", "null_trials")},
                         "fpr_pooled": fpr_pooled["rejection_rate"],
                         "fpr_pooled_binom_p": binomtest(k_pooled, null_trials, alpha, alternative="greater").pvalue})
            if access == "black" and i == 0 and set_name.startswith("black lean"):
                curve = tpr["by_alpha"][str(alpha)]["power_curve"]
            print(set_name, json.dumps(rows[-1]), flush=True)
    return rows, curve


def exposure_result(k: int, manifest: dict, table: pd.DataFrame, rows: list[dict], seconds: dict) -> dict:
    """One testbed's entry of exposures.json: its build, how good the target is on text it
    never saw (all a black-box audit reads), and the rows."""
    heldout = table[table["split"] == "heldout"]
    return {"repeats": k, "testbed": exposure_testbed(k), "member_fraction": manifest["member_fraction"],
            "heldout_loglik": float(-np.log(heldout["gray_ppl"]).mean()),
            "heldout_match_rate": float(heldout["black_match_rate"].mean()),
            "target_final_loss": manifest["target_final_loss"],
            "reference_final_loss": manifest["reference_final_loss"],
            "build_seconds": manifest["build_seconds"], "rows": rows, "seconds": seconds}


def render_exposures(report: dict, threads: int | None = None) -> str:
    """exposures.md from exposures.json's ``report`` ({"date", "args", "results", "torch_threads"});
    ``threads``: torch's threads where the report does not say (one written before it did)."""
    args, date, threads = report["args"], report["date"], report.get("torch_threads", threads)
    lines = ["# Black-box audits by exposures: members seen k times in pre-training", "",
             f"{date} · `python benchmarks/bench_exposures.py --repeats {' '.join(map(str, args['repeats']))} "
             f"--trials {args['trials']} --null-trials {args['null_trials']} --n-max {args['n_max']}` · "
             f"{threads} CPU threads · α = {args['alpha']:g} · reference: the testbed's own "
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
    for r in report["results"]:
        for row in r["rows"]:
            stop = "—" if row["mean_stop"] is None else f"{row['mean_stop']:.1f} ± {row['std_stop']:.1f}"
            lines.append(f"| {r['repeats']} | {r['member_fraction']:.3f} | {r['heldout_loglik']:.3f}, "
                         f"{r['heldout_match_rate']:.3f} | "
                         f"{row['set']} ({row['columns']}) | {row['auroc']:.3f} [{row['auroc_ci'][0]:.3f}, "
                         f"{row['auroc_ci'][1]:.3f}] | {row['test']} | {row['tpr']:.3f} | {row['fpr']:.4f} "
                         f"({row['fpr_binom_p']:.3f}) | {row['fpr_pooled']:.4f} ({row['fpr_pooled_binom_p']:.3f}) | "
                         f"{row['mean_pairs']:.1f} | {stop} |")
    lines += ["", "Plot: `black_power_by_exposures.png` (sequential power of the default black audit)."]
    return "\n".join(lines) + "\n"
