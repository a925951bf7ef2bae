"""Monte Carlo evaluation (Sec. 5.1, App. D) and e-BH."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from trainspotter.auditing.tables import pollution, simulate, simulate_many
from trainspotter.data import split_features
from trainspotter.stats.ebh import ebh
from trainspotter.stats.sequential import SequentialTest, TestConfig
from trainspotter.stats.simulation import power_curve, run_batch, stop_times


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


@pytest.mark.parametrize("preset", ["badi", "default"])
@pytest.mark.parametrize("scorer", ["online", "paper"])
def test_batch_run_equals_single_runs(scorer, preset):
    from trainspotter.presets import TEST_PRESETS

    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(2, 3, 60, 2))
    X[:, :, 0] += 1.0
    cfg = TestConfig(seed=4, scorer=scorer, **TEST_PRESETS[preset])
    out = run_batch(X, Y, cfg)
    single = SequentialTest(2, cfg)
    if scorer == "paper":  # random initial layer: give the single run trial 1's
        single.scorer.theta = SequentialTest(2, cfg, batch=3).scorer.theta[1:2].copy()
    res = single.run(X[1], Y[1], stop_on_reject=False)
    np.testing.assert_allclose(np.exp(out["log_wealth"][1]), res.wealth, rtol=1e-10)
    np.testing.assert_allclose(out["u"][1], res.u, rtol=1e-10, atol=1e-12)
    assert out["stop_time"][1] == (res.stop_time or 0)
    # stop_times() from the same payoffs agrees with the e-process's own record.
    np.testing.assert_array_equal(stop_times(out["u"], cfg.strategy, cfg.lambda_max, cfg.alpha), out["stop_time"])


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
    # BADI App. D.5 written out: Power(t) is the share of trials stopped by pair t, ending at the TPR
    assert alt["power_curve"] == pytest.approx([np.mean((stops > 0) & (stops <= t)) for t in range(1, 151)])
    assert alt["tpr"] == pytest.approx(np.mean(stops > 0)) and null["fpr"] == pytest.approx(np.mean(np.array(null["stop_times"]) > 0))


def test_simulate_levels_from_one_pass_equal_single_level_runs():
    df = _table(200, 200, shift=0.5, seed=5)
    multi = simulate(df, TestConfig(alpha=0.05), trials=24, n_max=120, seed=2, alphas=(0.2, 0.01))
    assert multi["alphas"] == [0.01, 0.05, 0.2] and set(multi["by_alpha"]) == {"0.01", "0.05", "0.2"}
    for a in (0.01, 0.05, 0.2):
        single = simulate(df, TestConfig(alpha=a), trials=24, n_max=120, seed=2)
        got = multi["by_alpha"][str(a)]
        for key in ("rejection_rate", "mean_stop", "std_stop", "power_curve", "tpr"):
            assert got[key] == single[key], (a, key)
    # Top-level keys are those of config.alpha; smaller α never rejects more often.
    assert multi["rejection_rate"] == multi["by_alpha"]["0.05"]["rejection_rate"]
    rates = [multi["by_alpha"][str(a)]["rejection_rate"] for a in (0.01, 0.05, 0.2)]
    assert rates == sorted(rates) and rates[0] < rates[2]
    # Trials do not depend on how they are batched (the mean log-wealth up to summation order).
    small = simulate(df, TestConfig(), trials=24, n_max=120, seed=2, batch_size=5)
    np.testing.assert_allclose(small.pop("mean_log_wealth"), multi.pop("mean_log_wealth"), rtol=1e-12, atol=1e-12)
    multi.update(alphas=[0.05], by_alpha={"0.05": multi["by_alpha"]["0.05"]})
    assert small == multi


def test_simulate_many_shares_the_scorer_without_changing_any_configuration():
    """Several payoff/strategy configurations on one scorer pass give exactly what each
    gives alone, and a trial's stop equals the shipped SequentialTest on that trial's pairs."""
    df = _table(150, 150, shift=0.4, seed=8)
    configs = [TestConfig(payoff="diff", strategy="mixture"), TestConfig(payoff="mmd", strategy="ons"),
               TestConfig(payoff="ks", strategy="kelly"), TestConfig(payoff="mmd", scorer="paper", epochs=3)]
    many = simulate_many(df, configs, trials=6, n_max=100, seed=4, alphas=(0.1,))
    for config, got in zip(configs, many):
        assert got == simulate(df, config, trials=6, n_max=100, seed=4, alphas=(0.1,))
    S, H, _ = split_features(df)
    rng = np.random.default_rng(np.random.SeedSequence(4).spawn(6)[2])  # trial 2's stream
    ix, iy = rng.permutation(len(S))[:100], rng.permutation(len(H))[:100]
    for config, got in zip(configs, many):
        assert got["stop_times"][2] == run_batch(S[ix][None], H[iy][None], config)["stop_time"][0]
    assert len({tuple(r["stop_times"]) for r in many}) > 1  # the configurations really differ


def test_simulate_type1_on_null_streams_at_several_levels():
    """FPR on held-out vs held-out (32 features, 600 trials × 100 pairs), one pass for α = 0.05 and 0.1.

    One-sided binomial test of H: rate ≤ α for each level at 1e-3/2, so the
    test falsely fails with probability ≤ 1e-3.
    """
    df = _table(10, 4000, p=32, seed=6)
    out = simulate(df, TestConfig(), trials=600, n_max=100, null=True, seed=3, alphas=(0.1,))
    for a in (0.05, 0.1):
        k = round(out["by_alpha"][str(a)]["rejection_rate"] * 600)
        assert binomtest(k, 600, a, alternative="greater").pvalue > 1e-3 / 2, (a, k)


def test_pollution_weakens_the_signal():
    df = _table(400, 200, shift=1.0, seed=2)
    out = pollution(df, TestConfig(), ratios=(0.0, 1.0), trials=12, n_max=120, seed=0)
    clean, full = out["ratios"]["0.0"], out["ratios"]["1.0"]
    assert clean["rejection_rate"] >= 0.9
    # ρ = 1: the held-out stream is all members, i.e. the null holds.
    assert full["rejection_rate"] <= 0.25
    assert clean["mean_log_wealth"][-1] > full["mean_log_wealth"][-1]
