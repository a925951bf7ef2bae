"""The synthetic-stream benchmarks' helpers (studies.synthetic, mmd_payoff;
benchmarks/bench_type1.py, bench_power.py, bench_online_scorer.py, bench_mmd.py)."""

import numpy as np
import pytest
from scipy.stats import binomtest

from studies.mmd_payoff import check_against_sequential_test, score_windows
from studies.synthetic import BASELINE, best_saving, boot_ci, power_rows, type1_rows


def test_boot_ci_is_the_percentile_interval_of_resampled_means():
    x = np.array([1.0, 2.0, 4.0, 9.0])
    lo, hi = boot_ci(x, np.random.default_rng(0), b=500)
    means = x[np.random.default_rng(0).integers(4, size=(500, 4))].mean(axis=1)
    assert (lo, hi) == (np.quantile(means, 0.025), np.quantile(means, 0.975))
    assert boot_ci(np.full(5, 3.0), np.random.default_rng(1), b=50) == [3.0, 3.0]


def test_type1_rows_count_rejections_and_test_them_against_alpha():
    rows = type1_rows(trials=60, pairs=20, features=2, alpha=0.05, lambda_max=0.8, batch=30, payoffs=["diff"], seed=0)
    assert [r["strategy"] for r in rows] == ["ons", "kelly", "mixture"]
    for r in rows:
        assert r["rate"] == r["rejections"] / 60 and r["ci95"][0] <= r["rate"] <= r["ci95"][1]
        assert r["binom_p"] == pytest.approx(binomtest(r["rejections"], 60, 0.05, alternative="greater").pvalue)


def test_power_rows_censor_at_n_max_and_compare_to_the_paper_default():
    rows, censored = power_rows(trials=12, null_trials=6, n_max=60, features=2, shifted=2, delta=1.5, alpha=0.05,
                                batch=12, seed=0)
    base = next(r for r in rows if (r["payoff"], r["strategy"], r["lambda_max"]) == BASELINE)
    assert base["pairs_vs_paper_default"] == 1.0 and base["tpr"] == 1.0  # δ = 1.5: the default decides every trial
    assert len(rows) == 4 * 3 * 2  # payoffs × strategies × λ_max
    for r in rows:
        cens = censored[r["payoff"], r["strategy"], r["lambda_max"]]
        assert r["mean_stop_censored"] == pytest.approx(cens.mean()) and cens.max() <= 60
        assert r["tpr"] == pytest.approx((cens < 60).mean())  # a trial that never rejected counts N_max
        assert r["pairs_vs_paper_default"] == pytest.approx(cens.mean() / censored[BASELINE].mean())
    best = min(rows, key=lambda r: r["mean_stop_censored"])
    assert best_saving(rows, censored).startswith(f"Best: {best['payoff']}/{best['strategy']}/λmax {best['lambda_max']}")


def test_the_pipeline_shortcut_equals_the_sequential_test():
    """bench_mmd feeds the payoffs the paper scorer's scores of one run (``pipeline_scores``); the
    check raises if they differ from ``SequentialTest``'s own payoffs."""
    check_against_sequential_test(2, np.random.default_rng(0))


def test_score_windows_by_hand():
    sx, sy = np.array([[1.0, 3.0, 0.0]]), np.array([[0.0, 1.0, 0.0]])
    windows = score_windows(sx, sy, 3)
    w1 = windows[0]
    assert len(windows) == 1 and w1["rounds"] == "1–3"  # one window: rounds 1 to N_max = 3
    assert w1["mean_diff"] == pytest.approx((1 + 2 + 0) / 3)
    assert w1["sd_score"] == pytest.approx(np.std([1.0, 3.0, 0.0, 0.0, 1.0, 0.0]))
    assert w1["mean_u_diff"] == pytest.approx(np.tanh([1.0, 2.0, 0.0]).mean())


def test_normalise_uses_the_past_rows_and_zeroes_the_trimmed_tails():
    from studies.scorer_cost import normalise

    rows = np.array([[0.0, 1.0], [2.0, 1.0], [4.0, 1.0], [6.0, 1.0]])  # column 0: mean 3, sd √5; column 1 constant
    z = normalise(rows, np.array([[2.5, 1.0], [4.0, 1.0], [5.0, 1.0]]), trim=0.4)
    # trim 0.4: kept between the 0.4 quantile (lower: 2) and the 0.6 one (higher: 4); sd 0 → 1
    assert z[:, 0] == pytest.approx([-0.5 / np.sqrt(5), 1 / np.sqrt(5), 0.0]) and z[:, 1].tolist() == [0, 0, 0]
