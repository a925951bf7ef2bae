"""Monte Carlo evaluation (Sec. 5.1, App. D) and e-BH."""

import json

import numpy as np
import pandas as pd
import pytest

from trainspotter.stats.simulation import ebh, pollution, power_curve, run_batch, simulate, stop_times
from trainspotter.stats.sequential import SequentialTest, TestConfig


def _table(n_s, n_h, p=4, shift=0.0, seed=0):
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(n_s, p))
    S[:, :2] += shift
    df = pd.DataFrame(np.vstack([S, rng.normal(size=(n_h, p))]), columns=[f"f{i}" for i in range(p)])
    df["set"] = ["suspect"] * n_s + ["heldout"] * n_h
    return df


def test_ebh_by_hand():
    # K = 4, q = 0.1 → thresholds K/(q k) = 40, 20, 13.3, 10 for k = 1..4.
    e = [50.0, 1.0, 15.0, 25.0]  # sorted: 50, 25, 15, 1
    # k=1: 50 ≥ 40 ✓, k=2: 25 ≥ 20 ✓, k=3: 15 ≥ 13.3 ✓, k=4: 1 ≥ 10 ✗ → k* = 3
    np.testing.assert_array_equal(ebh(e, 0.1), [True, False, True, True])
    # k* is a max, not a first failure: 30 < 40 at k=1 but 25 ≥ 20 at k=2.
    np.testing.assert_array_equal(ebh([30.0, 25.0, 0.5, 0.5], 0.1), [True, True, False, False])
    assert not ebh([39.0, 1.0, 1.0, 1.0], 0.1).any()
    with pytest.raises(ValueError):
        ebh([-1.0, 2.0], 0.1)


def test_power_curve_by_hand():
    # Stops at 2, 2, 5 and one non-rejection (0), n = 5.
    np.testing.assert_allclose(power_curve(np.array([2, 0, 5, 2]), 5), [0, 0.5, 0.5, 0.5, 0.75])


def test_batch_run_equals_single_runs():
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(2, 3, 30, 2))
    X[:, :, 0] += 1.0
    cfg = TestConfig(seed=4)
    out = run_batch(X, Y, cfg)
    single = SequentialTest(2, cfg)
    single.scorer.theta = SequentialTest(2, cfg, batch=3).scorer.theta[1:2].copy()  # trial 1's init
    res = single.run(X[1], Y[1], stop_on_reject=False)
    np.testing.assert_allclose(np.exp(out["log_wealth"][1]), res.wealth, rtol=1e-10)
    np.testing.assert_allclose(out["u"][1], res.u, rtol=1e-10, atol=1e-12)
    assert out["stop_time"][1] == (res.stop_time or 0)
    # stop_times() from the same payoffs agrees with the e-process's own record.
    np.testing.assert_array_equal(stop_times(out["u"], "ons", 0.8, 0.05), out["stop_time"])


def test_simulate_alternative_and_null():
    df = _table(300, 300, shift=0.8)
    alt = simulate(df, TestConfig(), trials=20, n_max=150, seed=1)
    json.dumps(alt)
    assert alt["pairs"] == 150 and alt["trials"] == 20 and alt["fpr"] is None
    assert alt["tpr"] >= 0.9 and alt["fnr"] == pytest.approx(1 - alt["tpr"])
    stops = np.array(alt["stop_times"])
    assert alt["mean_stop"] == pytest.approx(stops[stops > 0].mean())
    assert alt["power_curve"][-1] == pytest.approx(alt["tpr"]) and len(alt["power_curve"]) == 150
    null = simulate(df, TestConfig(), trials=20, n_max=None, null=True, seed=1)
    assert null["pairs"] == 150 and null["tpr"] is None  # two halves of 300 held-out rows
    assert null["fpr"] <= 0.2
    assert simulate(df, TestConfig(), trials=5, n_max=40, seed=3) == simulate(df, TestConfig(), trials=5, n_max=40, seed=3)


def test_pollution_weakens_the_signal():
    df = _table(400, 200, shift=1.0, seed=2)
    out = pollution(df, TestConfig(), ratios=(0.0, 1.0), trials=12, n_max=120, seed=0)
    clean, full = out["ratios"]["0.0"], out["ratios"]["1.0"]
    assert clean["rejection_rate"] >= 0.9
    # ρ = 1: the held-out stream is all members, i.e. the null holds.
    assert full["rejection_rate"] <= 0.25
    assert clean["mean_log_wealth"][-1] > full["mean_log_wealth"][-1]
