"""Dataset inference in the benchmark (BADI Sec. 5.1, App. D): the sequential test's Monte
Carlo TPR (members vs held-out), FPR (non-members vs held-out, a negative control with the
same data pipeline), the pooled control's FPR (non-members ∪ held-out split anew in every
trial) and stopping times (``trainspotter.auditing.tables.simulate_many``),
the paired comparison of configurations, and Maini et al.'s fixed-n p-value
(``trainspotter.stats.pvalue.di_pvalue``) on random subsamples of n pairs.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from trainspotter.data import split_features
from trainspotter.errors import InputError
from trainspotter.evaluation.benchmark import BenchmarkConfig
from trainspotter.stats.pvalue import di_pvalue
from trainspotter.stats.sequential import TestConfig

__all__ = ["di_frame", "pooled_frame", "di_configs", "censored_stops", "paired_saving", "di_row",
           "compare_configurations", "best_valid", "pvalue_row", "pvalue_baseline"]


def di_frame(table: pd.DataFrame, suspect_split: str, access: str) -> pd.DataFrame:
    """The DI table of one comparison: rows of ``suspect_split`` (member: the alternative;
    nonmember: the negative control) as ``set = suspect``, the held-out rows as
    ``heldout``, and every ``<access>_*`` feature column."""
    cols = [c for c in table.columns if str(c).startswith(f"{access}_")]
    if not cols:
        raise InputError(f"the features table has no {access}_* columns for {access}-box DI")
    rows = table[table["split"].isin([suspect_split, "heldout"])]
    out = rows[cols].reset_index(drop=True)
    out.insert(0, "set", np.where(rows["split"].to_numpy() == "heldout", "heldout", "suspect"))
    return out


def pooled_frame(table: pd.DataFrame, access: str) -> pd.DataFrame:
    """The pooled negative control for ``simulate_many(..., null=True)``, which splits the
    ``heldout`` rows into two random halves in every trial: here the non-member and held-out
    rows (the members stay as the table's ``suspect`` rows, which a null run does not use).
    With N_max near the pool, every trial of the non-members-vs-held-out control reorders
    the same two sets, so its FPR is conditional on that one split; the pooled control draws
    a new split per trial, so its FPR is the unconditional one the guarantee (Type-I error
    ≤ α under exchangeable sides) is about."""
    members = di_frame(table, "member", access)
    pool = di_frame(table, "nonmember", access).assign(set="heldout")
    return pd.concat([members[members["set"] == "suspect"], pool], ignore_index=True)


def di_configs(config: BenchmarkConfig) -> list[TestConfig]:
    """Every payoff × strategy of the benchmark (levels: ``config.alphas``, one pass)."""
    return [TestConfig(alpha=config.alphas[0], strategy=s, payoff=p, lambda_max=config.lambda_max,
                       seed=config.seed) for p in config.payoffs for s in config.strategies]


def censored_stops(stops, n: int) -> np.ndarray:
    """Pairs to decision per trial with a non-rejection counted as the N_max pairs it used
    (what an audit capped at N_max pays), so configurations are compared on all trials."""
    stops = np.asarray(stops)
    return np.where(stops > 0, stops, n).astype(float)


def paired_saving(stops: list[int], reference: list[int], n: int, n_boot: int = 2000, seed: int = 0) -> dict:
    """1 − mean(censored stops) / mean(censored reference stops) on the same trial streams
    (paired: trial i of both saw the same pairs), with a percentile bootstrap 95% CI over
    trials."""
    a, b = censored_stops(stops, n), censored_stops(reference, n)
    idx = np.random.default_rng(seed).integers(0, len(a), size=(n_boot, len(a)))
    boot = 1.0 - a[idx].mean(axis=1) / b[idx].mean(axis=1)
    return {"saving": float(1.0 - a.mean() / b.mean()), "saving_ci_low": float(np.quantile(boot, 0.025)),
            "saving_ci_high": float(np.quantile(boot, 0.975))}


def _binom_p(rate: float, trials: int, alpha: float) -> float:
    """The one-sided binomial p of H: FPR ≤ α for a control that rejected in ``rate`` of
    its ``trials``."""
    from scipy.stats import binomtest

    return float(binomtest(int(round(rate * trials)), trials, alpha, alternative="greater").pvalue)


def _fpr(result: dict, alpha: float) -> tuple[float, float]:
    """A simulated negative control's rejection rate at ``alpha`` and its ``_binom_p``."""
    rate = result["by_alpha"][str(alpha)]["rejection_rate"]
    return rate, _binom_p(rate, result["trials"], alpha)


def di_row(access: str, test: TestConfig, alpha: float, tpr: dict, fpr: dict, pooled: dict | None = None) -> dict:
    """One sequential DI configuration's row at level ``alpha`` from its Monte Carlo results
    (members vs held-out: power and stopping times; non-members vs held-out: FPR; ``pooled``,
    the ``pooled_frame`` control: FPR with a new split per trial), each FPR with a one-sided
    binomial test of H: FPR ≤ α."""
    pos = tpr["by_alpha"][str(alpha)]
    rate, p = _fpr(fpr, alpha)
    row = {"access": access, "test": f"{test.strategy}/{test.payoff}", "strategy": test.strategy,
           "payoff": test.payoff, "alpha": alpha, "tpr": pos["rejection_rate"], "fpr": rate, "fpr_binom_p": p,
           "mean_stop": pos["mean_stop"], "std_stop": pos["std_stop"],
           "mean_pairs": float(censored_stops(pos["stop_times"], tpr["pairs"]).mean()),
           "fpr_mean_stop": fpr["by_alpha"][str(alpha)]["mean_stop"], "pairs": tpr["pairs"], "trials": tpr["trials"],
           "null_trials": fpr["trials"], "stop_times": pos["stop_times"]}
    if pooled is not None:
        row["fpr_pooled"], row["fpr_pooled_binom_p"] = _fpr(pooled, alpha)
        row["pooled_pairs"] = pooled["pairs"]
    return row


def compare_configurations(rows: list[dict], reference: str, n_boot: int = 2000, seed: int = 0) -> None:
    """Add to every sequential row its ``paired_saving`` against the ``reference`` test
    (e.g. "ons/mmd", the paper's) of the same access and α."""
    ref = {(r["access"], r["alpha"]): r for r in rows if r["test"] == reference}
    for r in rows:
        base = ref.get((r["access"], r["alpha"]))
        if base is not None and "stop_times" in r:
            r.update(paired_saving(r["stop_times"], base["stop_times"], r["pairs"], n_boot, seed))


def best_valid(rows: list[dict], alpha: float, level: float = 0.05) -> dict | None:
    """The configuration with the fewest censored pairs to decision, averaged over the
    accesses benchmarked, among those whose negative-control FPRs (non-members vs held-out
    and, where measured, the pooled control) are not significantly above α in any access
    (one-sided binomial p ≥ ``level``). How the default preset is chosen."""
    cells: dict[str, list[dict]] = {}
    for r in rows:
        if r["alpha"] == alpha and "mean_pairs" in r:
            cells.setdefault(r["test"], []).append(r)
    valid = {k: v for k, v in cells.items()
             if all(r["fpr_binom_p"] >= level and r.get("fpr_pooled_binom_p", 1.0) >= level for r in v)}
    if not valid:
        return None
    test = min(valid, key=lambda k: np.mean([r["mean_pairs"] for r in valid[k]]))
    return {"test": test, "alpha": alpha, "mean_pairs": float(np.mean([r["mean_pairs"] for r in valid[test]])),
            "rows": [{k: r.get(k) for k in ("access", "mean_pairs", "tpr", "fpr", "fpr_binom_p", "fpr_pooled",
                                            "fpr_pooled_binom_p", "saving", "saving_ci_low", "saving_ci_high")}
                     for r in valid[test]]}


def pvalue_row(access: str, alpha: float, pos: dict, neg: dict) -> dict:
    """The fixed-n p-value baseline's table row at ``alpha`` from ``pvalue_baseline`` results."""
    fpr = neg["rejection_rate"][str(alpha)]
    return {"access": access, "test": "p-value (fixed n)", "strategy": "pvalue", "payoff": None,
            "alpha": alpha, "tpr": pos["rejection_rate"][str(alpha)], "fpr": fpr,
            "fpr_binom_p": _binom_p(fpr, neg["trials"], alpha),
            "mean_stop": None, "std_stop": None, "pairs": pos["pairs"], "trials": pos["trials"],
            "null_trials": neg["trials"]}


def pvalue_baseline(df: pd.DataFrame, trials: int, n_max: int | None, alphas=(0.05, 0.01),
                    seed: int = 0, n_shuffles: int = 4) -> dict:
    """Fixed-n DI p-value (Maini et al. 2024; BADI App. A.8): in each of ``trials`` trials
    draw n suspect and n held-out rows without replacement, n = min(n_max, both sizes),
    and compute ``di_pvalue``; the rejection rate at α is the fraction of trials with p < α."""
    S, H, _ = split_features(df)
    n = min(len(S), len(H), n_max or math.inf)
    rng = np.random.default_rng(seed)
    p = np.array([di_pvalue(S[rng.choice(len(S), n, replace=False)], H[rng.choice(len(H), n, replace=False)],
                            n_shuffles=n_shuffles, seed=int(rng.integers(2**31)))["p_value"]
                  for _ in range(trials)])
    return {"pairs": int(n), "trials": int(trials), "p_values": p.tolist(),
            "rejection_rate": {str(a): float((p < a).mean()) for a in alphas}}
