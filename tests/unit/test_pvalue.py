"""p-value baseline (App. A.8): combination rule, power, and size under the null."""

import numpy as np
import pytest
from scipy.stats import binomtest

from trainspotter.stats.pvalue import combine_pvalues, di_pvalue, preprocess


def test_brown_sidak_combination_by_hand():
    # 1 − (1 − 0.1)(1 − 0.2) = 1 − 0.72 = 0.28
    assert combine_pvalues([0.1, 0.2]) == pytest.approx(0.28)
    assert combine_pvalues([0.01]) == pytest.approx(0.01)
    assert combine_pvalues([0.5, 1.0]) == 1.0
    assert combine_pvalues([0.03, 0.04, 0.02]) >= 0.04  # never below the largest p_i


def test_preprocess_uses_train_statistics():
    train = np.arange(100, dtype=float)[:, None]
    test = np.array([[49.5], [1000.0]])
    tr, te = preprocess(train, test)
    assert te[0, 0] == pytest.approx(0.0)           # (49.5 − μ)/σ with μ = 49.5
    assert te[1, 0] == 0.0                          # beyond the train 97.5% quantile → mean
    assert tr[0, 0] == 0.0 and tr[50, 0] == pytest.approx(0.5 / train.std())


def test_detects_a_shift():
    rng = np.random.default_rng(0)
    S = rng.normal(size=(400, 6))
    S[:, 0] += 1.0
    out = di_pvalue(S, rng.normal(size=(400, 6)), n_shuffles=4, seed=1)
    assert out["p_value"] < 1e-6 and len(out["p_values"]) == 4
    assert all(t > 0 for t in out["t_stats"])  # suspect scores higher


def test_size_under_the_null():
    """200 null data sets; combined p ≤ 0.05 must not happen significantly more than 5%.

    Binomial test of H: rate ≤ 0.05 at 1e-3 (false-failure probability ≤ 1e-3).
    """
    rng = np.random.default_rng(1)
    k = sum(di_pvalue(rng.normal(size=(60, 3)), rng.normal(size=(60, 3)), n_shuffles=4, seed=i)["p_value"] <= 0.05
            for i in range(200))
    assert binomtest(k, 200, 0.05, alternative="greater").pvalue > 1e-3


def test_scalar_input_and_too_few_rows():
    rng = np.random.default_rng(2)
    assert 0.0 <= di_pvalue(rng.normal(size=50), rng.normal(size=50))["p_value"] <= 1.0
    with pytest.raises(ValueError):
        di_pvalue(np.zeros((2, 1)), np.zeros((2, 1)))
