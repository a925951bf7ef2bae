"""The keyed release's test on arrays (trainspotter.stats.exact_null) and its green lists
(trainspotter.keyed.watermark): hand-computed wealth, the exact null probabilities against brute
force, and the Type-I rate over fresh keys by a binomial test at a false-failure rate of 0.001."""

import itertools
import math
import secrets
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binom, binomtest

from trainspotter.stats.eprocess import EProcessConfig
from trainspotter.stats.exact_null import fixed_n_pvalue, hypergeometric_null, key_rank, unit_eprocess, unit_payoffs
from trainspotter.keyed.watermark import CudaRandpermGreenList, KeyedGreenList, green_many, philox4x32


@pytest.mark.parametrize("ctr, key, want", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))])
def test_philox_matches_the_random123_known_answers(ctr, key, want):
    assert tuple(int(w) for w in philox4x32(*ctr, *key)) == want


def test_payoffs_and_wealth_by_hand():
    """x = (1, 0, 1), p = (1/4, 1/2, 1/4): u = (3/4 / 3/4, −1/2 / 1/2, 1) = (1, −1, 1); the mixture's
    wealth is the mean over its stakes λ_k = 0.08 k of (1 + λ)(1 − λ)(1 + λ)."""
    x, p = [1, 0, 1], [0.25, 0.5, 0.25]
    np.testing.assert_allclose(unit_payoffs(x, p), [1.0, -1.0, 1.0])
    np.testing.assert_allclose(unit_payoffs([0.25], [0.25]), [0.0])
    np.testing.assert_allclose(unit_payoffs([0.0], [0.8]), [-1.0])  # p > 1/2: scaled by p
    lam = 0.08 * np.arange(1, 11)
    want = np.mean((1 + lam) * (1 - lam) * (1 + lam))
    assert unit_eprocess(x, p).wealth == pytest.approx(want, rel=1e-12)
    # ONS: λ_1 = 0, then as in tests/unit/test_betting.py; a continued run multiplies on
    first = unit_eprocess(x[:2], p[:2], EProcessConfig(strategy="ons"))
    both = unit_eprocess(x[2:], p[2:], state=first.to_dict())
    assert both.wealth == pytest.approx(unit_eprocess(x, p, EProcessConfig(strategy="ons")).wealth, rel=1e-12)
    with pytest.raises(ValueError):
        unit_payoffs([1.2], [0.5])


def test_weighted_payoffs_and_wealth_by_hand():
    """w = (1/2, 1, 0): u = (1/2 · 1, 1 · (−1), 0); the mixture's wealth is the mean over its stakes
    of (1 + λ/2)(1 − λ); a weight outside [0, 1] could stake more than the wealth and is refused."""
    x, p, w = [1, 0, 1], [0.25, 0.5, 0.25], [0.5, 1.0, 0.0]
    np.testing.assert_allclose(unit_payoffs(x, p, w), [0.5, -1.0, 0.0])
    lam = 0.08 * np.arange(1, 11)
    assert unit_eprocess(x, p, w=w).wealth == pytest.approx(np.mean((1 + lam / 2) * (1 - lam)), rel=1e-12)
    many = unit_eprocess(np.array([x, [0, 1, 1]]), np.tile(p, (2, 1)), w=w)  # one weight per unit, every key
    assert many.wealth[1] == pytest.approx(np.mean((1 - lam / 6) * (1 + lam)), rel=1e-12)
    for bad in ([1.5, 1, 1], [-0.1, 1, 1]):
        with pytest.raises(ValueError):
            unit_payoffs(x, p, bad)


def test_hypergeometric_null_against_every_green_list_of_a_small_vocabulary():
    """V = 6, a list of 2: for every colouring the windows after one token could show, the
    probability that the next is green given the earlier ones, by counting the lists that agree."""
    V, G = 6, 2
    lists = [set(c) for c in itertools.combinations(range(V), G)]
    nexts = [4, 0, 5, 2]  # distinct next tokens after the same previous token
    for colours in itertools.product([0, 1], repeat=len(nexts)):
        agree = [s for s in lists if all((v in s) == bool(c) for v, c in zip(nexts[:-1], colours[:-1]))]
        if not agree:
            continue
        want = [Fraction(sum((nexts[i] in s) for s in lists if all((nexts[j] in s) == bool(colours[j])
                                                                    for j in range(i))),
                         sum(all((nexts[j] in s) == bool(colours[j]) for j in range(i)) for s in lists))
                for i in range(len(nexts)) if any(all((nexts[j] in s) == bool(colours[j]) for j in range(i))
                                                  for s in lists)]
        got = hypergeometric_null([7] * len(want), colours[:len(want)], G, V)
        np.testing.assert_allclose(got, [float(w) for w in want])
    counts = {}
    hypergeometric_null([1, 2, 1], [1, 0, 0], G, V, counts)  # another token's windows do not interfere
    assert counts == {1: [2, 1], 2: [1, 0]}
    assert hypergeometric_null([1], [0], G, V, counts)[0] == pytest.approx((2 - 1) / (6 - 2))


