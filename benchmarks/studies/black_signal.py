"""What the black-box features carry and how many pairs a black-box audit needs (issue 20,
``benchmarks/bench_black.py``), on a benchmark's features table:

1. ``ablation``: the cross-fitted scoring model (``evaluation.mia.cross_fit``, the one
   ``scoring_black`` uses) on each group of columns alone (``groups``: label-only greedy match;
   BADI's estimated probabilities, App. A.6, with the sigmoid, raw and PETAL estimators; the
   perturbations, App. A.3; suffix similarity, App. B.1; the reference-relative columns; all black;
   the gray sets for comparison), AUROC with a 95% stratified bootstrap CI.
2. ``gray_vs_black``: the audit's default test on the gray and on the black features, the same
   trial streams (BADI Fig. 4), and the pairs at which the mean log-wealth E[log W_t], a line
   fitted over the last half of the stream, reaches log(1/α): an extrapolation of the typical
   crossing, not a measured stopping time.
3. ``boundary_counts``, ``boundary_rows``: every token position binned by the reference's margin
   of the true token (log p_ref(x_i) minus the largest log-prob of another token); per bin,
   members minus non-members in the target's greedy-match rate (all a label-only API reveals)
   and in its log-p gain over the reference (what gray-box RefL reads), with 95% bootstrap CIs
   over passages.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

__all__ = ["EDGES", "groups", "ablation", "extrapolated_pairs", "gray_vs_black", "boundary_counts", "boundary_rows", "boundary_table",
           "render_black"]

EDGES = np.array([-np.inf, -4.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, np.inf])  # reference margins (nats)


def _relative(c: str) -> bool:
    return "_ref_" in c or "_refs_" in c or c.endswith("_ez")


def _token_level(c: str) -> bool:
    return not (_relative(c) or "_pert_" in c or "_seq_" in c or c.endswith("_match_rate"))


def groups(lean_gray: set[str]) -> dict:
    """name: predicate on a column name (raw estimator's columns renamed raw_*, PETAL's petal_*);
    ``lean_gray``: the default gray audit's columns."""
    return {
        "label-only greedy match": lambda c: c == "black_match_rate",
        "estimated probabilities, sigmoid (token-level)": lambda c: c.startswith("black_") and _token_level(c),
        "estimated probabilities, raw (token-level)": lambda c: c.startswith("raw_") and _token_level(c),
        "estimated probabilities, PETAL (token-level)": lambda c: c.startswith("petal_") and _token_level(c),
        "perturbations (estimated, 6 kinds)": lambda c: c.startswith("black_pert_"),
        "suffix similarity (BERTScore, 7 prefixes)": lambda c: c.startswith("black_seq_bertscore"),
        "reference-relative (label-only and estimated)": lambda c: c.startswith("black_") and _relative(c),
        "all black": lambda c: c.startswith("black_"),
        "gray lean (the default gray audit's set)": lambda c: c in lean_gray,
        "all gray": lambda c: c.startswith("gray_"),
    }


def ablation(mia: pd.DataFrame, labels, lean_gray: set[str], folds: int, seed: int, n_boot: int) -> list[dict]:
    """Per group with columns in ``mia`` (``benchmark.mia_rows``): the cross-fitted scoring
    model's AUROC [95% CI] and TPR at 1% FPR."""
    from trainspotter.evaluation.metrics import method_metrics
    from trainspotter.evaluation.mia import cross_fit

    out = []
    for name, keep in groups(lean_gray).items():
        cols = [c for c in mia.columns if keep(str(c))]
        if not cols:
            continue
        scores = cross_fit(mia[cols].to_numpy(dtype=float), labels, folds, seed)
        m = method_metrics(labels, scores, n_boot=n_boot, seed=seed)
        out.append({"group": name, "columns": len(cols), "auroc": m["auroc"],
                    "auroc_ci": [m["auroc_ci_low"], m["auroc_ci_high"]],
                    "tpr_at_1pct_fpr": m["tpr_at_1pct_fpr"], "names": cols})
        print(f"{name}: {len(cols)} columns, AUROC {m['auroc']:.3f}", flush=True)
    return out


