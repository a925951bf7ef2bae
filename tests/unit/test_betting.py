"""Payoffs, betting strategies and the e-process, checked against hand computations."""

import json
import math

import numpy as np
import pytest

from trainspotter.stats.betting import (
    EProcess,
    KSWitness,
    MMDWitness,
    Mixture,
    make_strategy,
    poly2_feature_map,
    wealth_path,
)

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
