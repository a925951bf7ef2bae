"""The composed sequential test: round order, persistence, Type-I error, power, tables."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from trainspotter.auditing.tables import run_test
from trainspotter.errors import InputError
from trainspotter.stats.adam_scorer import AdamScorer
from trainspotter.stats.eprocess import EProcess
from trainspotter.stats.newton_scorer import NewtonScorer
from trainspotter.stats.payoffs import make_payoff
from trainspotter.stats.scoring import make_scorer
from trainspotter.stats.sequential import SequentialTest, TestConfig
from trainspotter.stats.simulation import run_batch, stop_times

STRATEGIES = ["ons", "kelly", "mixture"]
PAYOFFS = ["mmd", "ks", "diff"]
SCORERS = ["online", "paper"]


def _pairs(n, p, shift=0.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[:, : min(p, 2)] += shift
    return X, rng.normal(size=(n, p))


def _table(S, H, extra=True):
    df = pd.DataFrame(np.vstack([S, H]), columns=[f"f{i}" for i in range(S.shape[1])])
    df["set"] = ["suspect"] * len(S) + ["heldout"] * len(H)
    if extra:
        df["id"] = np.arange(len(df))
        df["text"] = "some text"
    return df


@pytest.mark.parametrize("scorer_kind", SCORERS)
@pytest.mark.parametrize("payoff", PAYOFFS)
def test_round_order_score_then_bet_then_learn(payoff, scorer_kind):
    """Rebuild the test by hand in the required order and compare every step."""
    X, Y = _pairs(40, 3, shift=0.8, seed=1)
    cfg = TestConfig(payoff=payoff, strategy="ons", seed=5, scorer=scorer_kind)
    test = SequentialTest(3, cfg)
    assert isinstance(test.scorer, NewtonScorer if scorer_kind == "online" else AdamScorer)
    scorer, pay, ep = make_scorer(scorer_kind, 3, seed=5), make_payoff(payoff), EProcess("ons", 0.8, 0.05)
    for x, y in zip(X, Y):
        step = test.update(x, y)
        sx, sy = scorer.score(x), scorer.score(y)  # 1. scorer of pairs < t
        u = pay.payoff(sx, sy)                      # 2. witness of rounds < t
        lam = ep.lam                                # 3. stake of rounds < t
        w = ep.update(u)
        pay.update(sx, sy)                          # 4. learn from pair t
        scorer.update(x, y)
        assert (step["score_x"], step["score_y"], step["u"], step["lambda"], step["wealth"]) == (sx, sy, u, lam, w)
    assert test.t == 40 and test.history["lambda"][0] == 0.0


@pytest.mark.parametrize("scorer", SCORERS)
@pytest.mark.parametrize("payoff", PAYOFFS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_save_load_continuation_equals_uninterrupted_run(strategy, payoff, scorer):
    X, Y = _pairs(50, 4, shift=0.5, seed=2)
    cfg = TestConfig(strategy=strategy, payoff=payoff, scorer=scorer)
    full = SequentialTest(4, cfg)
    full.run(X, Y, stop_on_reject=False)
    part = SequentialTest(4, cfg)
    part.run(X[:23], Y[:23], stop_on_reject=False)
    resumed = SequentialTest.from_dict(json.loads(json.dumps(part.to_dict())))
    resumed.run(X[23:], Y[23:], stop_on_reject=False)
    assert resumed.history == full.history
    assert (resumed.wealth, resumed.max_wealth, resumed.stop_time, resumed.t) == (
        full.wealth, full.max_wealth, full.stop_time, full.t)


def test_run_stops_at_first_crossing_and_reports_evalue_there():
    X, Y = _pairs(400, 4, shift=1.0, seed=3)
    test = SequentialTest(4, TestConfig())
    res = test.run(X, Y)
    assert res.reject and res.stop_time == res.pairs_used == len(res.wealth)
    assert res.wealth[-1] >= 20 > res.wealth[:-1].max()
    assert res.e_value == res.wealth[-1] == res.max_wealth
    assert res.p_value == pytest.approx(1 / res.max_wealth)
    # Continuing past the stop keeps the recorded e-value at the stop.
    cont = SequentialTest(4, TestConfig()).run(X, Y, stop_on_reject=False)
    assert cont.stop_time == res.stop_time and cont.e_value == pytest.approx(res.e_value)
    assert cont.pairs_used == 400


def test_scalar_scores_are_accepted():
    rng = np.random.default_rng(4)
    res = SequentialTest(1, TestConfig()).run(rng.normal(1.0, 1, 300), rng.normal(0, 1, 300))
    assert res.reject


@pytest.mark.parametrize("scorer", SCORERS)
def test_type1_error_on_fresh_null_streams(scorer):
    """Null: both sides N(0, I), fresh data each trial, 800 trials × 100 pairs × 4 features.

    Each (payoff, strategy) rate is tested with a one-sided binomial test of
    H: rate ≤ α. If the test is valid, one cell fails with probability ≤ 1e-3,
    so with the Bonferroni threshold 1e-3/9 the whole test falsely fails with
    probability ≤ 1e-3 (per scorer). (Seeds are fixed, so it is also reproducible.)
    """
    alpha, trials = 0.05, 800
    rng = np.random.default_rng(2024)
    for payoff in PAYOFFS:
        X, Y = rng.normal(size=(2, trials, 100, 4))
        u = run_batch(X, Y, TestConfig(payoff=payoff, alpha=alpha, scorer=scorer))["u"]
        for strategy in STRATEGIES:  # stakes never feed back into u, so one pass serves all
            k = int((stop_times(u, strategy, 0.8, alpha) > 0).sum())
            p = binomtest(k, trials, alpha, alternative="greater").pvalue
            assert p > 1e-3 / 9, f"{payoff}/{strategy}: {k}/{trials} rejections, binomial p = {p:.2g}"


@pytest.mark.slow
def test_type1_online_scorer_32_features_heavy_tails():
    """Null with the online scorer on 32 heavy-tailed features (t(3), so trimming acts).

    2000 trials × 150 pairs; diff/mixture and mmd/ons, each a one-sided
    binomial test of H: rate ≤ α at 1e-3/2 (false failure ≤ 1e-3 overall).
    """
    alpha, trials, n, p = 0.05, 2000, 150, 32
    rng = np.random.default_rng(99)
    for payoff, strategy in (("diff", "mixture"), ("mmd", "ons")):
        X, Y = rng.standard_t(3, size=(2, trials, n, p))
        cfg = TestConfig(payoff=payoff, strategy=strategy, alpha=alpha)
        k = int((run_batch(X, Y, cfg)["stop_time"] > 0).sum())
        pv = binomtest(k, trials, alpha, alternative="greater").pvalue
        assert pv > 1e-3 / 2, f"{payoff}/{strategy}: {k}/{trials} rejections, binomial p = {pv:.2g}"


@pytest.mark.parametrize("scorer", SCORERS)
def test_type1_check_catches_a_leaky_scorer(scorer):
    """The same check fails when pair t is learned before it is scored (what must never happen)."""
    trials, n, p = 400, 40, 16
    rng = np.random.default_rng(7)
    X, Y = rng.normal(size=(2, trials, n, p))
    test = SequentialTest(p, TestConfig(payoff="diff", scorer=scorer), batch=trials)
    for t in range(n):
        test.scorer.update(X[:, t], Y[:, t])  # leak: pair t is in its own scorer
        u = test.payoff.payoff(test.scorer.score(X[:, t]), test.scorer.score(Y[:, t]))
        test.eprocess.update(u)
    k = int(test.eprocess.rejected.sum())
    assert binomtest(k, trials, 0.05, alternative="greater").pvalue < 1e-3


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("payoff", PAYOFFS)
def test_power_on_shifted_features(strategy, payoff):
    X, Y = _pairs(600, 8, shift=0.6, seed=11)
    res = SequentialTest(8, TestConfig(strategy=strategy, payoff=payoff)).run(X, Y)
    assert res.reject and res.e_value >= 20


def test_states_saved_before_scorer_choice_resume_with_the_paper_scorer():
    X, Y = _pairs(30, 3, shift=0.5, seed=14)
    old = SequentialTest(3, TestConfig(scorer="paper"))
    old.run(X[:10], Y[:10], stop_on_reject=False)
    d = json.loads(json.dumps(old.to_dict()))
    del d["config"]["scorer"], d["config"]["ridge"], d["scorer"]["kind"]  # as saved before
    resumed = SequentialTest.from_dict(d)
    assert resumed.config.scorer == "paper" and isinstance(resumed.scorer, AdamScorer)
    old.run(X[10:], Y[10:], stop_on_reject=False)
    resumed.run(X[10:], Y[10:], stop_on_reject=False)
    assert resumed.history == old.history


def test_config_validation():
    with pytest.raises(ValueError):
        TestConfig(scorer="sgd")
    with pytest.raises(ValueError):
        TestConfig(strategy="doubling")
    with pytest.raises(ValueError):
        TestConfig(payoff="l2")
    with pytest.raises(ValueError):
        TestConfig(lambda_max=1.0)
    with pytest.raises(ValueError):
        TestConfig(alpha=0.0)


def test_the_library_default_test_is_the_audits():
    """TestConfig() (so run_test and simulate without a config) is the default preset that
    `trainspotter audit`, `test` and `simulate` use, not the paper's ONS/MMD."""
    from trainspotter.presets import DEFAULT_PRESET, TEST_PRESETS

    assert {k: getattr(TestConfig(), k) for k in ("strategy", "payoff", "lambda_max")} == TEST_PRESETS[DEFAULT_PRESET]
    assert (TestConfig().strategy, TestConfig().payoff) == ("mixture", "diff")
    S, H = _pairs(60, 3, shift=0.8, seed=5)
    assert run_test(_table(S, H))["config"] == TestConfig().model_dump()


