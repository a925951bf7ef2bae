"""Rounds of m sub-pairs (twins with k > 2 variants, issue 35): u_t is the mean of the sub-pairs'
payoffs (trainspotter.stats.sequential, "Sub-pairs"). Its formula on hand-computed numbers, the
antisymmetry of every payoff that the validity argument needs, the Type-I rate under a uniform
draw of the public variant among k = 4 (binomial test at a stated false-failure rate), and why
the mean pays: a smaller payoff variance than one private variant drawn at random."""

import copy
import math

import numpy as np
import pytest
from scipy.stats import binomtest

from trainspotter.features.orientation import directions
from trainspotter.stats.payoffs import PAYOFFS
from trainspotter.stats.sequential import SequentialTest, TestConfig
from trainspotter.stats.simulation import stream_stops

# gray_ppl: lower is member-like (−1); gray_min_k_20: higher is (+1)
COLUMNS = ["gray_ppl", "gray_min_k_20"]
FIXED = TestConfig(scorer="fixed", strategy="mixture", payoff="diff", lambda_max=0.8)


def test_the_round_bets_the_mean_of_its_sub_pairs_payoffs_then_learns_all_of_them():
    test = SequentialTest(2, FIXED, signs=directions(COLUMNS))
    # round 1: no scale yet, so every score is 0 and u_1 = 0; the scorer then absorbs 3 sub-pairs,
    # differences (1, 2), (−1, 2), (1, −2): σ = (√(3/3), √(12/3)) = (1, 2)
    step = test.update([[1, 2], [0, 3], [2, 0]], [[0, 0], [1, 1], [1, 2]])
    assert step["u"] == 0.0 and test.scorer.n_pairs == 3
    # φ = s_j / (c p_s σ_j) = (−1/(2·2·1), 1/(2·2·2)) = (−0.25, 0.125); round 2's differences
    # (−1, 4), (1, 0), (2, 0) score 0.75, −0.25, −0.5
    step = test.update([[0, 4], [1, 0], [3, 1]], [[1, 0], [0, 0], [1, 1]])
    u2 = (math.tanh(0.75) + math.tanh(-0.25) + math.tanh(-0.5)) / 3
    assert step["u"] == pytest.approx(u2)
    assert step["wealth"] == pytest.approx(test.eprocess.wealth) and test.scorer.n_pairs == 6
    assert step["score_x"] == pytest.approx(np.mean([-0.25 * 0 + 0.125 * 4, -0.25, -0.75 + 0.125]))


def test_one_sub_pair_is_the_single_row_round_bit_for_bit_and_batches_match_single_streams():
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(40, 3, 2)), rng.normal(size=(40, 3, 2)) - [1.0, 0.0]
    one, rows = SequentialTest(2, FIXED, signs=[-1, 1]), SequentialTest(2, FIXED, signs=[-1, 1])
    for x, y in zip(X[:, :1], Y[:, :1]):
        assert one.update(x, y)["u"] == rows.update(x[0], y[0])["u"]
    assert one.to_dict() == rows.to_dict()
    # stream_stops with (B, n, m) indices runs the same rounds as SequentialTest, stream by stream
    S, H = X.reshape(-1, 2), Y.reshape(-1, 2)
    idx = np.arange(120).reshape(1, 40, 3).repeat(2, axis=0)
    idx[1] = idx[1, ::-1]  # the second stream in reverse order
    config = TestConfig(scorer="online", strategy="mixture", payoff="mmd", lambda_max=0.8)
    stops, _ = stream_stops(S, H, idx, idx, [config], [0.05, 0.5], None)
    for b in range(2):
        test = SequentialTest(2, config)
        res = test.run(S[idx[b]], H[idx[b]], stop_on_reject=False)
        for a, alpha in enumerate((0.05, 0.5)):
            hit = np.flatnonzero(res.wealth >= 1 / alpha)
            assert stops[0, a, b] == (hit[0] + 1 if len(hit) else 0)
    assert stops[0, 1].min() > 0  # the shift is found, so the comparison is not of zeros
    with pytest.raises(ValueError, match=r"\(2,\) or \(m, 2\)"):
        SequentialTest(2, FIXED, signs=[-1, 1]).update(np.zeros((3, 2)), np.zeros((2, 2)))


@pytest.mark.parametrize("payoff", PAYOFFS)
@pytest.mark.parametrize("scorer", ["online", "fixed"])
def test_every_payoff_is_antisymmetric_so_a_swap_of_every_sub_pair_negates_the_round(payoff, scorer):
    """φ_t(a, b) = −φ_t(b, a) for the state of rounds < t: what makes the mean over the k − 1
    private variants a fair bet under a uniform draw of the public one."""
    rng = np.random.default_rng(11)
    test = SequentialTest(2, TestConfig(scorer=scorer, payoff=payoff), signs=[-1, 1])
    nonzero = 0
    for _ in range(25):
        x, y = rng.standard_t(3, size=(3, 2)), rng.standard_t(3, size=(3, 2)) + [0.0, 0.4]
        u = copy.deepcopy(test).update(x, y)["u"]
        assert copy.deepcopy(test).update(y, x)["u"] == pytest.approx(-u, abs=1e-12)
        nonzero += abs(u) > 1e-6
        test.update(x, y)
    assert nonzero >= 10  # the payoffs bet (an all-zero u would be trivially antisymmetric)


