"""Payoffs, betting strategies and the e-process, checked against hand computations."""

import json
import math

import numpy as np
import pytest

from scipy.stats import binomtest

from trainspotter.stats.eprocess import EProcess, wealth_path
from trainspotter.stats.payoffs import KSWitness, MMDWitness, make_payoff, payoff_from_dict, poly2_feature_map
from trainspotter.stats.strategies import Mixture, make_strategy

ONS_STEP = 2.0 / (2.0 - math.log(3.0))  # 2/(2 − ln 3) = 2/0.901388 ≈ 2.218803 (App. C.1)


def test_ons_matches_hand_computation():
    u = [0.5, -0.2, 1.0]
    # Round 1: λ_1 = 0, so W_1 = 1.
    lam1, a0 = 0.0, 1.0
    w1 = 1.0 * (1 + lam1 * 0.5)
    z1 = 0.5 / (1 + lam1 * 0.5)                   # 0.5
    a1 = a0 + z1 ** 2                             # 1.25
    lam2 = min(0.8, lam1 + ONS_STEP * z1 / a1)    # 0.4·2.218803 = 0.8875 → clipped to 0.8
    assert lam2 == 0.8
    # Round 2: W_2 = 1·(1 + 0.8·(−0.2)) = 0.84.
    w2 = w1 * (1 + lam2 * -0.2)
    z2 = -0.2 / (1 + lam2 * -0.2)                 # −0.2/0.84 = −0.238095…
    a2 = a1 + z2 ** 2                             # 1.306689…
    lam3 = lam2 + ONS_STEP * z2 / a2              # 0.8 − 2.218803·0.182213 = 0.395707
    # Round 3: W_3 = 0.84·(1 + 0.395707) = 1.172394.
    w3 = w2 * (1 + lam3 * 1.0)
    assert w2 == pytest.approx(0.84, abs=1e-15)
    assert lam3 == pytest.approx(0.395707, abs=1e-6)
    assert w3 == pytest.approx(1.172394, abs=1e-6)
    np.testing.assert_allclose(wealth_path(u, "ons", 0.8), [w1, w2, w3], rtol=1e-12)
    assert wealth_path(u, "ons")[0] == 1.0  # ONS never bets in round 1


def test_ons_state_after_updates():
    s = make_strategy("ons", 0.8)
    s.update(0.5)
    assert s.lam[0] == 0.8 and s.a[0] == 1.25


def test_kelly_matches_hand_computation_with_past_rounds_only():
    u = [0.5, -0.2, 1.0, 0.3]
    eps = 1.0
    # λ_t = clip(Σ_{j<t} u_j / (Σ_{j<t} u_j² + ε), ±0.8)
    lam = [0.0,                               # no past rounds
           0.5 / (0.25 + eps),                # 0.4
           (0.5 - 0.2) / (0.25 + 0.04 + eps),  # 0.3/1.29 = 0.232558…
           (0.5 - 0.2 + 1.0) / (0.25 + 0.04 + 1.0 + eps)]  # 1.3/2.29 = 0.567686…
    w, expected = 1.0, []
    for lam_t, u_t in zip(lam, u):
        w *= 1 + lam_t * u_t
        expected.append(w)
    np.testing.assert_allclose(expected, [1.0, 0.92, 1.133953, 1.327073], atol=1e-6)
    np.testing.assert_allclose(wealth_path(u, "kelly", 0.8), expected, rtol=1e-12)


def test_kelly_is_clipped():
    s = make_strategy("kelly", 0.3)
    s.update(1.0)  # 1/(1+1) = 0.5 → 0.3
    assert s.lam[0] == pytest.approx(0.3)


def test_mixture_equals_average_of_constant_bets():
    rng = np.random.default_rng(1)
    u = rng.uniform(-1, 1, size=50)
    grid = 0.8 * np.arange(1, 11) / 10
    constant = np.cumprod(1 + grid[:, None] * u[None, :], axis=1)  # W^k_t for each fixed λ_k
    np.testing.assert_allclose(wealth_path(u, "mixture", 0.8), constant.mean(axis=0), rtol=1e-10)
    assert Mixture(0.8).lam[0] == pytest.approx(grid.mean())


