"""The benchmark of per-sample MIA methods and dataset-inference configurations on a
testbed with known members (TDDBench Sec. 3.1, 3.5, App. A.2, A.6; EZ-MIA Sec. 4–5;
BADI Sec. 5.1, App. D). Library side: the configuration, the cost measurement, the
fixed-n p-value baseline, the tables; the flow (flows/benchmark.py) orchestrates.

What is measured:

- **per-sample** (members = 1 vs non-members = 0): ``trainspotter.evaluation.metrics.method_metrics``
  of each method's scores (``trainspotter.evaluation.mia``), all methods scored from one table;
- **cost** (TDDBench Sec. 3.5, Table 7): each method's own minimal extraction
  (``Method.extraction``) plus its scoring, run on a small subsample of members and
  non-members with the models already loaded and every lazily loaded helper (MiniLM,
  BERTScore, WordNet) warmed up by an untimed run, in interleaved rounds: wall seconds
  per sample of the fastest round, and the largest peak increase of the process's
  resident set size over its value just before a run (garbage collected and freed heap
  trimmed first; sampled every 5 ms in a background thread with psutil). Memory the
  process already holds (model weights, embedding tables, loaded helpers) is not
  counted, so this is the working memory the method needed on top, not its total;
- **dataset inference**: the sequential test's Monte Carlo TPR (members vs held-out),
  FPR (non-members vs held-out, a negative control with the same data pipeline) and
  stopping times (``trainspotter.stats.simulation.simulate``), and Maini et al.'s fixed-n
  p-value (``trainspotter.stats.pvalue.di_pvalue``) on random subsamples of n pairs.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, field_validator

from trainspotter.stats.payoffs import PAYOFFS
from trainspotter.stats.strategies import STRATEGIES
from trainspotter.errors import InputError
from trainspotter.features.features import FeatureConfig
from trainspotter.evaluation.metrics import method_metrics, roc
from trainspotter.data import load_passages
from trainspotter.evaluation.mia import METHODS, Extraction, as_petal, merge_extractions, method_scores
from trainspotter.stats.pvalue import di_pvalue
from trainspotter.stats.sequential import TestConfig, split_features

__all__ = ["BenchmarkConfig", "PeakRSS", "evaluate_method", "method_cost", "method_costs", "warm_up", "di_frame",
           "pvalue_baseline", "header_line", "render_markdown", "DI_ACCESS", "SPLITS", "extraction_plan",
           "split_passages", "mia_rows", "cost_subsample", "store_table", "di_row", "pvalue_row", "di_configs", "censored_stops", "paired_saving", "compare_configurations", "best_valid"]

DI_ACCESS = ("gray", "black")
SPLITS = ("member", "nonmember", "heldout")


class BenchmarkConfig(BaseModel):
    """One benchmark run; the defaults are the full benchmark."""

    testbed: str = "tiny"
    methods: tuple[str, ...] = tuple(METHODS)
    trials: int = Field(200, ge=1)  # Monte Carlo trials per DI configuration (BADI: 1000)
    null_trials: int | None = Field(None, ge=1)  # negative-control (FPR) trials; None = trials
    n_max: int | None = Field(None, ge=4)  # pairs per trial; None = all available
    alphas: tuple[float, ...] = (0.05, 0.01)
    strategies: tuple[str, ...] = STRATEGIES
    payoffs: tuple[str, ...] = PAYOFFS
    di_access: tuple[str, ...] = DI_ACCESS  # () = no DI configurations
    lambda_max: float = Field(0.8, gt=0.0, lt=1.0)
    limit: int | None = Field(None, ge=4)  # passages per split (first ones); None = all
    n_boot: int = Field(1000, ge=0)
    folds: int = Field(5, ge=2)  # cross-fitting of the scoring-model methods
    cost_samples: int = Field(32, ge=0)  # subsample for time/memory (half members); 0 = skip
    cost_repeats: int = Field(3, ge=1)  # interleaved timing rounds; the fastest counts
    chunk_size: int = Field(64, ge=1)  # passages per cached extraction task
    seed: int = 0
    features: FeatureConfig = FeatureConfig()
    out: str | None = None  # default benchmarks/results/<testbed>/

    @field_validator("methods")
    @classmethod
    def _methods(cls, v):
        bad = [m for m in v if m not in METHODS]
        if bad or not v:
            raise ValueError(f"unknown method(s) {', '.join(map(repr, bad)) or '(none given)'}; "
                             f"choose from {', '.join(METHODS)}")
        return tuple(dict.fromkeys(v))

    @field_validator("strategies")
    @classmethod
    def _strategies(cls, v):
        return _subset(v, STRATEGIES, "strategy")

    @field_validator("payoffs")
    @classmethod
    def _payoffs(cls, v):
        return _subset(v, PAYOFFS, "payoff")

    @field_validator("di_access")
    @classmethod
    def _access(cls, v):
        return _subset(v, DI_ACCESS, "access")

    @field_validator("alphas")
    @classmethod
    def _alphas(cls, v):
        if not v or any(not 0 < a < 1 for a in v):
            raise ValueError("alphas must lie in (0, 1)")
        return tuple(dict.fromkeys(v))

    @field_validator("cost_samples")
    @classmethod
    def _cost(cls, v):
        if 0 < v < 4:
            raise ValueError("cost_samples: 0 (skip) or at least 4 (2 members + 2 non-members)")
        return v


def _subset(values, allowed, what):
    bad = [x for x in values if x not in allowed]
    if bad:
        raise ValueError(f"unknown {what}(s) {', '.join(map(repr, bad))}; choose from {', '.join(allowed)}")
    return tuple(dict.fromkeys(values))


# ---------------------------------------------------------------- what to extract

def split_passages(testbed: str, split: str, limit: int | None = None) -> list[dict]:
    """The first ``limit`` passages of one testbed split, as {id, text}."""
    from trainspotter.evaluation.testbed import split_path

    return [{"id": p["id"], "text": p["text"]} for p in load_passages(split_path(testbed, split))[:limit]]


def extraction_plan(config: BenchmarkConfig) -> tuple[tuple[str, ...], list[tuple[str, bool, FeatureConfig, bool]]]:
    """The splits to extract and the extractions that cover every selected method and DI
    access, each (access, with reference, feature config, rename to petal_*): one
    sigmoid-estimator extraction for all of them, plus a PETAL-estimator one when PETAL
    is selected. Held-out passages only matter to DI."""
    needs = [METHODS[m].extraction for m in config.methods]
    needs += [Extraction(a, reference=True, perturbations=True, sequence=a == "black") for a in config.di_access]
    main = merge_extractions(needs)
    petal = next((n for n in needs if n.estimator == "petal"), None)
    plan = []
    if main is not None:
        access, ref, pert, seq = main
        plan.append((access, ref, config.features.model_copy(
            update={"perturbations": config.features.perturbations and pert, "sequence": seq}), False))
    if petal is not None:
        plan.append(("black", True, petal.config(config.features), True))
    return (SPLITS if config.di_access else SPLITS[:2]), plan


def store_table(df: pd.DataFrame, folder: Path) -> str:
    """Write a table under a name from its content (tasks that key on the file's bytes
    then hit their cache for an unchanged table)."""
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    data = buf.getvalue()
    path = Path(folder) / f"{hashlib.sha256(data).hexdigest()[:16]}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_bytes(data)
    return str(path)


# ---------------------------------------------------------------- per-sample methods

def mia_rows(table: pd.DataFrame) -> tuple[pd.DataFrame, list[int]]:
    """The member (label 1) and non-member (label 0) rows of the features table."""
    mia = table[table["split"].isin(["member", "nonmember"])].reset_index(drop=True)
    return mia, (mia["split"] == "member").astype(int).tolist()


def cost_subsample(config: BenchmarkConfig) -> tuple[list[dict], list[int]]:
    """The seeded subsample the cost is measured on: up to ``cost_samples / 2`` members and
    as many non-members (within the first ``limit`` of each split), with their labels."""
    rng = np.random.default_rng(config.seed)
    passages, labels = [], []
    for split, label in (("member", 1), ("nonmember", 0)):
        ps = split_passages(config.testbed, split, config.limit)
        k = min(config.cost_samples // 2, len(ps))
        passages += [ps[i] for i in sorted(rng.choice(len(ps), k, replace=False))]
        labels += [label] * k
    return passages, labels


def evaluate_method(name: str, df: pd.DataFrame, labels, folds: int = 5, seed: int = 0,
                    n_boot: int = 1000) -> dict:
    """Scores of one method on the member/non-member rows of ``df`` -> ``method_metrics``
    and the ROC points ({"metrics", "fpr", "tpr", "scores"})."""
    scores = method_scores(name, df, labels, folds, seed)
    bad = int((~np.isfinite(scores)).sum())
    if bad:
        raise ValueError(f"method {name!r}: {bad} of {len(scores)} scores are NaN or infinite "
                         f"(a feature column of {', '.join(METHODS[name].columns)} is missing values)")
    fpr, tpr, _ = roc(labels, scores)
    return {"metrics": method_metrics(labels, scores, n_boot=n_boot, seed=seed),
            "fpr": fpr.tolist(), "tpr": tpr.tolist(), "scores": scores.tolist()}


class PeakRSS:
    """``with PeakRSS() as m: ...`` then ``m.peak_mb``: the peak increase of this process's
    resident set size over its value at entry. On Linux the kernel's own high-water mark
    (VmHWM, reset on entry through /proc/self/clear_refs) makes it exact; elsewhere, or where
    the reset is refused, psutil samples RSS every ``interval`` seconds in a background thread,
    which can miss a short-lived peak. ``peak_mb`` is None when neither is available."""

    def __init__(self, interval: float = 0.005):
        self.interval, self.peak_mb = interval, None
        try:
            import psutil
        except ImportError:  # pragma: no cover - psutil ships with the dev environment
            self._proc = None
        else:
            self._proc = psutil.Process()

    @staticmethod
    def _hwm() -> int | None:
        """VmHWM in bytes, or None off Linux."""
        try:
            status = Path("/proc/self/status").read_text()
        except OSError:
            return None
        line = next((ln for ln in status.splitlines() if ln.startswith("VmHWM:")), None)
        return int(line.split()[1]) * 1024 if line else None

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._peak = max(self._peak, self._proc.memory_info().rss)

    def __enter__(self) -> "PeakRSS":
        if self._proc is None:
            return self
        try:  # "5" resets the peak RSS to the current RSS (Linux ≥ 4.0)
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass
        hwm, self._base = self._hwm(), self._proc.memory_info().rss
        # trust the kernel's mark only where the reset took effect (sandboxed kernels such
        # as gVisor accept the write, or lack VmHWM, without resetting anything)
        self._exact = hwm is not None and hwm - self._base < 16 * 2**20
        self._peak = self._base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._proc is None:
            return
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, self._proc.memory_info().rss, (self._hwm() or 0) if self._exact else 0)
        self.peak_mb = (self._peak - self._base) / 2**20


def warm_up(passages: list[dict], target, reference, base: FeatureConfig | None = None) -> None:
    """One untimed run of every extraction path (loads MiniLM, BERTScore, WordNet)."""
    from trainspotter.features.extract import extract

    base = base or FeatureConfig()
    extract(passages[:2], target, reference, "both", base)
    extract(passages[:2], target, reference, "black",
            base.model_copy(update={"estimator": "petal", "perturbations": False, "sequence": False}))


def _release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc ``malloc_trim``), so
    the RSS before a run is not inflated by pages an earlier run freed but kept."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the RSS baseline just stays higher
        pass


def method_cost(name: str, passages: list[dict], labels, target, reference,
                base: FeatureConfig | None = None, folds: int = 5, seed: int = 0) -> dict:
    """Wall time and peak RSS increase of one run of method ``name``'s own minimal
    extraction (``METHODS[name].extraction.config(base)``) plus its scoring on ``passages``."""
    from trainspotter.features.extract import extract

    method = METHODS[name]
    ex = method.extraction
    config = ex.config(base)
    _release_memory()
    with PeakRSS() as mem:
        start = time.perf_counter()
        df = extract(passages, target, reference if ex.reference else None, ex.access, config)
        if ex.estimator == "petal":
            df = as_petal(df)
        method_scores(name, df, labels, folds, seed)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_rss_mb": mem.peak_mb}


def method_costs(names: list[str], passages: list[dict], labels, target, reference,
                 base: FeatureConfig | None = None, folds: int = 5, seed: int = 0,
                 repeats: int = 3) -> dict[str, dict]:
    """``method_cost`` of every method after an untimed ``warm_up``, ``repeats`` interleaved
    rounds (method 1, 2, …, then again), so a busy machine or a first-call effect hits all
    methods alike. Per method: the fastest round's seconds (and seconds per sample) and the
    largest peak RSS increase of any round."""
    warm_up(passages, target, reference, base)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(repeats):
        for name in names:
            runs[name].append(method_cost(name, passages, labels, target, reference, base, folds, seed))
    out = {}
    for name, rs in runs.items():
        seconds = min(r["seconds"] for r in rs)
        peaks = [r["peak_rss_mb"] for r in rs if r["peak_rss_mb"] is not None]
        out[name] = {"seconds": seconds, "seconds_per_sample": seconds / len(passages),
                     "peak_rss_mb": max(peaks) if peaks else None, "cost_samples": len(passages),
                     "repeats": repeats}
    return out


# ---------------------------------------------------------------- dataset inference

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


def di_row(access: str, test: TestConfig, alpha: float, tpr: dict, fpr: dict) -> dict:
    """One sequential DI configuration's row at level ``alpha`` from its two Monte Carlo
    results (members vs held-out: power and stopping times; non-members vs held-out: FPR,
    with a one-sided binomial test of H: FPR ≤ α)."""
    from scipy.stats import binomtest

    pos, neg = tpr["by_alpha"][str(alpha)], fpr["by_alpha"][str(alpha)]
    k = int(round(neg["rejection_rate"] * fpr["trials"]))
    return {"access": access, "test": f"{test.strategy}/{test.payoff}", "strategy": test.strategy,
            "payoff": test.payoff, "alpha": alpha, "tpr": pos["rejection_rate"], "fpr": neg["rejection_rate"],
            "fpr_binom_p": float(binomtest(k, fpr["trials"], alpha, alternative="greater").pvalue),
            "mean_stop": pos["mean_stop"], "std_stop": pos["std_stop"],
            "mean_pairs": float(censored_stops(pos["stop_times"], tpr["pairs"]).mean()),
            "fpr_mean_stop": neg["mean_stop"], "pairs": tpr["pairs"], "trials": tpr["trials"],
            "null_trials": fpr["trials"], "stop_times": pos["stop_times"]}


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
    accesses benchmarked, among those whose negative-control FPR is not significantly
    above α in any access (one-sided binomial p ≥ ``level``). How the default preset is
    chosen."""
    cells: dict[str, list[dict]] = {}
    for r in rows:
        if r["alpha"] == alpha and "mean_pairs" in r:
            cells.setdefault(r["test"], []).append(r)
    valid = {k: v for k, v in cells.items() if all(r["fpr_binom_p"] >= level for r in v)}
    if not valid:
        return None
    test = min(valid, key=lambda k: np.mean([r["mean_pairs"] for r in valid[k]]))
    return {"test": test, "alpha": alpha, "mean_pairs": float(np.mean([r["mean_pairs"] for r in valid[test]])),
            "rows": [{k: r.get(k) for k in ("access", "mean_pairs", "tpr", "fpr", "fpr_binom_p", "saving",
                                            "saving_ci_low", "saving_ci_high")} for r in valid[test]]}


