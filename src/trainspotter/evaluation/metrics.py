"""Per-sample membership-inference metrics (TDDBench Sec. 3.1, App. A.6; EZ-MIA Sec. 4).

Convention: ``labels`` 1 = member, 0 = non-member; ``scores`` higher = more
member-like. A sample is called a member when its score is ≥ a threshold
(``sklearn.metrics.roc_curve``'s convention), so tied scores always get the same
call and the ROC has one operating point per distinct score (plus the origin).

Reported per method: AUROC; TPR at low FPR (1%, 0.1%, 10%); the threshold metrics
of TDDBench Tables 14–16 (precision, recall, F1, accuracy, FPR, FNR and the
membership advantage MA = TPR − FPR of Jayaraman et al. 2021) at one threshold;
and a 95% percentile bootstrap interval for each.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata
from sklearn import metrics as skm

__all__ = ["roc", "tpr_at_fpr", "threshold_metrics", "method_metrics", "LOW_FPRS", "THRESHOLD_KEYS"]

# key -> FPR bound of the "TPR at low FPR" metrics (EZ-MIA Sec. 4; TDDBench A.6 adds 10%)
LOW_FPRS = {"tpr_at_1pct_fpr": 0.01, "tpr_at_0.1pct_fpr": 0.001, "tpr_at_10pct_fpr": 0.1}
THRESHOLD_KEYS = ("precision", "recall", "f1", "accuracy", "fpr", "fnr", "advantage")
_EPS = 1e-12  # MA ties: 2/3 − 0 and 1 − 1/3 differ in the last bit
_BLOCK = 2_000_000  # bootstrap scores held in memory at once (resamples × samples)


def _check(labels, scores) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels)
    s = np.asarray(scores, dtype=float)
    if y.ndim != 1 or s.shape != y.shape:
        raise ValueError(f"labels and scores must be 1-D of the same length; got {y.shape} and {s.shape}")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 (non-member) or 1 (member)")
    y = y.astype(int)
    if y.min(initial=1) == y.max(initial=0):
        raise ValueError(f"need both members and non-members; got {int(y.sum())} members of {len(y)}")
    nan, inf = int(np.isnan(s).sum()), int(np.isinf(s).sum())
    if nan or inf:
        raise ValueError(f"{nan} NaN and {inf} infinite score(s) of {len(s)}: every sample needs a finite score")
    return y, s


def roc(labels, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fpr, tpr, thresholds) at every distinct score, from ``roc_curve(...,
    drop_intermediate=False)``; the first point is the origin (threshold +inf)."""
    y, s = _check(labels, scores)
    return skm.roc_curve(y, s, drop_intermediate=False)


def tpr_at_fpr(labels, scores, max_fpr: float) -> float:
    """"TPR at low FPR" (Carlini et al. 2022; EZ-MIA Sec. 4): the largest TPR among the
    ROC operating points whose FPR ≤ ``max_fpr``; no interpolation between points (an
    interpolated ROC would credit a threshold that does not exist). The origin always
    qualifies, so the value is 0 when every threshold above all non-members still
    misses every member. With m non-members the achievable FPRs are multiples of 1/m:
    FPR ≤ 0.1% needs m ≥ 1000 to be anything but the zero-FPR point (and FPR ≤ 1%
    needs m ≥ 100)."""
    fpr, tpr, _ = roc(labels, scores)
    return float(tpr[fpr <= max_fpr + _EPS].max())


def threshold_metrics(labels, scores) -> dict[str, float]:
    """TDDBench App. A.6 metrics at the threshold that maximises the membership advantage
    MA = TPR − FPR (Youden's J) over the ROC operating points of these very scores; on
    a tie the highest threshold (fewest samples called members). Choosing the threshold
    on the evaluated scores is an optimistic, in-sample choice, as in TDDBench's tables;
    precision is 0 when nothing is called a member (sklearn's ``zero_division=0``).
    Returns threshold, precision, recall (= TPR), f1, accuracy, fpr, fnr, advantage."""
    y, s = _check(labels, scores)
    fpr, tpr, thr = skm.roc_curve(y, s, drop_intermediate=False)
    j = tpr - fpr
    best = int(np.argmax(j >= j.max() - _EPS))  # first maximum = highest threshold
    pred = (s >= thr[best]).astype(int)
    tn, fp, fn, tp = skm.confusion_matrix(y, pred, labels=[0, 1]).ravel()
    return {"threshold": float(thr[best]),
            "precision": float(skm.precision_score(y, pred, zero_division=0)),
            "recall": float(skm.recall_score(y, pred)),
            "f1": float(skm.f1_score(y, pred, zero_division=0)),
            "accuracy": float(skm.accuracy_score(y, pred)),
            "fpr": float(fp / (fp + tn)), "fnr": float(fn / (fn + tp)),
            "advantage": float(tp / (tp + fn) - fp / (fp + tn))}


