"""Every token-level feature, estimator and the EZ score against values computed by hand."""

import math
import zlib

import numpy as np
import pytest
from scipy.stats import trim_mean

from trainspotter.features import features as F
from trainspotter.features.catalog import catalog
from trainspotter.features import probability as P
from trainspotter.features.ez import error_zone

LP = [-0.5, -2.0, -0.1, -4.0, -1.0]  # sorted: -4, -2, -1, -0.5, -0.1; mean -1.52


def test_min_k_plus_plus_z_scores_then_takes_the_k_smallest():
    mu = [-1.0] * 5
    sigma2 = [1.0, 4.0, 0.25, 4.0, 0.0]  # σ = 1, 2, 0.5, 2, 0 (point mass -> z = 0)
    # z = (0.5, -0.5, 1.8, -1.5, 0): sorted -1.5, -0.5, 0, 0.5, 1.8
    assert F.min_k_plus_plus(LP, mu, sigma2, 0.2) == pytest.approx(-1.5)
    assert F.min_k_plus_plus(LP, mu, sigma2, 0.4) == pytest.approx(-1.0)
    assert F.min_k_plus_plus(LP, mu, sigma2, 1.0) == pytest.approx(0.3 / 5)


def test_min_k_plus_plus_is_min_k_when_mu_0_sigma_1():
    assert F.min_k_plus_plus(LP, [0.0] * 5, [1.0] * 5, 0.4) == pytest.approx(F.min_k(LP, 0.4))


def test_strip_k_cuts_floor_k_n_at_each_tail():
    assert F.strip_k(LP, 0.2) == pytest.approx((-2.0 - 1.0 - 0.5) / 3)  # drops -4 and -0.1
    assert F.strip_k(LP, 0.1) == pytest.approx(-1.52)  # floor(0.5) = 0: nothing dropped
    assert F.strip_k(LP, 0.4) == pytest.approx(-1.0)  # floor(2) each side: the median
    x = np.random.default_rng(0).normal(size=37)
    for k in (0.1, 0.2, 0.3):
        assert F.strip_k(x, k) == pytest.approx(trim_mean(x, k))
    with pytest.raises(ValueError):
        F.strip_k(LP, 0.5)


def test_strip_k_ignores_outliers_unlike_the_mean():
    base = [-1.0] * 18
    assert F.strip_k(base + [-50.0, 0.0], 0.1) == pytest.approx(-1.0)


def test_zlib_ratio_of_estimates_by_hand():
    text = "the quick brown fox jumps over the lazy dog"
    size = len(zlib.compress(text.encode()))
    est = P.sigmoid_logprob(np.array([1.0, 0.0]))
    assert F.zlib_ratio(est, text) == pytest.approx(((-math.log1p(math.exp(-2))) + math.log(0.5)) / 2 / size)


def test_perturbation_ratio_and_diff_by_hand():
    assert F.perturbation_ratio(LP, [-2.0, -2.0]) == pytest.approx(2.0 / 1.52)
    assert F.perturbation_diff(LP, [-2.0, -2.0]) == pytest.approx(0.48)
    assert math.isnan(F.perturbation_ratio([0.0, 0.0], [-1.0]))


def test_token_level_row_by_hand():
    cfg = F.FeatureConfig(min_k=(0.2,), strip_k=(0.2,), perturbation_kinds=("case",))
    row = F.token_level_row("black", "abc", np.array(LP), cfg, reference_logprobs=np.array([-1.52] * 5),
                            perturbed_logprobs={"case": np.array([-2.0, -2.0])}, ez=3.0)
    assert row == pytest.approx({
        "black_ppl": math.exp(1.52), "black_zlib_ratio": -1.52 / len(zlib.compress(b"abc")),
        "black_min_k_20": -4.0, "black_strip_k_20": -3.5 / 3, "black_ref_ratio": 1.0,
        "black_ref_diff": 0.0, "black_pert_ratio_case": 2 / 1.52, "black_pert_diff_case": 0.48,
        "black_ez": 3.0})


# ------------------------------------------------------------------ EZ (EZ-MIA Sec. 3.4, App. E)

TARGET = [-1.0, -2.0, -3.0, -0.5]
REF = [-2.0, -1.0, -3.5, -0.1]  # δ = 1, -1, 0.5, -0.4
IDS = [5, 6, 7, 8]


def test_ez_counts_only_error_positions():
    argmax = [0, 0, 0, 8]  # errors at 0, 1, 2; position 3 (δ = -0.4) is right and ignored
    assert error_zone(TARGET, REF, argmax, IDS) == pytest.approx(1.5 / 1.0)


def test_ez_is_scale_invariant():
    argmax = [0, 0, 0, 8]
    scaled_t = [3 * t for t in TARGET]
    scaled_r = [3 * r for r in REF]
    assert error_zone(scaled_t, scaled_r, argmax, IDS) == pytest.approx(1.5)


def test_ez_zero_errors_counts_as_member():  # App. E.5
    assert error_zone(TARGET, REF, IDS, IDS) == math.inf
    assert error_zone(TARGET, REF, IDS, IDS, cap=1000.0) == 1000.0


def test_ez_n_zero_is_infinite_or_cap():  # App. E.6
    argmax = [0, 6, 0, 8]  # errors at 0 and 2: δ = 1, 0.5 -> N = 0, P = 1.5
    assert error_zone(TARGET, REF, argmax, IDS) == math.inf
    assert error_zone(TARGET, REF, argmax, IDS, cap=1000.0) == 1000.0