def test_wealth_path_batches_and_rejects_bad_payoffs():
    rng = np.random.default_rng(2)
    u = rng.uniform(-1, 1, size=(3, 20))
    batch = wealth_path(u, "ons")
    for i in range(3):
        np.testing.assert_allclose(batch[i], wealth_path(u[i], "ons"), rtol=1e-12)
    with pytest.raises(ValueError):
        wealth_path([0.5, 1.5])
    with pytest.raises(ValueError):
        wealth_path([0.5], lambda_max=1.0)  # 1 + λu could hit 0
    with pytest.raises(ValueError):
        wealth_path([0.5], strategy="martingale")


def test_poly2_feature_map_reproduces_kernel():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=5), rng.normal(size=5)
    gamma = 1 / 5
    assert poly2_feature_map(x) @ poly2_feature_map(y) == pytest.approx((gamma * x @ y + 1) ** 2)
    assert poly2_feature_map(x, gamma=0.3, c=2.0) @ poly2_feature_map(y, gamma=0.3, c=2.0) == pytest.approx(
        (0.3 * x @ y + 2.0) ** 2)


def test_mmd_witness_matches_definition_on_tiny_example():
    """p = 1 so γ = 1, c = 1: K(x, y) = (xy + 1)². Everything below uses K only."""
    K = lambda a, b: (a * b + 1) ** 2  # noqa: E731
    pairs = [(1.0, 0.0), (2.0, 1.0), (0.5, -1.0)]
    wit = MMDWitness(dim=1, standardise=False)  # the paper's witness on raw inputs
    # Round 1: g_1 = 0 → v_1 = 0.
    assert wit.edge(1.0, 0.0) == 0.0
    wit.update(*pairs[0])
    # g_2 = Π(K(1,·) − K(0,·)); its norm² = K(1,1) − 2K(1,0) + K(0,0) = 4 − 2 + 1 = 3 > 1.
    n2 = math.sqrt(K(1, 1) - 2 * K(1, 0) + K(0, 0))
    v2 = (K(1, 2) - K(0, 2) - K(1, 1) + K(0, 1)) / n2   # (9 − 1 − 4 + 1)/√3
    assert v2 == pytest.approx(5 / math.sqrt(3))
    assert wit.edge(2.0, 1.0) == pytest.approx(v2, rel=1e-12)
    assert wit.payoff(2.0, 1.0) == pytest.approx(math.tanh(v2), rel=1e-12)
    wit.update(*pairs[1])
    # h = g_2 + (1/2)(K(2,·) − K(1,·)); ‖h‖² = 1 + ¼(K(2,2) − 2K(2,1) + K(1,1)) + ⟨g_2, K(2,·) − K(1,·)⟩
    norm_h = math.sqrt(1 + 0.25 * (K(2, 2) - 2 * K(2, 1) + K(1, 1)) + v2)  # √(1 + 2.75 + 5/√3)
    g2_diff = (K(1, 0.5) - K(0, 0.5) - K(1, -1) + K(0, -1)) / n2          # g_2(0.5) − g_2(−1)
    step_diff = 0.5 * (K(2, 0.5) - K(1, 0.5) - K(2, -1) + K(1, -1))        # ½(4 − 2.25 − 1 + 0)
    v3 = (g2_diff + step_diff) / norm_h
    assert wit.edge(0.5, -1.0) == pytest.approx(v3, rel=1e-12)
    assert np.linalg.norm(wit.w) == pytest.approx(1.0)  # projected onto the unit ball


def test_mmd_witness_on_vectors_is_antisymmetric_and_learns_direction():
    rng = np.random.default_rng(4)
    wit = MMDWitness(dim=3)
    assert wit.gamma == pytest.approx(1 / 3)
    for _ in range(200):
        wit.update(rng.normal(size=3) + [1.0, 0, 0], rng.normal(size=3))
    x, y = rng.normal(size=3), rng.normal(size=3)
    assert wit.edge(x, y) == pytest.approx(-wit.edge(y, x))
    # Witness is larger on the shifted side: g(e1) > g(−e1).
    assert wit.witness(np.array([1.0, 0, 0])) > wit.witness(np.array([-1.0, 0, 0]))
    assert np.linalg.norm(wit.w) <= 1 + 1e-12


