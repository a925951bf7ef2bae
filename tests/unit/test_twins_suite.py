"""The twins suite's library (trainspotter.evaluation.twins_suite, `benchmark --suite twins`): the
paired per-sample AUROC on hand-computed numbers, the H0 draw of the public version (uniform
among k > 2) and of the private versions bet against, the pair rows the e-process reads, and a
whole run on synthetic features."""

import numpy as np
import pytest
from scipy.stats import chisquare

from trainspotter.evaluation.twins_suite import (LEAN, h0_draws, pair_rows, paired_auroc, paired_differences,
                                                 private_variants, run_suite, sub_pair_indices)


def _variants(rows):
    """(N, k, 1) own values from per-passage lists."""
    return np.asarray(rows, dtype=float)[..., None]


def test_paired_auroc_by_hand_on_three_and_three_passages():
    # k = 3: d = the public version's value − the mean of its two private versions'
    V1 = _variants([[3, 0, 0], [1, 0, 0], [0, 1, 1]])  # publics 0, 0, 0: d = 3, 1, −1
    V0 = _variants([[5, 5, 5], [2, 0, 4], [0, -2, -2]])  # publics 0, 1, 2: d = 0, −3, −1
    p1, p0 = np.array([0, 0, 0]), np.array([0, 1, 2])
    assert paired_differences(V1, p1)[:, 0].tolist() == [3, 1, -1]
    assert paired_differences(V0, p0)[:, 0].tolist() == [0, -3, -1]
    # members above non-members: 3 > all (3), 1 > all (3), −1 > −3 (1), −1 = −1 (a tie counts ½)
    auc = (3 + 3 + 1 + 0.5) / 9
    # gray_min_k_20 is member-like when higher (+1), gray_ppl when lower (−1): negated values, same AUROC
    up = paired_auroc(V1, V0, p1, p0, ["gray_min_k_20"])["gray_min_k_20"]
    down = paired_auroc(-V1, -V0, p1, p0, ["gray_ppl"])["gray_ppl"]
    assert up["paired"] == pytest.approx(auc) and down["paired"] == pytest.approx(auc)
    # TPR at 1% FPR with 3 non-members: only a threshold above every non-member (d > 0): 2 of 3 members
    assert up["tpr_at_1pct_fpr"] == pytest.approx(2 / 3) and down["tpr_at_1pct_fpr"] == pytest.approx(2 / 3)
    # unpaired: the public versions' own values, members 3, 1, 0 against non-members 5, 0, −2:
    # 3 > 0, −2 (2); 1 > 0, −2 (2); 0 = 0 (½), 0 > −2 (1)
    assert up["unpaired"] == pytest.approx(5.5 / 9) and down["unpaired"] == pytest.approx(5.5 / 9)


def test_h0_public_draw_is_uniform_among_k_and_privates_are_the_others():
    rng, k, T, n = np.random.default_rng(3), 4, 4000, 5
    pub = h0_draws(rng, T, n, k)
    # uniform over the k variants (χ² at a 1e-4 false-failure rate), independently per passage
    assert chisquare(np.bincount(pub.ravel(), minlength=k)).pvalue > 1e-4
    order = np.stack([rng.permutation(n) for _ in range(T)])
    priv = private_variants(pub, order, k, rng)
    shown = np.take_along_axis(pub, order, axis=1)
    assert priv["mean"].shape == (T, n, k - 1) and priv["one"].shape == (T, n, 1)
    assert not (priv["mean"] == shown[..., None]).any()  # never the public version
    assert (np.sort(priv["mean"], axis=2) == priv["mean"]).all() and (np.diff(priv["mean"], axis=2) > 0).all()
    assert (priv["one"] == priv["mean"]).any(axis=2).all() and not (priv["one"][..., 0] == shown).any()
    # the one private version: uniform among the k − 1 others
    slot = (priv["mean"] == priv["one"]).argmax(axis=2)
    assert chisquare(np.bincount(slot.ravel(), minlength=k - 1)).pvalue > 1e-4


def test_sub_pair_indices_read_the_public_against_each_private_version():
    rng, k = np.random.default_rng(0), 3
    V = rng.normal(size=(4, k, 2))
    R = pair_rows(V)
    pub = np.array([[2, 0, 1, 1]])
    order = np.array([[3, 1, 0, 2]])
    priv = private_variants(pub, order, k, rng)["mean"]
    ix, iy = sub_pair_indices(pub, order, priv, k)
    for t, passage in enumerate(order[0]):
        assert np.array_equal(R[ix[0, t]], np.repeat(V[passage, pub[0, passage]][None], k - 1, axis=0))
        others = [j for j in range(k) if j != pub[0, passage]]
        assert np.array_equal(R[iy[0, t]], V[passage, others])


