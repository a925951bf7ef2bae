"""Model-based MIA methods (trainspotter.features.model_based): each against a hand
computation on tiny arrays, the NaN rules, and behaviour on a simulated reference bank."""

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from trainspotter.features.model_based import (lira_offline, lira_online, model_calibration, model_fpr,
                                                  model_loss, rmia)

T, F = True, False
PHI_1, PHI_M1, PHI_M2 = 0.8413447460685429, 0.15865525393145707, 0.022750131948179195  # Φ(1), Φ(−1), Φ(−2)


def test_model_loss_is_target_minus_the_mean_over_all_references():
    target = [-1.0, -2.0]
    refs = [[-1.5, -2.5], [-1.0, -2.0]]  # means −2 and −1.5, IN or OUT alike
    assert model_loss(target, refs) == pytest.approx([1.0, -0.5])


def test_model_calibration_uses_only_out_references():
    target = [-1.0, -2.0, -1.0]
    refs = [[-1.2, -2.0, -3.0], [-1.0, -1.5, -2.5], [-1.0, -1.0, -1.0]]
    in_mask = [[T, F, F], [F, T, F], [T, T, T]]
    s = model_calibration(target, refs, in_mask)
    # OUT means −2.5 and −1.75; row 2 has no OUT reference -> NaN
    assert s[:2] == pytest.approx([1.5, -0.25]) and math.isnan(s[2])


def test_lira_online_global_variance_by_hand():
    target = [-1.0, -2.0]
    refs = [[-1.1, -1.2, -2.0, -2.1], [-1.9, -2.0, -1.6, -1.7]]
    in_mask = [[T, T, F, F], [F, F, T, T]]
    # μ_in = −1.15, −1.65; μ_out = −2.05, −1.95; pooled σ²_in = σ²_out = (0.005 + 0.005)/2 = 0.005,
    # so log Λ = ((ℓ − μ_out)² − (ℓ − μ_in)²)/(2σ²): (1.05² − 0.15²)/.01, (.05² − .35²)/.01
    assert lira_online(target, refs, in_mask) == pytest.approx([108.0, -12.0])


def test_lira_online_per_example_variance_by_hand():
    target = [-1.1, -2.0]
    refs = [[-1.0, -1.2, -2.0, -2.4], [-2.0, -1.0, -3.0, -3.0]]
    in_mask = [[T, T, F, F], [T, F, F, F]]
    s = lira_online(target, refs, in_mask, variance="per_example")
    # row 0: IN N(−1.1, 0.02), OUT N(−2.2, 0.08) (ddof 1):
    # log N(−1.1; −1.1, .02) − log N(−1.1; −2.2, .08) = ½ log(.08/.02) + 1.21/.16
    assert s[0] == pytest.approx(0.5 * math.log(4) + 1.21 / 0.16)
    # row 1 has one IN reference: its σ_in is the global (pooled) one, here row 0's 0.02;
    # σ²_out is its own: OUT (−1, −3, −3) has mean −7/3 and s² = (16/9 + 4/9 + 4/9)/2 = 4/3
    mu_out, var_out, var_in = -7 / 3, 4 / 3, 0.02
    expected = (-0.5 * math.log(2 * math.pi * var_in) - (-2.0 + 2.0) ** 2 / (2 * var_in)
                + 0.5 * math.log(2 * math.pi * var_out) + (-2.0 - mu_out) ** 2 / (2 * var_out))
    assert s[1] == pytest.approx(expected)
    with pytest.raises(ValueError, match="variance must be"):
        lira_online(target, refs, in_mask, variance="local")


def test_lira_offline_is_the_one_sided_out_gaussian_tail():
    target = [-2.0, -1.6, -2.0]
    refs = [[-2.0, -2.2, -2.4], [-1.0, -1.2, -1.4], [-9.0, -9.0, -9.0]]
    in_mask = [[F, F, F], [F, F, F], [T, T, T]]
    # OUT means −2.2, −1.2; pooled σ² = (0.08 + 0.08)/(2 + 2) = 0.04 -> z = 1, −2; row 2: no OUT -> NaN
    s = lira_offline(target, refs, in_mask)
    assert s[:2] == pytest.approx([math.log(PHI_1), math.log(PHI_M2)]) and math.isnan(s[2])
    # m = 1: no row has a spread, σ² falls back to the variance of all values, var(−1, 1) = 1
    assert lira_offline([0.0, 0.0], [[-1.0], [1.0]], [[F], [F]]) == pytest.approx(
        [math.log(PHI_1), math.log(PHI_M1)])


