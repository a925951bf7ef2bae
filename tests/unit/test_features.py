import math
import zlib

import numpy as np
import pytest

from trainspotter.features import features as F
from trainspotter.backends.base import TokenScores

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


def _scores(lp):
    n = len(lp)
    return TokenScores(np.arange(n), np.array(lp), np.arange(n), np.zeros(n), np.ones(n))


def test_gray_features_row_names_and_values():
    row = F.gray_features("some text", _scores(LP), _scores([-1.52] * 5))
    assert set(row) == set(F.BASIC_GRAY) <= set(F.CATALOG)
    assert row["gray_ref_ratio"] == pytest.approx(1.0)
    assert row["gray_ref_diff"] == pytest.approx(0.0)
    assert row["gray_min_k_20"] == pytest.approx(-4.0)
    assert "gray_ref_ratio" not in F.gray_features("some text", _scores(LP))
