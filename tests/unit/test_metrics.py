"""Per-sample MIA metrics: hand-computed cases, ties, the TPR-at-FPR convention,
agreement with sklearn and with a brute-force ROC, and the stratified bootstrap."""

import numpy as np
import pytest
from sklearn import metrics as skm

from trainspotter.evaluation.metrics import (LOW_FPRS, _batch_metrics, method_metrics, roc, threshold_metrics,
                                  tpr_at_fpr)


def test_hand_computed_six_scores():
    # members 0.9 0.8 0.4, non-members 0.7 0.3 0.2; descending: m m n m n n
    y = [1, 1, 1, 0, 0, 0]
    s = [0.9, 0.8, 0.4, 0.7, 0.3, 0.2]
    # AUROC: 0.9 and 0.8 beat all 3 non-members, 0.4 beats 2 -> 8/9
    # ROC points (FPR, TPR): (0,0) (0,1/3) (0,2/3) (1/3,2/3) (1/3,1) (2/3,1) (1,1)
    # MA = TPR-FPR: 0, 1/3, 2/3, 1/3, 2/3, 1/3, 0 -> max 2/3, first at threshold 0.8
    # at 0.8: TP 2, FP 0, FN 1, TN 3
    m = method_metrics(y, s, n_boot=0)
    assert m["auroc"] == pytest.approx(8 / 9)
    assert m["tpr_at_1pct_fpr"] == pytest.approx(2 / 3)  # only FPR = 0 qualifies
    assert m["tpr_at_0.1pct_fpr"] == pytest.approx(2 / 3)
    assert m["tpr_at_10pct_fpr"] == pytest.approx(2 / 3)
    assert m["threshold"] == 0.8
    assert m["precision"] == 1.0
    assert m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(0.8)  # 2·2 / (2·2 + 0 + 1)
    assert m["accuracy"] == pytest.approx(5 / 6)
    assert m["fpr"] == 0.0 and m["fnr"] == pytest.approx(1 / 3)
    assert m["advantage"] == pytest.approx(2 / 3)
    assert tpr_at_fpr(y, s, 1 / 3) == 1.0  # (1/3, 1) now qualifies
    assert m["n_members"] == 3 and m["n_nonmembers"] == 3 and "auroc_ci_low" not in m


def test_ties_and_the_no_interpolation_convention():
    # members 0.9 0.5, non-members 0.5 0.1: one member and one non-member tie at 0.5
    y = [1, 1, 0, 0]
    s = [0.9, 0.5, 0.5, 0.1]
    # pairs: 0.9>0.5, 0.9>0.1, 0.5=0.5 (counts 1/2), 0.5>0.1 -> 3.5/4
    assert method_metrics(y, s, n_boot=0)["auroc"] == pytest.approx(0.875)
    fpr, tpr, thr = roc(y, s)
    # the tie is one operating point: (0,0) (0,.5) (.5,1) (1,1); no (.5,.5) or (0,1)
    assert fpr.tolist() == [0, 0, 0.5, 1] and tpr.tolist() == [0, 0.5, 1, 1]
    # FPR <= 25%: the best real threshold gives TPR 1/2; interpolating the diagonal
    # segment from (0, .5) to (.5, 1) would claim 3/4 at a threshold that does not exist
    assert tpr_at_fpr(y, s, 0.25) == 0.5
    assert np.interp(0.25, fpr, tpr) == 0.75
    assert tpr_at_fpr(y, s, 0.5) == 1.0
    # MA: 0, .5, .5, 0 -> first maximum at threshold 0.9: TP 1, FP 0, FN 1, TN 2
    t = threshold_metrics(y, s)
    assert t["threshold"] == 0.9 and t["precision"] == 1.0 and t["recall"] == 0.5
    assert t["f1"] == pytest.approx(2 / 3) and t["accuracy"] == 0.75 and t["advantage"] == 0.5


def test_zero_fpr_point_is_all_that_small_samples_allow():
    # 50 non-members: FPRs are multiples of 1/50 = 2%, so FPR <= 1% and <= 0.1% both mean FPR = 0
    rng = np.random.default_rng(1)
    y = np.r_[np.ones(50), np.zeros(50)]
    s = np.r_[rng.normal(1, 1, 50), rng.normal(0, 1, 50)]
    zero = tpr_at_fpr(y, s, 0.0)
    assert tpr_at_fpr(y, s, 0.001) == zero and tpr_at_fpr(y, s, 0.0199) == zero
    assert tpr_at_fpr(y, s, 0.02) > zero  # one non-member allowed above the threshold
    # zero-FPR TPR = fraction of members above the highest non-member
    assert zero == pytest.approx(np.mean(s[:50] > s[50:].max()))