def _synthetic(k, n=60, shift=1.0, seed=0):
    """Own values of LEAN for members whose public version is member-like by ``shift`` standard
    deviations (in each column's direction), non-members and held-out without any shift."""
    from trainspotter.features.orientation import directions

    rng = np.random.default_rng(seed)
    sign = np.asarray(directions(LEAN), dtype=float)
    V1, V0 = rng.normal(size=(n, k, len(LEAN))) + 10, rng.normal(size=(n, k, len(LEAN))) + 10
    p1, p0 = rng.integers(0, k, n), rng.integers(0, k, n)
    V1[np.arange(n), p1] += shift * sign
    H = rng.normal(size=(n, len(LEAN))) + 10
    return V1, V0, H, p1, p0


def test_a_run_separates_synthetic_members_and_k2_modes_coincide():
    V1, V0, H, p1, p0 = _synthetic(2, shift=5.0)
    res = run_suite(V1, V0, H, p1, p0, LEAN, trials=20, alpha=0.05, seed=1)
    assert all(a["paired"] > 0.9 for a in res["auroc"].values())  # 5σ: AUROC Φ(5/2) ≈ 0.99 expected
    for name in ("lean", "calibrated"):
        one, mean = res["twins"][f"members, one: {name}"], res["twins"][f"members, mean: {name}"]
        assert one == mean  # k = 2: the one private version is every private version
        assert mean["rate"] == 1.0 and 0 <= res["twins"][f"nonmembers, mean: {name}"]["p_above_alpha"] <= 1
    assert set(res["stamp"]) == {"log perplexity", "gray_ref_diff"} and res["stamp"]["gray_ref_diff"]["all"]["p"] < 1e-6
    assert {"twins all, lean", "twins one, calibrated", "unpaired (online), lean"} <= set(res["curves"])
    assert all(len(c) == 60 and c == sorted(c) for c in res["curves"].values())  # fractions decided by t


def test_k4_all_and_one_differ_and_k1_is_refused():
    V1, V0, H, p1, p0 = _synthetic(4, shift=1.0)
    res = run_suite(V1, V0, H, p1, p0, LEAN, trials=20, alpha=0.05, seed=1)
    assert res["k"] == 4
    assert res["twins"]["members, one: lean"] != res["twins"]["members, mean: lean"]
    with pytest.raises(ValueError, match="k ≥ 2"):
        run_suite(V1[:, :1], V0[:, :1], H, np.zeros(60, int), np.zeros(60, int), LEAN, trials=2)


def test_stamp_difference_on_a_twin_dependent_column_by_hand():
    """k = 3, public version 0: on a column f(x_a | x_b) that depends on the twin, a passage's
    difference is the mean over its private j of f(0 | j) − f(j | 0); on a column that does not,
    the pair table gives what its own values give (public minus the privates' mean)."""
    from scipy.stats import ttest_1samp

    from trainspotter.evaluation.twins_suite import stamp_ttests

    f = np.array([[np.nan, 5.0, 1.0], [2.0, np.nan, 9.0], [4.0, 7.0, np.nan]])  # f[a, b], passage 0
    spread = np.array([0.0, 1.0, 2.5, 4.0])  # added to f(0 | 1) of passages 0..3
    dep = np.stack([f] * 4)
    dep[:, 0, 1] += spread
    d_dep = ((5.0 + spread - 2.0) + (1.0 - 4.0)) / 2  # by hand: spread / 2
    own = np.array([[3.0, 1.0, 8.0], [2.0, 2.0, 0.0], [6.0, 1.0, 1.0], [0.5, 4.0, 3.0]])  # (passage, version)
    d_own = own[:, 0] - own[:, 1:].mean(axis=1)
    pairs = np.stack([dep, np.where(np.eye(3, dtype=bool), np.nan, own[:, :, None])], axis=-1)  # (4, 3, 3, 2)
    pub, order = np.zeros((1, 4), dtype=int), np.arange(4)[None]
    tests = {"dep": ("dep", 1), "own": ("own", 1)}
    got = stamp_ttests({"member": pairs, "nonmember": pairs}, pub, order, pub, order, ["dep", "own"], tests, ns=(4,))
    for name, d in (("dep", d_dep), ("own", d_own)):
        assert got[name]["all"]["p"] == pytest.approx(ttest_1samp(d, 0.0, alternative="greater").pvalue)
    V = {s: own[:, :, None] for s in ("member", "nonmember")}
    assert stamp_ttests(V, pub, order, pub, order, ["own"], {"own": ("own", 1)}, ns=(4,))["own"] == got["own"]