def test_standardised_mmd_witness_matches_hand_computation():
    """Payoff "mmd-std": the paper's witness on x̃ = (x − μ)/σ of past rounds (p = 1, γ = c = 1).

    Every number below is derived by hand from K(a, b) = (ab + 1)² only.
    """
    K = lambda a, b: (a * b + 1) ** 2  # noqa: E731
    wit = make_payoff("mmd-std")
    assert isinstance(wit, MMDWitness) and wit.standardise and wit.name == "mmd-std"
    # Round 1: g_1 = 0 → v_1 = 0 whatever the scale.
    assert wit.edge(1.0, 0.0) == 0.0 and wit.payoff(1e6, -1e6) == 0.0
    wit.update(1.0, 0.0)
    # Rows {1, 0}: μ = 0.5, σ = 0.5, so the step uses x̃ = 1, ỹ = −1:
    # g_2 = (K(1,·) − K(−1,·)) / ‖·‖, ‖·‖² = K(1,1) − 2K(1,−1) + K(−1,−1) = 4 − 0 + 4 = 8; g_2(x) = √2·x.
    assert wit.mu[0, 0] == 0.5 and wit.sd[0, 0] == 0.5
    # Round 2, pair (2, 1) → x̃ = 3, ỹ = 1: v_2 = √2·3 − √2·1 = 2√2.
    v2 = (K(1, 3) - K(-1, 3) - K(1, 1) + K(-1, 1)) / math.sqrt(8)
    assert v2 == pytest.approx(2 * math.sqrt(2))
    assert wit.edge(2.0, 1.0) == pytest.approx(v2, rel=1e-12)
    assert wit.payoff(2.0, 1.0) == pytest.approx(math.tanh(2 * math.sqrt(2)), rel=1e-12)
    wit.update(2.0, 1.0)
    # Rows {1, 0, 2, 1}: μ = 1, σ² = (0 + 1 + 1 + 0)/4 = ½, so the step uses x̃ = √2, ỹ = 0:
    # h = g_2 + ½(K(√2,·) − K(0,·)), ‖h‖² = 1 + ¼(9 − 2 + 1) + (g_2(√2) − g_2(0)) = 1 + 2 + 2 = 5.
    assert wit.mu[0, 0] == pytest.approx(1.0) and wit.sd[0, 0] == pytest.approx(1 / math.sqrt(2))
    # Round 3, pair (0.5, −1) → a = −1/√2, b = −2√2:
    # g_2(a) − g_2(b) = √2(a − b) = 3;  ½(K(√2,a) − K(0,a) − K(√2,b) + K(0,b)) = ½(0 − 1 − 9 + 1) = −4.5.
    a, b = -1 / math.sqrt(2), -2 * math.sqrt(2)
    r2 = math.sqrt(2)
    v3 = (math.sqrt(2) * (a - b) + 0.5 * (K(r2, a) - K(0, a) - K(r2, b) + K(0, b))) / math.sqrt(5)
    assert v3 == pytest.approx(-1.5 / math.sqrt(5))
    assert wit.edge(0.5, -1.0) == pytest.approx(v3, rel=1e-12)
    assert wit.payoff(0.5, -1.0) == pytest.approx(math.tanh(-1.5 / math.sqrt(5)), rel=1e-12)


def _mmd_payoffs(name, X, Y, batch=None):
    """u_1..u_n of payoff `name` on streams X, Y ((n,) or (B, n))."""
    wit = make_payoff(name, batch=batch)
    out = []
    for t in range(X.shape[-1]):
        out.append(wit.payoff(X[..., t], Y[..., t]))
        wit.update(X[..., t], Y[..., t])
    return np.stack(out, axis=-1), wit