def pvalue_row(access: str, alpha: float, pos: dict, neg: dict) -> dict:
    """The fixed-n p-value baseline's table row at ``alpha`` from ``pvalue_baseline`` results."""
    from scipy.stats import binomtest

    fpr = neg["rejection_rate"][str(alpha)]
    k = int(round(fpr * neg["trials"]))
    return {"access": access, "test": "p-value (fixed n)", "strategy": "pvalue", "payoff": None,
            "alpha": alpha, "tpr": pos["rejection_rate"][str(alpha)], "fpr": fpr,
            "fpr_binom_p": float(binomtest(k, neg["trials"], alpha, alternative="greater").pvalue),
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


# ---------------------------------------------------------------- report

def header_line(config: BenchmarkConfig, commit: str, device: str) -> str:
    """Date, hardware, git commit and configuration of a benchmark run, on one line."""
    cfg = config.model_dump(mode="json", exclude={"out"})
    return (f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} · {os.cpu_count()} CPU cores · "
            f"torch device {device} · git {commit[:12]} · config {json.dumps(cfg, separators=(',', ':'))}")


def _f(x, digits: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def _saving(r: dict) -> str:
    """Saving vs the paper's ons/mmd with its CI, or "—" where that configuration was not
    benchmarked (a subset of strategies or payoffs without it)."""
    if r.get("saving") is None:
        return "—"
    return f"{r['saving']:+.1%} [{r['saving_ci_low']:+.1%}, {r['saving_ci_high']:+.1%}]"


def _ci(m: dict, key: str) -> str:
    lo, hi = m.get(f"{key}_ci_low"), m.get(f"{key}_ci_high")
    return _f(m[key]) + ("" if lo is None else f" [{_f(lo)}, {_f(hi)}]")


def render_markdown(title: str, header: str, methods: list[dict], di: list[dict],
                    best: list[dict] | None = None) -> str:
    """The benchmark tables: per-sample methods (value [95% bootstrap CI]) with cost, and
    DI configurations with TPR, negative-control FPR and pairs to decision."""
    lines = [f"# {title}", "", header, ""]
    if methods:
        n1, n0 = methods[0]["metrics"]["n_members"], methods[0]["metrics"]["n_nonmembers"]
        lines += [f"## Per-sample membership inference ({n1} members vs {n0} non-members)", "",
                  "Value [95% stratified bootstrap CI]. TPR at FPR ≤ x: the best ROC operating point "
                  "with FPR ≤ x, no interpolation (with m non-members only multiples of 1/m exist). "
                  "Precision … MA at the threshold maximising MA = TPR − FPR on these scores "
                  "(in-sample, optimistic, as in TDDBench App. A.6). s/sample and peak MB: the "
                  "method's own minimal extraction + scoring on a subsample (module docstring of "
                  "trainspotter.evaluation.benchmark).", "",
                  "| method | access | AUROC | TPR@1%FPR | TPR@0.1%FPR | TPR@10%FPR | precision | recall "
                  "| F1 | accuracy | FPR | FNR | MA | s/sample | peak MB |",
                  "|---" * 15 + "|"]
        for r in methods:
            m, c = r["metrics"], r.get("cost") or {}
            cells = [r["label"], r["access"], _ci(m, "auroc"), _ci(m, "tpr_at_1pct_fpr"),
                     _ci(m, "tpr_at_0.1pct_fpr"), _ci(m, "tpr_at_10pct_fpr")]
            cells += [_ci(m, k) for k in ("precision", "recall", "f1", "accuracy", "fpr", "fnr", "advantage")]
            cells += [_f(c.get("seconds_per_sample"), 4), _f(c.get("peak_rss_mb"), 1)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if di:
        lines += ["## Dataset inference (members vs held-out; FPR: non-members vs held-out)", "",
                  "Monte Carlo over random orders of at most N_max pairs (BADI Sec. 5.1, App. D); every "
                  "configuration sees the same trial streams. Pairs to decision: mean over all member "
                  "trials with a non-rejection counted as N_max (censored), and mean ± std over rejecting "
                  "trials. Saving: 1 − pairs / pairs of the paper's ons/mmd on the same trials, "
                  "[95% paired bootstrap CI]. Binomial p: one-sided test of FPR ≤ α. The p-value rows use "
                  "a fixed n = N_max per trial (Maini et al., BADI App. A.8).", "",
                  "| access | test | α | TPR | FPR (negative control) | binomial p | pairs to decision "
                  "(censored) | saving vs paper | rejecting: mean ± std | N_max | trials (control) |",
                  "|---" * 11 + "|"]
        for r in di:
            stop = "—" if r.get("mean_stop") is None else f"{r['mean_stop']:.1f} ± {r['std_stop']:.1f}"
            lines.append(f"| {r['access']} | {r['test']} | {r['alpha']:g} | {_f(r['tpr'])} | {_f(r['fpr'])} "
                         f"| {_f(r.get('fpr_binom_p'))} | {_f(r.get('mean_pairs'), 1)} | {_saving(r)} | {stop} "
                         f"| {r['pairs']} | {r['trials']} ({r.get('null_trials', r['trials'])}) |")
        lines.append("")
    for b in best or []:
        per = "; ".join(f"{r['access']}: {r['mean_pairs']:.1f} pairs, saving vs paper {_saving(r)}, "
                        f"FPR {r['fpr']:.4f} (binomial p {r['fpr_binom_p']:.3g})" for r in b["rows"])
        lines += [f"**Best valid configuration at α = {b['alpha']:g}** (fewest censored pairs to decision "
                  f"averaged over accesses, FPR not significantly above α): `{b['test']}` — {per}.", ""]
    return "\n".join(lines)