def _batch_metrics(pos: np.ndarray, neg: np.ndarray) -> dict[str, np.ndarray]:
    """Every metric for B score sets at once: ``pos`` (B, n1) member scores, ``neg``
    (B, n0) non-member scores. Same definitions as the functions above (tests check
    equality): ROC points at the last sample of each tie group in descending order."""
    B, n1 = pos.shape
    n0 = neg.shape[1]
    s = np.concatenate([pos, neg], axis=1)
    ranks = rankdata(s, axis=1)  # average ranks: AUROC = Mann–Whitney U / (n1 n0)
    out = {"auroc": (ranks[:, :n1].sum(axis=1) - n1 * (n1 + 1) / 2) / (n1 * n0)}
    order = np.argsort(-s, axis=1, kind="stable")
    s_sorted = np.take_along_axis(s, order, axis=1)
    tp = np.cumsum(order < n1, axis=1)
    fp = np.arange(1, n1 + n0 + 1) - tp
    point = np.ones_like(s_sorted, dtype=bool)
    point[:, :-1] = s_sorted[:, :-1] != s_sorted[:, 1:]  # last of its tie group
    tpr, fpr = tp / n1, fp / n0
    for key, bound in LOW_FPRS.items():
        out[key] = np.where(point & (fpr <= bound + _EPS), tpr, 0.0).max(axis=1)
    j = np.where(point, tpr - fpr, -np.inf)
    jmax = j.max(axis=1, keepdims=True)
    best = (j >= jmax - _EPS).argmax(axis=1)  # first maximum = highest threshold
    take = lambda a: a[np.arange(B), best]  # noqa: E731
    origin = jmax[:, 0] <= _EPS  # the origin (threshold +inf, MA = 0) comes first
    TP = np.where(origin, 0, take(tp)).astype(float)
    FP = np.where(origin, 0, take(fp)).astype(float)
    FN, TN = n1 - TP, n0 - FP
    out["threshold"] = np.where(origin, np.inf, take(s_sorted))
    out["precision"] = np.divide(TP, TP + FP, out=np.zeros(B), where=TP + FP > 0)
    out["recall"] = TP / n1
    out["f1"] = 2 * TP / (2 * TP + FP + FN)
    out["accuracy"] = (TP + TN) / (n1 + n0)
    out["fpr"], out["fnr"] = FP / n0, FN / n1
    out["advantage"] = TP / n1 - FP / n0
    return out


def method_metrics(labels, scores, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> dict:
    """AUROC, TPR at 1% / 0.1% / 10% FPR (``tpr_at_fpr``) and the ``threshold_metrics``,
    each with a ``level`` percentile bootstrap interval ``<key>_ci_low`` /
    ``<key>_ci_high``: ``n_boot`` resamples drawn with replacement within the members
    and within the non-members separately (stratified, so every resample keeps both
    class sizes), seeded. The bootstrap re-chooses the MA-maximising threshold in each
    resample, so the intervals describe the in-sample procedure. Also returns
    n_members, n_nonmembers, n_boot."""
    y, s = _check(labels, scores)
    pos, neg = s[y == 1], s[y == 0]
    point = {"auroc": float(skm.roc_auc_score(y, s))}
    point |= {key: tpr_at_fpr(y, s, bound) for key, bound in LOW_FPRS.items()}
    point |= threshold_metrics(y, s)
    out = dict(point)
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        block = max(1, _BLOCK // len(s))
        boots: dict[str, list[np.ndarray]] = {}
        for start in range(0, n_boot, block):
            b = min(block, n_boot - start)
            res = _batch_metrics(pos[rng.integers(0, len(pos), (b, len(pos)))],
                                 neg[rng.integers(0, len(neg), (b, len(neg)))])
            for key, values in res.items():
                boots.setdefault(key, []).append(values)
        q = [(1 - level) / 2, (1 + level) / 2]
        for key in point:
            if key == "threshold":
                continue
            lo, hi = np.quantile(np.concatenate(boots[key]), q)
            out[f"{key}_ci_low"], out[f"{key}_ci_high"] = float(lo), float(hi)
    out.update(n_members=int(len(pos)), n_nonmembers=int(len(neg)), n_boot=int(n_boot))
    return out