def test_standardised_mmd_is_antisymmetric_bounded_and_scale_free():
    rng = np.random.default_rng(6)
    X, Y = rng.standard_cauchy(size=(2, 4, 60)) * 1e4  # heavy tails, huge scale
    wit = make_payoff("mmd-std", batch=4)
    for t in range(60):
        u, u_swapped = wit.payoff(X[:, t], Y[:, t]), wit.payoff(Y[:, t], X[:, t])
        np.testing.assert_array_equal(u, -u_swapped)      # swapping X_t and Y_t negates u_t
        assert np.all(np.abs(u) <= 1.0)
        wit.update(X[:, t], Y[:, t])
    # One common affine map a·s + b (a > 0) of all scores leaves every payoff unchanged,
    # so the payoff no longer depends on the scale of the scorer's logits …
    X, Y = rng.normal(size=(2, 40)) + [[0.5], [0.0]]
    u = _mmd_payoffs("mmd-std", X, Y)[0]
    np.testing.assert_allclose(_mmd_payoffs("mmd-std", 1e-3 * X + 7.0, 1e-3 * Y + 7.0)[0], u, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(_mmd_payoffs("mmd-std", 50.0 * X - 3.0, 50.0 * Y - 3.0)[0], u, rtol=1e-7, atol=1e-9)
    # … which the paper's raw witness does not do.
    assert np.max(np.abs(_mmd_payoffs("mmd", 1e-3 * X, 1e-3 * Y)[0] - _mmd_payoffs("mmd", X, Y)[0])) > 0.1


def test_standardised_mmd_payoff_uses_only_past_rounds():
    """u_t = tanh(⟨w_t, φ(x̃_t) − φ(ỹ_t)⟩) with μ, σ = mean and population sd of all past values."""
    rng = np.random.default_rng(7)
    X, Y = rng.normal(size=(2, 25)) * 3.0 + 1.0
    wit = make_payoff("mmd-std")
    for t in range(25):
        past = np.concatenate([X[:t], Y[:t]])
        if t >= 1:
            m, sd = past.mean(), past.std()
            phi = lambda s: poly2_feature_map(np.array([(s - m) / sd]))  # noqa: E731
            expected = math.tanh(wit.w[0] @ (phi(X[t]) - phi(Y[t])))
            before = json.dumps(wit.to_dict())
            assert wit.payoff(X[t], Y[t]) == pytest.approx(expected, rel=1e-10, abs=1e-12)
            assert json.dumps(wit.to_dict()) == before  # betting on round t changes nothing
        wit.update(X[t], Y[t])
    assert wit.n == 50 and wit.t == 25


@pytest.mark.parametrize("name", ["mmd-std", "mmd"])
def test_mmd_save_load_continuation_is_exact_and_batch_equals_single(name):
    rng = np.random.default_rng(8)
    X, Y = rng.normal(size=(2, 3, 40)) * 0.05
    full_u, full = _mmd_payoffs(name, X, Y, batch=3)
    part = make_payoff(name, batch=3)
    for t in range(17):
        part.update(X[:, t], Y[:, t])
    resumed = payoff_from_dict(json.loads(json.dumps(part.to_dict())))
    assert resumed.name == name
    rest = []
    for t in range(17, 40):
        rest.append(resumed.payoff(X[:, t], Y[:, t]))
        resumed.update(X[:, t], Y[:, t])
    np.testing.assert_array_equal(np.stack(rest, axis=1), full_u[:, 17:])
    assert resumed.to_dict() == full.to_dict()
    for i in range(3):  # the batch axis runs independent streams
        np.testing.assert_allclose(_mmd_payoffs(name, X[i], Y[i])[0], full_u[i], rtol=1e-12, atol=1e-15)


def test_mmd_state_saved_before_standardisation_resumes_as_the_raw_witness():
    old = {"name": "mmd", "dim": 1, "batch": None, "gamma": 1.0, "c": 1.0, "t": 1, "w": [[0.0, 0.8, 0.6]]}
    wit = payoff_from_dict(old)
    assert not wit.standardise
    assert wit.edge(2.0, 1.0) == pytest.approx(0.8 * math.sqrt(2) + 0.6 * 3)  # ⟨w, φ(2) − φ(1)⟩ on raw inputs


def test_standardised_mmd_type1_on_null_streams():
    """Fresh null streams (X, Y i.i.d.) of very different laws and scales.

    The rejection rate must not exceed α = 0.05: one-sided binomial test per
    strategy at level 1e-3, so a valid payoff fails it with probability ≤ 2e-3.
    """
    rng = np.random.default_rng(9)
    T, n, alpha = 600, 300, 0.05
    Z = np.concatenate([rng.standard_cauchy(size=(2, T // 2, n)), 1e-3 * rng.normal(size=(2, T // 2, n))], axis=1)
    u = _mmd_payoffs("mmd-std", Z[0], Z[1], batch=T)[0]
    for strategy in ("ons", "mixture"):
        k = int((wealth_path(u, strategy, 0.8) >= 1 / alpha).any(axis=1).sum())
        p = binomtest(k, T, alpha, alternative="greater").pvalue
        assert p > 1e-3, f"{strategy}: {k}/{T} null rejections, binomial p = {p:.2g}"


def test_standardised_mmd_decides_on_small_scores_where_the_raw_witness_stalls():
    """Scores on a small scale (a fresh scorer's logits): the raw witness's edge is ~1e-4."""
    rng = np.random.default_rng(10)
    X, Y = 0.01 * rng.normal(1.0, 1.0, size=(200, 100)), 0.01 * rng.normal(0.0, 1.0, size=(200, 100))
    tpr = {name: (wealth_path(_mmd_payoffs(name, X, Y, batch=200)[0], "ons", 0.8) >= 20).any(axis=1).mean()
           for name in ("mmd-std", "mmd")}
    assert tpr["mmd"] == 0.0
    assert tpr["mmd-std"] > 0.8


def test_ks_witness_threshold_and_payoff():
    ks = KSWitness()
    assert ks.edge(5.0, -5.0) == 0.0  # no past data → no bet
    ks.update(1.0, 2.0)
    ks.update(3.0, 0.0)
    # Past X = {1, 3}, Y = {2, 0}. F̂_Y − F̂_X at c = 0, 1, 2, 3: ½, 0, ½, 0 → first maximiser c = 0.
    assert ks.threshold()[0] == 0.0
    assert ks.edge(0.5, -1.0) == 1.0    # 1{0.5 > 0} − 1{−1 > 0}
    assert ks.edge(-0.5, 0.2) == -1.0
    assert ks.edge(0.5, 0.2) == 0.0


def test_ks_witness_projects_vectors_predictably():
    ks = KSWitness(dim=2)
    ks.update([1.0, 0.0], [0.0, 0.0])  # direction = (1, 0), projected with the old (zero) direction
    assert ks.xs[0, 0] == 0.0 and ks.ys[0, 0] == 0.0
    ks.update([2.0, 5.0], [1.0, 5.0])  # projected with (1, 0): 2 and 1
    assert ks.xs[0, 1] == 2.0 and ks.ys[0, 1] == 1.0


def test_eprocess_stopping_rule_evalue_and_pvalue():
    ep = EProcess("ons", 0.8, alpha=0.05)
    u = [1.0] * 12
    path = wealth_path(u, "ons", 0.8)
    tau = int(np.argmax(path >= 20)) + 1
    for t, ut in enumerate(u, start=1):
        ep.update(ut)
        assert ep.wealth == pytest.approx(path[t - 1], rel=1e-12)
    assert ep.rejected and ep.stop_time == tau
    assert ep.e_value == pytest.approx(path[tau - 1], rel=1e-12)  # W at the stop, not the current W
    assert ep.wealth > ep.e_value                                 # it kept running after the stop
    assert ep.p_value == pytest.approx(1 / path.max(), rel=1e-12)


def test_eprocess_pvalue_uses_running_max_and_is_capped():
    ep = EProcess("kelly", 0.8, alpha=0.01)
    assert ep.p_value == 1.0
    for ut in [1, 1, 1, -1, -1, -1, -1]:
        ep.update(ut)
    assert not ep.rejected and ep.stop_time is None
    assert ep.max_wealth > ep.wealth
    assert ep.p_value == pytest.approx(min(1.0, 1 / ep.max_wealth))
    assert ep.e_value == pytest.approx(ep.wealth)  # no crossing: current wealth


@pytest.mark.parametrize("strategy", ["ons", "kelly", "mixture"])
def test_eprocess_save_load_continuation_is_exact(strategy):
    rng = np.random.default_rng(5)
    u = np.clip(rng.normal(0.3, 0.5, size=60), -1, 1)
    full = EProcess(strategy, 0.8, alpha=0.05)
    for ut in u:
        full.update(ut)
    part = EProcess(strategy, 0.8, alpha=0.05)
    for ut in u[:25]:
        part.update(ut)
    resumed = EProcess.from_dict(json.loads(json.dumps(part.to_dict())))
    for ut in u[25:]:
        resumed.update(ut)
    assert resumed.to_dict() == full.to_dict()
    assert resumed.wealth == full.wealth and resumed.stop_time == full.stop_time


def test_ks_threshold_kept_by_insertion_equals_a_fresh_sort_with_ties():
    """The sorted past values are kept by insertion each round; a witness rebuilt from its
    saved values (one full sort) must give the same threshold c_t every round, also with
    many tied values (rounded scores) and on a batch of streams."""
    rng = np.random.default_rng(11)
    w = KSWitness(dim=1, batch=5)
    for t in range(60):
        x, y = np.round(rng.normal(0.3, 1, 5), 1), np.round(rng.normal(0, 1, 5), 1)
        fresh = KSWitness.from_dict(w.to_dict())
        np.testing.assert_array_equal(w.threshold(), fresh.threshold())
        np.testing.assert_array_equal(w.payoff(x, y), fresh.payoff(x, y))
        w.update(x, y)
    vals, signs = w._sorted()
    assert np.all(np.diff(vals, axis=1) >= 0) and (signs == 1).sum() == (signs == -1).sum() == 5 * 60