def test_run_test_on_a_table():
    S, H = _pairs(300, 5, shift=0.8, seed=12)
    out = run_test(_table(S, H[:250]), TestConfig())
    json.dumps(out)
    assert out["reject"] and out["pairs_available"] == 250
    assert out["feature_cols"] == [f"f{i}" for i in range(5)]  # id/text ignored
    assert out["e_value"] >= 20 and out["p_value"] <= 0.05 and out["alpha"] == 0.05
    assert out == run_test(_table(S, H[:250]), TestConfig())  # seeded
    null = run_test(_table(H[:150], H[150:]), TestConfig())
    assert set(null) >= {"reject", "e_value", "pairs_used", "max_wealth", "p_value", "stop_time", "alpha"}


@pytest.mark.parametrize("mutate, message", [
    (lambda df: df.drop(columns="set"), "'set' column"),
    (lambda df: df.assign(set=["suspect", "member"] * (len(df) // 2)), "row 1: column 'set' has unknown label 'member'"),
    (lambda df: df[["set", "text"]], "no numeric feature column"),
    (lambda df: df.assign(f1=[np.nan] + [0.0] * (len(df) - 1)), "row 0: column 'f1' is nan"),
    (lambda df: df.assign(set="suspect"), "no 'heldout' rows"),
])
def test_run_test_rejects_bad_tables(mutate, message):
    S, H = _pairs(10, 3, seed=13)
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        run_test(mutate(_table(S, H)), TestConfig())
