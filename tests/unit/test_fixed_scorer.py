"""The fixed-direction scorer (trainspotter.stats.fixed_scorer): its formula on hand-computed
numbers, predictability, the swap antisymmetry the twins audit's validity rests on, its Type-I
rate and its one-sidedness (binomial tests at a stated false-failure rate)."""

import json
import math

import numpy as np
import pytest
from scipy.stats import binomtest

from trainspotter.features.orientation import directions
from trainspotter.stats.fixed_scorer import FixedScorer
from trainspotter.stats.scoring import make_scorer, scorer_from_dict
from trainspotter.stats.sequential import SequentialTest, TestConfig
from trainspotter.stats.simulation import stream_stops

# gray_ppl: lower is member-like (−1); gray_min_k_20: higher is (+1)
COLUMNS = ["gray_ppl", "gray_min_k_20"]
FIXED = TestConfig(scorer="fixed", strategy="mixture", payoff="diff", lambda_max=0.8)


def test_weights_are_directions_over_the_rms_of_past_differences():
    s = FixedScorer(2, signs=[+1, -1])
    assert s.score([3.0, 4.0]) == 0.0  # no pair yet: no scale, no bet
    s.update([2.0, 5.0], [1.0, 3.0])  # differences (1, 2)
    # φ = s_j / (c p_s σ_j) = (1/(2·2·1), −1/(2·2·2)) = (0.25, −0.125)
    assert s.score([3.0, 4.0]) == pytest.approx(0.25 * 3 - 0.125 * 4)
    s.update([0.0, 1.0], [3.0, 1.0])  # differences (−3, 0): σ = (√(10/2), √(4/2))
    assert s.score([3.0, 4.0]) == pytest.approx(3 / (4 * math.sqrt(5)) - 4 / (4 * math.sqrt(2)))
    assert s.theta.tolist() == [[0.25, -0.25, 0.0]]  # weights of the standardised differences, bias 0


def test_unknown_directions_get_no_weight_and_none_known_is_refused():
    s = FixedScorer(3, signs=[0, 1, 0])
    s.update([5.0, 1.0, 7.0], [1.0, 0.0, -2.0])
    assert s.score([100.0, 1.0, -50.0]) == pytest.approx(1 / 2)  # only column 1: 1/(2·1·1)
    with pytest.raises(ValueError, match="known member-like directions"):
        FixedScorer(2, signs=[0, 0])
    with pytest.raises(ValueError, match="known member-like directions"):
        make_scorer("fixed", 2)


def test_the_pair_is_scored_before_it_is_learned_and_a_swap_flips_the_difference():
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(30, 2))
    test, shadow = SequentialTest(2, FIXED, signs=directions(COLUMNS)), FixedScorer(2, signs=[-1, 1])
    for x, y in zip(X, Y):
        before = shadow.score(x) - shadow.score(y)
        step = test.update(x, y)
        assert step["score_x"] - step["score_y"] == pytest.approx(before)  # weights of pairs < t
        assert shadow.score(y) - shadow.score(x) == pytest.approx(-before)  # the swap under H0
        shadow.update(x, y)
    # the scale is symmetric in the two sides: learning the swapped pairs gives the same weights
    swapped = FixedScorer(2, signs=[-1, 1])
    for x, y in zip(X, Y):
        swapped.update(y, x)
    assert np.allclose(swapped.phi, shadow.phi)


def test_save_and_load_continue_the_same_stream():
    rng = np.random.default_rng(4)
    X, Y = rng.normal(0.3, 1, size=(40, 2)), rng.normal(size=(40, 2))
    full = SequentialTest(2, FIXED, signs=directions(COLUMNS))
    full.run(X, Y, stop_on_reject=False)
    part = SequentialTest(2, FIXED, signs=directions(COLUMNS))
    part.run(X[:17], Y[:17], stop_on_reject=False)
    resumed = SequentialTest.from_dict(json.loads(json.dumps(part.to_dict())))
    assert isinstance(resumed.scorer, FixedScorer)
    resumed.run(X[17:], Y[17:], stop_on_reject=False)
    assert resumed.history == full.history and resumed.wealth == full.wealth
    assert isinstance(scorer_from_dict(part.scorer.to_dict()), FixedScorer)


def _stops(S, H, B=2000, n=150, seed=0):
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.permutation(len(S))[:n] for _ in range(B)])
    return stream_stops(S, H, idx, idx, [FIXED], [0.05], directions(COLUMNS))[0][0, 0]


def test_type_one_rate_on_exchangeable_pairs_is_at_most_alpha():
    """H0: each pair's two rows are a random order of two draws (heavy-tailed, unequal scales).
    2000 streams of 150 pairs; the test fails only if the rate is above α with binomial p < 0.001."""
    rng = np.random.default_rng(11)
    a = rng.standard_t(3, size=(600, 2)) * [20.0, 0.3]
    b = rng.standard_t(3, size=(600, 2)) * [20.0, 0.3] + [5.0, 0.1]  # the passages differ, not the sides
    swap = rng.random(600) < 0.5
    S, H = np.where(swap[:, None], a, b), np.where(swap[:, None], b, a)
    hits = int((_stops(S, H) > 0).sum())
    assert binomtest(hits, 2000, 0.05, alternative="greater").pvalue > 1e-3, hits


def test_it_finds_the_known_direction_and_ignores_the_other():
    """Suspect rows shifted the member-like way (lower ppl, higher Min-K) are found; shifted the
    other way (held-out more member-like: pollution) they are not (one-sided), beyond α at p < 0.001."""
    rng = np.random.default_rng(12)
    base = rng.normal(size=(600, 2)) * [20.0, 0.3]
    noise = rng.normal(size=(600, 2)) * [20.0, 0.3]
    shift = np.array([-6.0, 0.09])  # 0.3 of a difference's σ per feature, member-like
    assert (_stops(base + shift, base + noise) > 0).mean() > 0.9
    hits = int((_stops(base - shift, base + noise) > 0).sum())
    assert binomtest(hits, 2000, 0.05, alternative="greater").pvalue > 1e-3, hits
