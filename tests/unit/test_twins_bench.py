"""The twins benchmark's helpers (studies.twins_k2, twins_kmean, memo;
benchmarks/bench_twins.py): the censored paired saving on hand-computed numbers, the k = 2 draws
(each H0 trial swaps whole passages, never splits one), STAMP's k = 2 t-test against its
definition, and a backend asked once per distinct text."""

import math

import numpy as np
import pytest
from scipy.stats import ttest_1samp

from harness.memo import MemoBackend
from studies.twins_k2 import k2_draws, stamp_k2
from studies.twins_kmean import paired


def test_paired_saving_censors_at_n_by_hand():
    # (a) stops at 3, never (→ 6), 5; (b) at 2, 4, never (→ 6): differences 1, 2, −1
    out = paired(np.array([3, 0, 5]), np.array([2, 4, 0]), n=6)
    sd = math.sqrt(((1 - 2 / 3) ** 2 + (2 - 2 / 3) ** 2 + (-1 - 2 / 3) ** 2) / 2)
    half = 1.96 * sd / math.sqrt(3)
    assert out["mean_saving"] == pytest.approx(2 / 3)
    assert out["ci95"] == pytest.approx([2 / 3 - half, 2 / 3 + half])
    assert out["mean_sooner"] == pytest.approx(2 / 3) and out["one_sooner"] == pytest.approx(1 / 3)


def test_k2_draws_swap_whole_passages_about_half_the_time():
    n0, T = 40, 200
    d = k2_draws(np.random.default_rng(0), 7, n0, T)
    assert d["order1"].shape == (T, 7) and (np.sort(d["order1"], axis=1) == np.arange(7)).all()
    # per round: the suspect side is one version of passage order0[b, t], the held-out side the other
    assert (d["ix0"] % n0 == d["order0"]).all() and (d["iy0"] % n0 == d["order0"]).all()
    assert (d["ix0"] + d["iy0"] == 2 * d["order0"] + n0).all()
    swapped = (d["ix0"] >= n0).mean()  # 8000 fair coins: within 4 SD of 1/2
    assert abs(swapped - 0.5) < 4 * math.sqrt(0.25 / (n0 * T))


def test_stamp_k2_against_the_t_test_on_hand_made_differences():
    rng = np.random.default_rng(1)
    n1, n0 = 30, 26
    # columns: gray_ppl (the t-test reads −log ppl, higher = fits better) and gray_ref_diff (sign −1)
    F = {("member", "public"): np.exp(rng.normal(-1.0, 0.3, (n1, 2))),
         ("member", "private"): np.exp(rng.normal(-0.8, 0.3, (n1, 2))),
         ("nonmember", "public"): np.exp(rng.normal(0, 0.3, (n0, 2))),
         ("nonmember", "private"): np.exp(rng.normal(0, 0.3, (n0, 2))), "heldout": np.ones((3, 2))}
    d = k2_draws(rng, n1, n0, 5)
    tests = {"ll": ("gray_ppl", -1), "rd": ("gray_ref_diff", -1)}
    out = stamp_k2(F, ["gray_ppl", "gray_ref_diff"], d["order1"], d["ix0"], n0, tests)
    ll = np.log(F["member", "private"][:, 0]) - np.log(F["member", "public"][:, 0])
    rd = F["member", "private"][:, 1] - F["member", "public"][:, 1]
    for name, d1 in (("ll", ll), ("rd", rd)):
        assert out[name]["all"] == {"n": n1, "p": pytest.approx(ttest_1samp(d1, 0, alternative="greater").pvalue)}
        first = [ttest_1samp(d1[o[:25]], 0, alternative="greater").pvalue <= 0.05 for o in d["order1"]]
        assert out[name]["25"]["power"] == pytest.approx(np.mean(first))
        assert set(out[name]) == {"all", "25"}  # n = 50 > the 26 non-members: not run
    # H0: each trial's first 25 rounds, the drawn public version of each passage minus its twin
    both = np.concatenate([F["nonmember", "public"][:, 1], F["nonmember", "private"][:, 1]])
    rates = [ttest_1samp([-(both[i] - both[(i + n0) % (2 * n0)]) for i in row[:25]], 0,
                         alternative="greater").pvalue <= 0.05 for row in d["ix0"]]
    assert out["rd"]["25"]["h0"] == pytest.approx(np.mean(rates))


class Counting:
    fingerprint = "counting"

    def __init__(self):
        self.calls = []

    def score(self, texts, distribution=False):
        self.calls.append((list(texts), distribution))
        return [(t, distribution, len(t)) for t in texts]


def test_memo_backend_asks_once_per_text_and_kind_of_answer():
    inner = Counting()
    memo = MemoBackend(inner, chunk=2)
    assert memo.score(["a", "bb", "a", "ccc", "dd", "e"]) == [("a", False, 1), ("bb", False, 2), ("a", False, 1),
                                                              ("ccc", False, 3), ("dd", False, 2), ("e", False, 1)]
    assert inner.calls == [(["a", "bb"], False), (["ccc", "dd"], False), (["e"], False)]  # chunks of 2, "a" once
    assert memo.score(["bb", "a"], distribution=True) == [("bb", True, 2), ("a", True, 1)]
    memo.score(["e", "bb"])
    memo.score(["bb"], distribution=True)
    assert len(inner.calls) == 4 and memo.fingerprint == "counting"  # nothing asked again; the rest is the inner's
    whole = MemoBackend(Counting())
    whole.score(["x", "y", "z"])
    assert whole.inner.calls == [(["x", "y", "z"], False)]  # chunk None: one call
