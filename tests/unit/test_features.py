import math
import zlib

import numpy as np
import pytest

from trainspotter.features import features as F
from trainspotter.features.catalog import catalog

LP = [-0.5, -2.0, -0.1, -4.0, -1.0]  # mean = -1.52


def test_log_perplexity_and_perplexity_by_hand():
    assert F.log_perplexity(LP) == pytest.approx(1.52)
    assert F.perplexity(LP) == pytest.approx(math.exp(1.52))


def test_min_k_takes_ceil_of_k_n_smallest():
    # k = 0.2, n = 5 -> ceil(1.0) = 1 token: the smallest, -4.0
    assert F.min_k(LP, 0.2) == pytest.approx(-4.0)
    # k = 0.5 -> ceil(2.5) = 3 smallest: -4.0, -2.0, -1.0
    assert F.min_k(LP, 0.5) == pytest.approx(-7.0 / 3)
    # tiny k still keeps one token
    assert F.min_k(LP, 0.01) == pytest.approx(-4.0)


def test_zlib_ratio_is_mean_logprob_over_compressed_bytes():
    text = "abc abc abc abc"
    size = len(zlib.compress(text.encode("utf-8")))
    assert F.zlib_ratio(LP, text) == pytest.approx(-1.52 / size)
    # more repetitive text compresses better -> larger |ratio| for the same log-probs
    assert abs(F.zlib_ratio(LP, "a" * 200)) > abs(F.zlib_ratio(LP, "the quick brown fox jumps over"))


def test_reference_ratio_and_diff_by_hand():
    target, ref = [-1.0, -3.0], [-2.0, -2.0]  # log PPL 2.0 and 2.0
    assert F.reference_ratio(target, ref) == pytest.approx(1.0)
    assert F.reference_diff([-1.0, -1.0], ref) == pytest.approx(-1.0)
    assert F.reference_ratio([-1.0, -1.0], ref) == pytest.approx(0.5)


def test_empty_logprobs_raise():
    with pytest.raises(ValueError, match="no scored tokens"):
        F.perplexity([])


def test_gray_row_through_token_level_row_by_hand():
    """The gray row ``extract`` builds: the five basic columns plus Min-K%++ from μ, σ²."""
    cfg = F.FeatureConfig(min_k=(0.2,), strip_k=(), perturbations=False, sequence=False)
    lp = np.array(LP)
    row = F.token_level_row("gray", "some text", lp, cfg, mu=np.full(5, -1.0), sigma2=np.full(5, 4.0),
                            reference_logprobs=np.full(5, -1.52))
    # z = (lp + 1) / 2 = (0.25, -0.5, 0.45, -1.5, 0): the 20% smallest is -1.5
    assert row == pytest.approx({
        "gray_ppl": math.exp(1.52), "gray_zlib_ratio": -1.52 / len(zlib.compress(b"some text")),
        "gray_min_k_20": -4.0, "gray_min_kpp_20": -1.5, "gray_ref_ratio": 1.0, "gray_ref_diff": 0.0})
    assert set(row) <= {s.name for s in catalog(F.FeatureConfig())}
    assert "gray_ref_ratio" not in F.token_level_row("gray", "some text", lp, cfg)
    # a reference with log PPL 0 (every token certain) has no ratio, only a difference
    zero = F.token_level_row("gray", "x", lp, cfg, reference_logprobs=np.zeros(3))
    assert math.isnan(zero["gray_ref_ratio"]) and zero["gray_ref_diff"] == pytest.approx(1.52)