def _variants(rng, passages: int, k: int) -> np.ndarray:
    """Rows f(x_i | x_j) of every ordered pair (i, j) of a passage's k exchangeable variants, shape
    (passages·k·k, 3): twin-dependent, heavy-tailed and nonlinear (row (i, i) is unused)."""
    level = rng.standard_t(3, size=(passages, 1)) * 2.0  # the passage: shared by its variants
    v = level + rng.standard_t(3, size=(passages, k))
    a, b = v[:, :, None], v[:, None, :]
    rows = np.stack([a + 0.0 * b, np.tanh(a - b) + 0.3 * a ** 2, np.abs(a) * b], axis=-1)
    return rows.reshape(-1, 3), v


def _sub_pair_indices(public: np.ndarray, order: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Index arrays (B, n, k−1) into ``_variants``' rows: round t is passage order[b, t]'s public
    variant against each other one, f(pub | j) against f(j | pub)."""
    pub = np.take_along_axis(public, order, axis=1)[..., None]
    others = np.stack([np.arange(k)[np.arange(k) != i] for i in range(k)])[pub[..., 0]]  # (B, n, k−1)
    base = order[..., None] * k * k
    return base + pub * k + others, base + others * k + pub


def test_type_one_rate_with_k_4_and_a_uniform_draw_stays_at_most_alpha_and_a_rigged_draw_is_caught():
    """1000 streams of 100 passages, each with k = 4 exchangeable variants and the public one drawn
    uniformly per stream; the learned scorer with the kernel (MMD) witness, and the fixed scorer
    with the KS payoff: rejection rate ≤ α = 0.05 (one-sided binomial p > 0.001, a false failure in
    1 of 1000 runs of a valid test at exactly α). Drawing the variant with the largest v as public
    instead breaks exchangeability, and the same test finds it in most streams."""
    rng = np.random.default_rng(2025)
    B, n, k = 1000, 100, 4
    rows, v = _variants(rng, n, k)
    order = np.stack([rng.permutation(n) for _ in range(B)])
    uniform = rng.integers(0, k, size=(B, n))
    rigged = np.broadcast_to(v.argmax(axis=1), (B, n))
    for config, signs in ((TestConfig(scorer="online", payoff="mmd"), None),
                          (TestConfig(scorer="fixed", payoff="ks"), [1, 1, 1])):
        ix, iy = _sub_pair_indices(uniform, order, k)
        stops, _ = stream_stops(rows, rows, ix, iy, [config], [0.05], signs)
        hits = int((stops > 0).sum())
        assert binomtest(hits, B, 0.05, alternative="greater").pvalue > 0.001, (config.scorer, hits)
        ix, iy = _sub_pair_indices(rigged[:100], order[:100], k)
        stops, _ = stream_stops(rows, rows, ix, iy, [config], [0.05], signs)
        assert (stops > 0).mean() > 0.5, config.scorer


def test_the_mean_over_the_private_variants_has_less_payoff_variance_than_one_drawn_at_random():
    """With one state of rounds < t, the round's u is the mean of the sub-pairs' payoffs u_j, so
    Var(mean_j u_j) ≤ mean_j Var(u_j) (the sample covariance matrix is positive semi-definite: this
    holds on any draws), and one private variant J drawn at random has Var(u_J) = mean_j Var(u_j)
    (plus the spread of the u_j's means, ~0 under H0): 1.7 times the mean's here (the variants
    share their passage's level, so their payoffs are correlated), asserted at 1.3× on 3000 draws
    (a relative standard error of the ratio of ~4%)."""
    rng = np.random.default_rng(7)
    k, n = 4, 3000
    rows, _ = _variants(rng, n, k)
    test = SequentialTest(3, TestConfig(scorer="fixed", payoff="diff"), signs=[1, 1, 1])
    warm = rng.permutation(n)[:50]
    public = rng.integers(0, k, size=(1, n))
    ix, iy = _sub_pair_indices(public, np.arange(n)[None], k)
    for t in warm:  # a scorer with a scale: fixed from here on (the copies below do not learn)
        test.update(rows[ix[0, t]], rows[iy[0, t]])
    u_mean, u_each = np.zeros(n), np.zeros((n, k - 1))
    for t in range(n):
        u_mean[t] = copy.deepcopy(test).update(rows[ix[0, t]], rows[iy[0, t]])["u"]
        for j in range(k - 1):
            u_each[t, j] = copy.deepcopy(test).update(rows[ix[0, t, j]], rows[iy[0, t, j]])["u"]
    assert np.allclose(u_mean, u_each.mean(axis=1))
    assert u_mean.var() <= u_each.var(axis=0).mean()
    u_one = u_each[np.arange(n), rng.integers(0, k - 1, size=n)]
    assert u_one.var() > 1.3 * u_mean.var() > 0
