"""Fixed-sample p-value baseline: Maini et al. (2024) dataset inference.

BADI paper App. A.8 (with the A.7 pre-processing). For each of several
shuffles: shuffle suspect and held-out rows independently, split each into a
train half and a test half, fit a linear model on the train halves, score the
test halves and run a one-sided t-test (suspect scores > held-out scores,
since our labels are suspect = 1). The dependent per-shuffle p-values are
combined with the Brown–Šidák form p = 1 − Π_i (1 − p_i). (A.8 prints
1 − exp(−Σ log(1 − p_i)), which is ≤ 0 — a sign typo; 1 − exp(Σ log(1 − p_i))
is the intended formula, and it is ≥ max_i p_i, hence valid but conservative.)

This test is valid only for the fixed sample it is given — no peeking, no
adding data afterwards; it is reported beside the e-value for comparison.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from sklearn.linear_model import LogisticRegression

__all__ = ["preprocess", "di_pvalue", "combine_pvalues"]


def preprocess(train: np.ndarray, test: np.ndarray, trim: float = 0.025) -> tuple[np.ndarray, np.ndarray]:
    """A.7: z-score both with the train statistics (Eq. 6–9), then replace
    values beyond the train 2.5%/97.5% quantiles by the mean (0)."""
    mu, sd = train.mean(axis=0), train.std(axis=0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    lo = np.quantile(train, trim, axis=0, method="lower")
    hi = np.quantile(train, 1.0 - trim, axis=0, method="higher")

    def norm(a):
        z = (a - mu) / sd
        z[(a < lo) | (a > hi)] = 0.0
        return z

    return norm(train), norm(test)


def combine_pvalues(pvals) -> float:
    """Brown–Šidák combination of dependent p-values: 1 − Π(1 − p_i) (A.8)."""
    p = np.clip(np.asarray(pvals, dtype=float), 0.0, 1.0)
    with np.errstate(divide="ignore"):  # p_i = 1 gives log 0 = −inf → combined p = 1
        return float(-np.expm1(np.sum(np.log1p(-p))))


def di_pvalue(suspect: np.ndarray, heldout: np.ndarray, n_shuffles: int = 4, seed: int = 0,
              trim: float = 0.025) -> dict:
    """Dataset-inference p-value on feature rows (App. A.8).

    Default ``n_shuffles=4`` mirrors Fig. 7 (p-values combined in groups of
    four). Returns {"p_value", "p_values", "t_stats", "n_shuffles", "n_test"}.
    """
    S = np.asarray(suspect, dtype=float)
    H = np.asarray(heldout, dtype=float)
    if S.ndim == 1:
        S, H = S[:, None], H[:, None]
    if min(len(S), len(H)) < 4:
        raise ValueError("need at least 4 suspect and 4 held-out rows for a split t-test")
    rng = np.random.default_rng(seed)
    pvals, tstats = [], []
    for _ in range(n_shuffles):
        s, h = S[rng.permutation(len(S))], H[rng.permutation(len(H))]  # 1. shuffle independently
        s_tr, s_te = s[: len(s) // 2], s[len(s) // 2:]                   # 2. split in halves
        h_tr, h_te = h[: len(h) // 2], h[len(h) // 2:]
        tr = np.vstack([s_tr, h_tr])
        te = np.vstack([s_te, h_te])
        tr, te = preprocess(tr, te, trim)
        labels = np.r_[np.ones(len(s_tr)), np.zeros(len(h_tr))]
        model = LogisticRegression().fit(tr, labels)                      # 3. linear model
        scores = model.decision_function(te)
        res = stats.ttest_ind(scores[: len(s_te)], scores[len(s_te):], equal_var=False,
                              alternative="greater")                      # 4. one-sided t-test
        p = float(res.pvalue) if np.isfinite(res.pvalue) else 1.0
        pvals.append(p)
        tstats.append(float(res.statistic) if np.isfinite(res.statistic) else 0.0)
    return {"p_value": combine_pvalues(pvals), "p_values": pvals, "t_stats": tstats,
            "n_shuffles": int(n_shuffles), "n_test": int(len(S) - len(S) // 2 + len(H) - len(H) // 2)}