def test_lira_online_without_an_in_reference_borrows_the_mean_in_out_gap():
    s = lira_online([-1.0, -1.0, -1.0], [[-1.0, -2.0], [-1.0, -2.0], [-1.5, -1.2]],
                    [[T, F], [F, F], [T, T]])
    # row 0 has IN −1 and OUT −2 (gap +1); row 1 has no IN: μ_in = μ_out + 1 = −1.5 + 1 = −0.5;
    # row 2 has no OUT: NaN. Variances pooled within rows: σ_in² from row 2's two IN values,
    # (0.15² + 0.15²)/1 = 0.045; σ_out² from row 1's two OUT values, (½² + ½²)/1 = ½
    var_in = 0.045
    log_n = lambda x, mu, var: -0.5 * math.log(2 * math.pi * var) - (x - mu) ** 2 / (2 * var)  # noqa: E731
    assert s[1] == pytest.approx(log_n(-1.0, -0.5, var_in) - log_n(-1.0, -1.5, 0.5))
    assert s[0] == pytest.approx(log_n(-1.0, -1.0, var_in) - log_n(-1.0, -2.0, 0.5))
    assert np.isnan(s[2])


def test_model_fpr_is_the_interpolated_mid_rank_percentile():
    refs = [[-3.0, -2.0, -2.0, -1.0]] * 6
    target = [-2.0, -1.5, -0.5, -3.5, -3.0, -1.0]
    # knots: F(−3) = ½/4, F(−2) = (1 + 2/2)/4 = ½ (ties count half), F(−1) = (3 + ½)/4;
    # −1.5 lies midway between −2 and −1; outside the values F is 0 or 1
    assert model_fpr(target, refs, np.zeros((6, 4), bool)) == pytest.approx(
        [0.5, (0.5 + 0.875) / 2, 1.0, 0.0, 0.125, 0.875])
    # only the OUT references count; none -> NaN
    s = model_fpr([-1.5, -1.5], [[-2.0, -1.0, -5.0], [-2.0, -1.0, -5.0]], [[F, F, T], [T, T, T]])
    assert s[0] == pytest.approx(0.5) and math.isnan(s[1])


def test_model_fpr_is_invariant_to_a_per_example_shift():
    rng = np.random.default_rng(4)
    target, refs = rng.normal(size=30), rng.normal(size=(30, 7))
    in_mask = rng.random((30, 7)) < 0.3
    in_mask[:, 0] = False  # every row keeps an OUT reference
    shift = rng.normal(scale=5.0, size=30)
    s = model_fpr(target, refs, in_mask)
    assert np.isfinite(s).all() and len(np.unique(s)) > 10
    assert model_fpr(target + shift, refs + shift[:, None], in_mask) == pytest.approx(s)
    # ... and not to a shift of the target alone
    assert not np.allclose(model_fpr(target + 0.5, refs, in_mask), s)


def _rmia_population():
    # per-token likelihoods p = exp(ℓ); two OUT references, equal here so p_OUT is plain
    p_z = np.array([0.3, 0.19, 0.1, 0.5])  # p(z | target)
    p_zref = np.array([0.25, 0.1, 0.5, 0.1])  # p(z | reference)
    return np.log(p_z), np.log(np.c_[p_zref, p_zref])


def test_rmia_offline_counts_the_population_by_hand():
    pop_target, pop_refs = _rmia_population()  # a = 1: LR(z) = 1.2, 1.9, 0.2, 5
    target = np.log([0.4, 0.1])
    refs = np.log([[0.2, 0.2], [0.2, 0.2]])  # LR(x) = 2, 0.5
    no_in = np.zeros((2, 2), bool)
    # γ = 1: LR(x)/LR(z) ≥ 1 for z with LR(z) ≤ 2 (3 of 4) and ≤ 0.5 (1 of 4)
    assert rmia(target, refs, no_in, pop_target, pop_refs) == pytest.approx([0.75, 0.25])
    # γ = 2: LR(z) ≤ 1 (only 0.2) and ≤ 0.25 (only 0.2)
    assert rmia(target, refs, no_in, pop_target, pop_refs, gamma=2.0) == pytest.approx([0.25, 0.25])


def test_rmia_offline_a_changes_the_normaliser():
    # x: p(x|θ) = .3, p_OUT = .2; one z: p(z|θ) = .5, p_OUT = .4
    args = (np.log([0.3]), np.log([[0.2]]), [[F]], np.log([0.5]), np.log([[0.4]]))
    assert rmia(*args, a=1.0) == pytest.approx([1.0])  # LR(x) = 1.5 ≥ LR(z) = 1.25
    # a = .5: p(x) = ½(1.5·.2 + .5) = .4, LR(x) = .75; p(z) = ½(1.5·.4 + .5) = .55, LR(z) = .909
    assert rmia(*args, a=0.5) == pytest.approx([0.0])
    with pytest.raises(ValueError, match="a ≤ 1"):
        rmia(*args, a=1.5)


def test_rmia_online_averages_over_every_reference_and_ignores_a():
    # x: refs p = (.6 IN, .2 OUT) -> p(x) = .4, p(x|θ) = .5, LR(x) = 1.25;
    # z: refs (.5, .3) -> .4, LR = .4/.4 = 1; refs (.1, .1) -> .1, LR = .2/.1 = 2
    args = (np.log([0.5]), np.log([[0.6, 0.2]]), [[T, F]], np.log([0.4, 0.2]), np.log([[0.5, 0.3], [0.1, 0.1]]))
    assert rmia(*args) == pytest.approx([0.5])
    assert rmia(*args, a=0.0) == pytest.approx([0.5])