def test_key_rank_counts_ties_against_the_public_key():
    assert key_rank(2.0, np.array([1.0, 2.0, 3.0, 0.5]))["p_value"] == pytest.approx(3 / 5)
    assert key_rank(9.0, np.zeros(999))["p_value"] == pytest.approx(1 / 1000)


def test_fixed_n_pvalue_is_the_exact_tail():
    x, p = [1, 0, 1, 1], [0.2, 0.5, 0.3, 0.9]
    want = sum(math.prod(q if b else 1 - q for q, b in zip(p, bits))
               for bits in itertools.product([0, 1], repeat=4) if sum(bits) >= 3)
    assert fixed_n_pvalue(x, p) == pytest.approx(want, rel=1e-12)
    assert fixed_n_pvalue([1, 1, 0, 1, 0], [0.25] * 5) == pytest.approx(binom.sf(2, 5, 0.25), rel=1e-12)


def test_keyed_green_list_is_one_function_of_key_and_window():
    green = KeyedGreenList(bytes(range(32)), vocab_size=5000)
    assert green.gamma == 0.25  # round(0.25 · 2^32) / 2^32
    prev, nxt = np.array([3, 3, 17, 4999]), np.array([0, 4999, 3, 3])
    np.testing.assert_array_equal(green.is_green(prev, nxt), [green.mask(a)[b] for a, b in zip(prev, nxt)])
    np.testing.assert_array_equal(green_many([green.key, bytes(32)], prev, nxt)[0], green.is_green(prev, nxt))
    # a whole list holds about γV entries: |z| < 3.3 (false failure 0.001)
    n = int(green.mask(3).sum())
    assert abs(n - 1250) / math.sqrt(5000 * 0.25 * 0.75) < 3.3
    with pytest.raises(ValueError):
        KeyedGreenList(b"short", 100)


def test_a_clean_text_is_green_at_gamma_over_fresh_keys_and_rejected_at_most_alpha():
    """One fixed text scored under 1000 fresh keys: the green share of its distinct windows is γ
    (binomial), and the e-process says "trained on" in at most α of them (one-sided binomial);
    the same text written under a key (every window green) is rejected under that key."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 3000, size=400)
    pairs = sorted(set(zip(ids[:-1].tolist(), ids[1:].tolist())))
    prev, nxt = np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])
    keys = [secrets.token_bytes(32) for _ in range(1000)]
    x = green_many(keys, prev, nxt).astype(float)
    assert binomtest(int(x.sum()), x.size, 0.25).pvalue > 0.001
    proc = unit_eprocess(x, np.full(x.shape, 0.25))
    assert binomtest(int(proc.rejected.sum()), len(keys), 0.05, alternative="greater").pvalue > 0.001
    watermarked = unit_eprocess(np.ones(len(pairs)), np.full(len(pairs), 0.25))
    assert watermarked.rejected and watermarked.stop_time < 20


def test_cuda_randperm_lists_are_permutations_of_a_fixed_size():
    """transformers' lists as a CUDA device draws them (V = 49152, SmolLM2's vocabulary: 34-bit
    sort keys): a permutation whose first quarter is green, also where equal sort keys were
    shuffled (previous tokens 0..40 include such islands)."""
    green = CudaRandpermGreenList(hashing_key=15485863, vocab_size=49152)
    assert green.bits == 34 and green.size == 12288
    islands = 0
    for a in range(40):
        perm = green.permutation(a)
        assert np.array_equal(np.sort(perm), np.arange(49152))
        islands += green.last_islands
    assert islands > 0
    assert green.mask(7).sum() == 12288 and green.is_green([7, 7], green.permutation(7)[[0, 12287]]).all()
    assert not green.is_green([7], green.permutation(7)[[12288]]).any()
    with pytest.raises(ValueError, match="32-bit"):
        CudaRandpermGreenList(1, 1000)