def test_ez_no_movement_is_neutral_and_mismatch_raises():
    assert error_zone(TARGET, TARGET, [0, 0, 0, 0], IDS) == 1.0  # self-reference
    with pytest.raises(ValueError, match="same tokenizer"):
        error_zone(TARGET, REF[:3], [0, 0, 0, 0], IDS)


# ------------------------------------------------------------------ estimators (BADI Eq. 1, 3–5)

def test_sigmoid_raw_and_petal_estimates_by_hand():
    sim = np.array([0.0, 1.0, -1.0])
    assert P.sigmoid_logprob(sim) == pytest.approx(np.log(1 / (1 + np.exp(-2 * sim))))
    assert P.sigmoid_logprob(np.array([0.0]))[0] == pytest.approx(math.log(0.5))
    assert P.raw_logprob(np.array([0.3, 1.0])) == pytest.approx([-0.7, 0.0])
    a, b = P.petal_fit(np.array([0.0, 1.0, 0.5]), np.array([-3.0, -1.0, -2.0]))
    assert (a, b) == pytest.approx((2.0, -3.0))
    assert P.petal_logprob(np.array([0.25, 2.0]), a, b) == pytest.approx([-2.5, 0.0])  # capped at 0
    assert P.petal_fit(np.array([0.5, 0.5]), np.array([-1.0, -3.0])) == pytest.approx((0.0, -2.0))
    with pytest.raises(ValueError):
        P.petal_fit(np.array([0.5]), np.array([np.nan]))


class FakeEncoder:
    """2-d 'embeddings' we can compute cosines of by hand; counts what it embeds."""

    VEC = {"a": [1.0, 0.0], "b": [0.0, 2.0], "c": [1.0, 1.0], "d": [-3.0, 0.0]}

    def __init__(self):
        self.seen = []

    def encode(self, strings, **kw):
        self.seen += list(strings)
        return np.array([self.VEC[s] for s in strings])


def test_token_embeddings_cosines_and_each_string_embedded_once(tmp_path):
    enc = FakeEncoder()
    emb = P.TokenEmbeddings(enc, path=tmp_path / "tok.npz")
    sim = emb.similarity(["a", "a", "c", "a", "b"], ["b", "c", "c", "d", "b"])
    assert sim == pytest.approx([0.0, 1 / math.sqrt(2), 1.0, -1.0, 1.0])
    emb.similarity(["a", "b", "c"], ["d", "a", "a"])
    assert sorted(enc.seen) == ["a", "b", "c", "d"]  # never per occurrence, never twice
    emb.save()
    again = P.TokenEmbeddings(FakeEncoder(), path=tmp_path / "tok.npz")
    assert again.similarity(["c"], ["a"]) == pytest.approx([1 / math.sqrt(2)]) and again.encoded == 0


def test_catalog_has_the_papers_black_box_set_and_stable_gray_names():
    specs = {s.name: s for s in catalog(F.FeatureConfig())}  # the default (full) configuration
    black = [s for s in specs.values() if s.access == "black"]
    assert len(black) >= 31  # BADI Sec. 5 / App. A.5: 31 black-box features
    assert {"gray_ppl", "gray_zlib_ratio", "gray_min_k_20", "gray_ref_ratio", "gray_ref_diff"} <= set(specs)
    for s in specs.values():
        assert s.definition and s.source and set(s.models) <= {"target", "reference", "references"}
        assert s.name.startswith(s.access + "_")
    assert specs["black_min_k_60"].access == "black"  # K = 0.6, BADI App. A.2
    assert specs["gray_ez"].models == ("target", "reference")


def test_suffix_length_scales_down_for_short_passages():
    cfg = F.FeatureConfig()
    assert F.suffix_length(512, cfg) == 64  # BADI: 448 + 64
    assert F.suffix_length(64, cfg) == 16  # the testbeds' passages
    assert F.suffix_length(3, cfg) == 1
    assert F.suffix_length(1, cfg) == 0


def test_feature_config_rejects_bad_values():
    with pytest.raises(ValueError):
        F.FeatureConfig(strip_k=(0.5,))
    with pytest.raises(ValueError):
        F.FeatureConfig(perturbation_kinds=("paraphrase",))
    with pytest.raises(ValueError):
        F.FeatureConfig(estimator="magic")


def test_token_tables_saved_by_two_runs_merge_and_are_shared_in_process(tmp_path):
    path = tmp_path / "cache" / "tok.npz"
    first, second = P.TokenEmbeddings(FakeEncoder(), path), P.TokenEmbeddings(FakeEncoder(), path)
    first.ensure(["a", "b"])
    second.ensure(["c"])
    first.save()
    second.save()  # must keep the strings `first` saved meanwhile
    third = P.TokenEmbeddings(FakeEncoder(), path)
    assert sorted(third.index) == ["a", "b", "c"] and third.encoded == 0
    assert third.similarity(["c"], ["b"]) == pytest.approx([1 / math.sqrt(2)])
    mtime = path.stat().st_mtime_ns
    third.save()  # nothing new: the file is not rewritten
    assert path.stat().st_mtime_ns == mtime and sorted(p.name for p in path.parent.iterdir()) == \
        ["tok.npz", "tok.npz.lock"]  # no temporary file left behind
    assert P.token_table(path) is P.token_table(str(path)) and P.token_table() is P.token_table(None)
    assert P.token_table(path) is not P.token_table()
