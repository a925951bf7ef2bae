"""TDDBench's protocol (Sec. 3, App. A.5, A.6) on a testbed with known members: repeated
random partitions, the ten metrics as mean ± std, time and memory per method, grouped by
paradigm.

A **partition** (seed ``seed`` + its index) splits the candidates: a random half of the
members and a random half of the non-members (rounded down) are the *evaluation* rows, the
rest are the *training* rows. Every method is scored on the evaluation rows only; a method
that fits something (``Method.fits``: the learning-based classifiers, the scoring models)
fits on the training rows (the classifiers on the shadow model's columns and membership,
the scoring models on the target's columns and labels), so no scored passage is ever one it
fitted on. The population (RMIA's, Query-qrm's, Query-transfer's auxiliary text) is the
held-out split, which no model trained on. TDDBench re-partitions and re-trains its models
five times; the testbed's models are fixed, so here the partitions vary what is evaluated and
what fits, not the target, and they overlap: the std is evaluation-sample noise, smaller than
the spread over re-trained targets that TDDBench's std includes.

The ten metrics of App. A.6 (Tables 14–16): precision, recall, F1, accuracy, FNR, FPR,
membership advantage MA = TPR − FPR (at the MA-maximising threshold, in-sample as TDDBench),
TPR at 1% and 10% FPR, AUROC (``trainspotter.evaluation.metrics``); per method their mean
and sample standard deviation (ddof 1) over the partitions.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from trainspotter.evaluation.method_index import PARADIGMS
from trainspotter.evaluation.metrics import method_metrics
from trainspotter.evaluation.mia import METHODS, method_scores

__all__ = ["PARADIGMS", "TEN_METRICS", "partitions", "partition_metrics", "summarise", "render_tddbench"]

# (key in method_metrics, column title), in TDDBench Table 14's order
TEN_METRICS = (("precision", "Precision"), ("recall", "Recall"), ("f1", "F1"), ("accuracy", "Acc"),
               ("fnr", "FNR ↓"), ("fpr", "FPR ↓"), ("advantage", "MA"), ("tpr_at_1pct_fpr", "TPR@1%FPR"),
               ("tpr_at_10pct_fpr", "TPR@10%FPR"), ("auroc", "AUROC"))


def partitions(labels, n: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n`` (evaluation, training) index pairs: partition k draws, with generator seed
    ``seed + k``, ⌊n₁/2⌋ of the n₁ members and ⌊n₀/2⌋ of the n₀ non-members for evaluation;
    the other rows are training. Sorted indices."""
    y = np.asarray(labels).astype(int)
    out = []
    for k in range(n):
        rng = np.random.default_rng(seed + k)
        chosen = np.concatenate([rng.choice(idx, len(idx) // 2, replace=False)
                                 for idx in (np.flatnonzero(y == 1), np.flatnonzero(y == 0))])
        evaluation = np.sort(chosen)
        out.append((evaluation, np.setdiff1d(np.arange(len(y)), evaluation)))
    return out


def partition_metrics(name: str, df: pd.DataFrame, labels, parts, folds: int = 5, seed: int = 0,
                      population: pd.DataFrame | None = None) -> list[dict]:
    """``method_metrics`` (no bootstrap) of method ``name`` on each partition's evaluation
    rows, fitting on its training rows."""
    y = np.asarray(labels).astype(int)
    out = []
    for evaluation, training in parts:
        scores = method_scores(name, df.iloc[evaluation].reset_index(drop=True), y[evaluation], folds, seed,
                               population=population, train=df.iloc[training].reset_index(drop=True),
                               train_labels=y[training])
        if not np.isfinite(scores).all():
            raise ValueError(f"method {name!r}: {int((~np.isfinite(scores)).sum())} of {len(scores)} scores are "
                             f"NaN or infinite (a feature column of {', '.join(METHODS[name].columns)} "
                             f"is missing values)")
        out.append(method_metrics(y[evaluation], scores, n_boot=0))
    return out


def summarise(per_partition: list[dict]) -> dict[str, dict[str, float]]:
    """{metric: {"mean", "std"}} over the partitions for the ten metrics and TPR at 0.1%
    FPR; std is the sample standard deviation (ddof 1; 0 for one partition)."""
    keys = [k for k, _ in TEN_METRICS] + ["tpr_at_0.1pct_fpr"]
    out = {}
    for key in keys:
        values = np.array([m[key] for m in per_partition], dtype=float)
        out[key] = {"mean": float(values.mean()),
                    "std": float(values.std(ddof=1)) if len(values) > 1 else 0.0}
    return out


def _pm(m: dict) -> str:
    return f"{m['mean']:.3f} ± {m['std']:.3f}"


def _cost(c: dict | None, key: str, digits: int) -> str:
    v = (c or {}).get(key)
    return "—" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"


def render_tddbench(title: str, header: str, rows: list[dict], n_partitions: int, n_eval: tuple[int, int]) -> str:
    """Markdown: one table per paradigm (TDDBench's four, then the LLM attacks), each row a
    method with the ten metrics as mean ± std and its cost. ``rows``: {"method", "label",
    "tddbench", "paradigm", "access", "summary", "cost"}."""
    lines = [f"# {title}", "", header, "",
             f"TDDBench's protocol (Sec. 3, App. A.6): {n_partitions} random partitions of the candidates; each "
             f"evaluates on a random half of the members and of the non-members ({n_eval[0]} vs {n_eval[1]}) and "
             "fits what trains (classifiers, scoring models) on the rest. Mean ± standard deviation over the "
             "partitions. Precision … MA at the MA-maximising threshold (in-sample, as TDDBench). Time and peak "
             "memory: each method's own extraction and scoring on a subsample, in a fresh process per method "
             "(trainspotter.evaluation.benchmark_cost).", ""]
    head = ["method", "TDDBench name", "access"] + [t for _, t in TEN_METRICS] + ["s/sample", "peak MB"]
    for paradigm, heading in PARADIGMS.items():
        group = [r for r in rows if r["paradigm"] == paradigm]
        if not group:
            continue
        lines += [f"## {heading}", "", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        for r in sorted(group, key=lambda r: -r["summary"]["auroc"]["mean"]):
            cells = [r["label"], r["tddbench"] or "—", r["access"]]
            cells += [_pm(r["summary"][k]) for k, _ in TEN_METRICS]
            cells += [_cost(r.get("cost"), "seconds_per_sample", 4), _cost(r.get("cost"), "peak_rss_mb", 1)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    ranking = sorted(({"paradigm": p, "best": max(r["summary"]["auroc"]["mean"] for r in rows if r["paradigm"] == p),
                       "mean": float(np.mean([r["summary"]["auroc"]["mean"] for r in rows if r["paradigm"] == p]))}
                      for p in PARADIGMS if any(r["paradigm"] == p for r in rows)), key=lambda x: -x["mean"])
    lines += ["## Paradigms by mean AUROC (TDDBench Table 7)", "", "| paradigm | mean AUROC | best AUROC |",
              "|---|---|---|"]
    lines += [f"| {PARADIGMS[x['paradigm']]} | {x['mean']:.3f} | {x['best']:.3f} |" for x in ranking]
    return "\n".join(lines) + "\n"