def test_perfect_and_inverted_separation():
    y = np.r_[np.ones(5), np.zeros(7)]
    s = np.r_[np.arange(10, 15), np.arange(7)].astype(float)
    m = method_metrics(y, s, n_boot=200)
    for key in ("auroc", *LOW_FPRS, "precision", "recall", "f1", "accuracy", "advantage"):
        assert m[key] == 1.0, key
        assert m[f"{key}_ci_low"] == m[f"{key}_ci_high"] == 1.0, key  # every resample is separable too
    assert m["fpr"] == m["fnr"] == 0.0 and m["threshold"] == 10.0
    inv = method_metrics(y, -s, n_boot=0)
    # no threshold has TPR > FPR: the MA-maximiser is the origin (nothing called a member)
    assert inv["auroc"] == 0.0 and inv["advantage"] == 0.0 and inv["threshold"] == np.inf
    assert inv["precision"] == 0.0 and inv["recall"] == 0.0 and inv["accuracy"] == pytest.approx(7 / 12)
    assert inv["tpr_at_1pct_fpr"] == 0.0 and inv["fpr"] == 0.0 and inv["fnr"] == 1.0


def _brute_tpr_at_fpr(y, s, bound):
    best = 0.0
    for t in np.unique(s):
        pred = s >= t
        if pred[y == 0].mean() <= bound:
            best = max(best, pred[y == 1].mean())
    return best


@pytest.mark.parametrize("seed,decimals", [(0, 3), (1, 1), (2, 0), (3, 6)])
def test_agrees_with_sklearn_and_brute_force(seed, decimals):
    rng = np.random.default_rng(seed)
    n1, n0 = rng.integers(20, 200, size=2)
    y = np.r_[np.ones(n1, int), np.zeros(n0, int)]
    s = np.round(np.r_[rng.normal(0.7, 1, n1), rng.normal(0, 1, n0)], decimals)  # decimals 0-1: many ties
    m = method_metrics(y, s, n_boot=0)
    assert m["auroc"] == pytest.approx(skm.roc_auc_score(y, s))
    for key, bound in LOW_FPRS.items():
        assert m[key] == pytest.approx(_brute_tpr_at_fpr(y, s, bound)), key
    pred = (s >= m["threshold"]).astype(int)
    assert m["precision"] == pytest.approx(skm.precision_score(y, pred, zero_division=0))
    assert m["recall"] == pytest.approx(skm.recall_score(y, pred))
    assert m["f1"] == pytest.approx(skm.f1_score(y, pred))
    assert m["accuracy"] == pytest.approx(skm.accuracy_score(y, pred))
    # the threshold really maximises MA over all thresholds (brute force)
    ma = max((s[y == 1] >= t).mean() - (s[y == 0] >= t).mean() for t in np.unique(s))
    assert m["advantage"] == pytest.approx(ma)
    # the vectorised bootstrap kernel gives the same numbers on the unresampled data
    batch = _batch_metrics(s[y == 1][None], s[y == 0][None])
    for key in ("auroc", *LOW_FPRS, "threshold", "precision", "recall", "f1", "accuracy", "fpr", "fnr",
                "advantage"):
        assert batch[key][0] == pytest.approx(m[key]), key


def test_bootstrap_kernel_matches_the_sklearn_path_on_every_resample():
    rng = np.random.default_rng(7)
    pos, neg = np.round(rng.normal(0.5, 1, 30), 1), np.round(rng.normal(0, 1, 40), 1)
    P = pos[rng.integers(0, 30, (25, 30))]
    N = neg[rng.integers(0, 40, (25, 40))]
    batch = _batch_metrics(P, N)
    y = np.r_[np.ones(30), np.zeros(40)]
    for b in range(25):
        ref = method_metrics(y, np.r_[P[b], N[b]], n_boot=0)
        for key, values in batch.items():
            assert values[b] == pytest.approx(ref[key]), (b, key)


def test_bootstrap_interval_contains_the_estimate_and_narrows_with_data():
    def sample(n, seed):
        rng = np.random.default_rng(seed)
        return np.r_[np.ones(n), np.zeros(n)], np.r_[rng.normal(1, 1, n), rng.normal(0, 1, n)]

    small = method_metrics(*sample(30, 0), n_boot=500, seed=0)
    large = method_metrics(*sample(1000, 0), n_boot=500, seed=0)
    for m in (small, large):
        for key in ("auroc", "tpr_at_10pct_fpr", "accuracy", "advantage"):
            assert m[f"{key}_ci_low"] <= m[key] <= m[f"{key}_ci_high"], key
    width = lambda m, k: m[f"{k}_ci_high"] - m[f"{k}_ci_low"]  # noqa: E731
    assert width(large, "auroc") < width(small, "auroc") / 3  # ~ 1/sqrt(n): sqrt(1000/30) ≈ 5.8
    # true AUROC of N(1,1) vs N(0,1) is Φ(1/√2) = 0.760: the large-sample interval covers it
    assert large["auroc_ci_low"] < 0.760 < large["auroc_ci_high"]
    again = method_metrics(*sample(30, 0), n_boot=500, seed=0)
    assert again == small  # seeded
    assert method_metrics(*sample(30, 0), n_boot=500, seed=1)["auroc_ci_low"] != small["auroc_ci_low"]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="2 NaN and 0 infinite score"):
        method_metrics([1, 0, 1, 0], [0.1, np.nan, np.nan, 0.3])
    with pytest.raises(ValueError, match="both members and non-members"):
        method_metrics([1, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match="0 .non-member. or 1"):
        method_metrics([2, 0], [0.1, 0.2])