def test_rmia_input_rules():
    pop_target, pop_refs = _rmia_population()
    s = rmia([np.nan, -1.0], np.log([[0.2, 0.2]] * 2), np.zeros((2, 2), bool), pop_target, pop_refs)
    assert math.isnan(s[0]) and s[1] == pytest.approx(0.5)  # LR(x) = e^-1/.2 = 1.84 ≥ 1.2 and 0.2 only
    with pytest.raises(ValueError, match="reference models"):
        rmia([-1.0], [[-1.0]], [[F]], pop_target, pop_refs)
    with pytest.raises(ValueError, match="γ > 0"):
        rmia([-1.0], [[-1.0, -1.0]], [[F, F]], pop_target, pop_refs, gamma=0.0)


def test_rmia_input_rules_population_and_refs_must_be_finite():
    pop_target, pop_refs = _rmia_population()
    pop_target[2] = np.nan
    with pytest.raises(ValueError, match="population target ℓ not finite at row 2"):
        rmia([-1.0], [[-1.0, -1.0]], [[F, F]], pop_target, pop_refs)
    with pytest.raises(ValueError, match="row 1, reference 0"):
        model_loss([-1.0, -1.0], [[-1.0], [np.inf]])
    with pytest.raises(ValueError, match="in_mask must have"):
        model_calibration([-1.0], [[-1.0, -2.0]], [[F]])



def _bank(rng, n=200, m=8, gain=0.5, noise=0.1):
    """Candidates of very different difficulty d ~ N(−3, 1); a model trained on one raises
    its ℓ by ``gain``. Half the candidates are members of the target; each reference trains
    on a random half of them."""
    d = rng.normal(-3.0, 1.0, size=n)
    member = np.arange(n) % 2 == 0
    in_mask = rng.random((n, m)) < 0.5
    in_mask[:, 0], in_mask[:, 1] = True, False  # every candidate has an IN and an OUT reference
    refs = d[:, None] + gain * in_mask + rng.normal(0, noise, (n, m))
    target = d + gain * member + rng.normal(0, noise, n)
    return target, refs, in_mask, member


@pytest.mark.parametrize("method", ["model_loss", "model_calibration", "lira_online", "lira_offline",
                                    "model_fpr", "rmia", "rmia_offline"])
def test_reference_calibration_separates_what_the_target_loss_alone_cannot(method):
    """Member gain 0.5 against a per-candidate spread of 1: ℓ_target alone has AUROC ≈ 0.64;
    every model-based score removes the candidate's difficulty and separates members."""
    rng = np.random.default_rng(7)
    target, refs, in_mask, member = _bank(rng)
    assert roc_auc_score(member, target) < 0.75
    d_pop = rng.normal(-3.0, 1.0, size=100)
    pop_target, pop_refs = d_pop + rng.normal(0, 0.1, 100), d_pop[:, None] + rng.normal(0, 0.1, (100, 8))
    scores = {"model_loss": lambda: model_loss(target, refs),
              "model_calibration": lambda: model_calibration(target, refs, in_mask),
              "lira_online": lambda: lira_online(target, refs, in_mask),
              "lira_offline": lambda: lira_offline(target, refs, in_mask),
              "model_fpr": lambda: model_fpr(target, refs, in_mask),
              "rmia": lambda: rmia(target, refs, in_mask, pop_target, pop_refs),
              "rmia_offline": lambda: rmia(target, refs[:, 1:2], np.zeros((200, 1), bool),  # reference 1 is OUT
                                           pop_target, pop_refs[:, 1:2])}[method]()
    assert np.isfinite(scores).all()
    # Model-FPR is a percentile among x's k OUT references (here k = 1..7): a non-member exceeds
    # all of them with probability 1/(k + 1) and then ties with the members at 1
    assert roc_auc_score(member, scores) > (0.85 if method == "model_fpr" else 0.95), method


def test_lira_online_ranks_a_planted_member_above_a_non_member_of_the_same_difficulty():
    rng = np.random.default_rng(8)
    _, refs, in_mask, _ = _bank(rng, n=50)
    refs[0], in_mask[0] = [-3.0, -2.5, -3.05, -2.45, -2.95, -3.0, -2.55, -2.5], [F, T, F, T, F, F, T, T]
    # candidate 0: OUT around −3, IN around −2.5; as a member the target sees −2.5, as a non-member −3
    member_like = lira_online(np.r_[-2.5, np.zeros(49)], refs, in_mask)[0]
    nonmember_like = lira_online(np.r_[-3.0, np.zeros(49)], refs, in_mask)[0]
    assert member_like > 0 > nonmember_like