def extrapolated_pairs(logw: np.ndarray, alphas) -> tuple[float, float, dict]:
    """The line fitted to the mean log-wealth over the last half of the stream (t = n/2 + 1 … n):
    its slope, intercept and, per α, the pairs t where it reaches log(1/α) (inf: no growth)."""
    n = len(logw)
    half = np.arange(n // 2, n)
    slope, intercept = np.polyfit(half + 1, logw[half], 1)
    return slope, intercept, {str(a): (math.log(1 / a) - intercept) / slope if slope > 0 else math.inf
                              for a in alphas}


def gray_vs_black(table: pd.DataFrame, test, trials: int, n_max: int | None, seed: int, alphas) -> tuple[dict, dict]:
    """The default ``test`` on the gray and on the black columns of ``table`` (members against
    held-out), the same trial streams: per access the TPR within N_max, the censored pairs to
    decision, the mean log-wealth at N_max and its growth per pair, the extrapolated pairs to
    log(1/α); and the sequential power curves."""
    from trainspotter.auditing.tables import simulate_many
    from trainspotter.evaluation.benchmark_di import censored_stops, di_frame

    curves, growth = {}, {}
    for access in ("gray", "black"):
        pos = di_frame(table.drop(columns=[c for c in table.columns if str(c).startswith(("raw_", "petal_"))]),
                       "member", access)
        res = simulate_many(pos, [test], trials=trials, n_max=n_max, seed=seed, alphas=alphas)[0]
        n = res["pairs"]
        logw = np.asarray(res["mean_log_wealth"])
        slope, _, need = extrapolated_pairs(logw, alphas)
        at = res["by_alpha"][str(test.alpha)]
        growth[access] = {"pairs": n, "tpr": at["rejection_rate"],
                          "pairs_to_decision": float(censored_stops(at["stop_times"], n).mean()),
                          "mean_log_wealth_end": float(logw[-1]), "slope_per_pair": float(slope),
                          "extrapolated_pairs": {a: (None if math.isinf(v) else max(float(v), 0.0))
                                                 for a, v in need.items()}}
        curves[f"{access}-box ({test.strategy}/{test.payoff})"] = at["power_curve"]
        print(access, json.dumps(growth[access]), flush=True)
    return growth, curves


def boundary_counts(target_scores, reference_scores, edges: np.ndarray = EDGES) -> np.ndarray:
    """(passages, 3, bins): per passage and reference-margin bin, the token positions, the
    target's greedy matches there and its summed log-p gain over the reference. ``*_scores``:
    the backends' ``TokenScores`` of the same texts (the reference's with its distribution)."""
    counts = np.zeros((len(target_scores), 3, len(edges) - 1))
    for i, (t, r) in enumerate(zip(target_scores, reference_scores)):
        other = np.where(r.argmax == r.token_ids, r.top_logprobs[:, 1], r.top_logprobs[:, 0])
        b = np.digitize(r.logprobs - other, edges[1:-1])
        for row, values in enumerate((np.ones_like(r.logprobs), (t.argmax == t.token_ids).astype(float),
                                      t.logprobs - r.logprobs)):
            counts[i, row] = np.bincount(b, weights=values, minlength=len(edges) - 1)
    return counts


def boundary_rows(M: np.ndarray, N: np.ndarray, n_boot: int, seed: int, edges: np.ndarray = EDGES) -> list[dict]:
    """Per bin, from members' and non-members' ``boundary_counts``: the share of all positions,
    the non-members' match rate, and members minus non-members in match rate and mean gain
    (pooled over positions), with 95% bootstrap CIs resampling passages."""
    rng = np.random.default_rng(seed)

    def diff(m, n):  # per bin: (match rate, mean gain) members minus non-members
        sm, sn = m.sum(0), n.sum(0)
        return sm[1] / sm[0] - sn[1] / sn[0], sm[2] / sm[0] - sn[2] / sn[0]

    point = diff(M, N)
    boot = np.array([diff(M[rng.integers(0, len(M), len(M))], N[rng.integers(0, len(N), len(N))])
                     for _ in range(n_boot)])
    lo, hi = np.quantile(boot, 0.025, axis=0), np.quantile(boot, 0.975, axis=0)
    total = M[:, 0].sum() + N[:, 0].sum()
    return [{"margin": [float(edges[j]), float(edges[j + 1])],
             "share_of_positions": float((M[:, 0, j].sum() + N[:, 0, j].sum()) / total),
             "match_rate_nonmember": float(N[:, 1, j].sum() / N[:, 0, j].sum()),
             "match_diff": float(point[0][j]), "match_diff_ci": [float(lo[0][j]), float(hi[0][j])],
             "gain_diff": float(point[1][j]), "gain_diff_ci": [float(lo[1][j]), float(hi[1][j])]}
            for j in range(len(edges) - 1)]


def boundary_table(testbed: str, reference: str, limit: int | None, batch_size: int, n_boot: int,
                   seed: int) -> list[dict]:
    """``boundary_rows`` of a testbed's members and non-members under its target and ``reference``."""
    from trainspotter.backends import load_backend
    from trainspotter.evaluation.benchmark import split_passages

    target, ref = load_backend(f"testbed:{testbed}", batch_size), load_backend(reference, batch_size)
    per_split = {}
    for split in ("member", "nonmember"):
        texts = [p["text"] for p in split_passages(testbed, split, limit)]
        per_split[split] = boundary_counts(target.score(texts), ref.score(texts, distribution=True))
    return boundary_rows(per_split["member"], per_split["nonmember"], n_boot, seed)


def _ablation_lines(result: dict) -> list[str]:
    return ["## Feature-group ablation (per sample, cross-fitted scoring model)", "",
            "| group | columns | AUROC [95% CI] | TPR@1%FPR |", "|---|---|---|---|",
            *(f"| {r['group']} | {r['columns']} | {r['auroc']:.3f} [{r['auroc_ci'][0]:.3f}, "
              f"{r['auroc_ci'][1]:.3f}] | {r['tpr_at_1pct_fpr']:.3f} |" for r in result["ablation"])]


def _growth_lines(result: dict, alphas) -> list[str]:
    growth = result["gray_vs_black"]
    lines = ["", f"## Gray vs black on the same pairs (default test {result['test']}, "
             f"α = {result['alpha']:g}, {result['trials']} trials, N_max = {growth['black']['pairs']})", "",
             "| access | TPR within N_max | pairs to decision (censored mean, measured) | mean log-wealth at "
             "N_max | growth per pair (last half) | "
             + " | ".join(f"pairs to log(1/{a:g}) (extrapolated)" for a in alphas) + " |",
             "|---|---|---|---|---|" + "---|" * len(alphas)]
    for access, g in growth.items():
        need = [f"{v:.0f}" if v is not None else "never (no growth)" for v in g["extrapolated_pairs"].values()]
        lines.append(f"| {access} | {g['tpr']:.3f} | {g['pairs_to_decision']:.1f} | {g['mean_log_wealth_end']:.2f} | "
                     f"{g['slope_per_pair']:.5f} | " + " | ".join(need) + " |")
    return lines + ["", "Extrapolated pairs: where a line fitted to the mean log-wealth over the last half of the "
                    "stream reaches log(1/α); the typical crossing if the growth stayed as it was, not a measured "
                    "stopping time: a trial stops the first time its own noisy wealth reaches 1/α, before the mean "
                    "log-wealth does, so the extrapolation overstates the pairs to decision (compare the measured "
                    "column where both exist). Plot: `gray_vs_black_power.png`."]


def render_black(result: dict, out: str, labels, references: list[str], alphas) -> str:
    """black.md from ``result`` (what black.json holds); ``out``: the results folder named in the
    command line, ``labels``: the per-sample labels, ``references``: the benchmark's."""
    boundary = result["boundary"]
    lines = [f"# Black-box features on `{result['testbed']}`: what carries the signal, and how many pairs", "",
             f"`python benchmarks/bench_black.py --results {out}` · {len(labels)} passages "
             f"({sum(labels)} members vs {len(labels) - sum(labels)} non-members) · references: "
             f"{', '.join(references) or 'the testbed reference'}", "",
             *_ablation_lines(result), *_growth_lines(result, alphas), "",
             f"## Where the membership signal sits (every token position; reference `{boundary['reference']}`)", "",
             "Positions binned by the reference's margin of the true token (≥ 0: the reference's greedy "
             "token is the true one). Members minus non-members [95% bootstrap CI over passages]: the "
             "target's greedy-match rate (what a label-only API shows) and its log-p gain over the "
             "reference (what gray-box RefL reads).", "",
             "| reference margin (nats) | share of positions | non-members' match rate | match rate, "
             "members − non-members | log-p gain, members − non-members |", "|---|---|---|---|---|"]
    lines += [f"| [{b['margin'][0]:g}, {b['margin'][1]:g}) | {b['share_of_positions']:.3f} | "
              f"{b['match_rate_nonmember']:.4f} | {b['match_diff']:+.4f} [{b['match_diff_ci'][0]:+.4f}, "
              f"{b['match_diff_ci'][1]:+.4f}] | {b['gain_diff']:+.4f} [{b['gain_diff_ci'][0]:+.4f}, "
              f"{b['gain_diff_ci'][1]:+.4f}] |" for b in boundary["bins"]]
    return "\n".join(lines) + "\n"
