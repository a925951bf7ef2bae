"""The black-box benchmarks' helpers (studies.black_signal, exposures,
reference_bank; benchmarks/bench_black.py, bench_exposures.py, bench_references.py) on
hand-computed numbers."""

import math

import numpy as np
import pandas as pd
import pytest

from trainspotter.backends.base import TokenScores
from studies.black_signal import boundary_counts, boundary_rows, extrapolated_pairs, groups
from studies.exposures import exposure_result, exposure_testbed
from studies.reference_bank import di_table


def test_extrapolated_pairs_fit_the_last_half_of_the_mean_log_wealth():
    t = np.arange(1, 11)
    logw = np.where(t <= 5, 0.0, 0.1 * t - 0.2)  # flat while the scorer learns, then 0.1 a pair
    slope, intercept, need = extrapolated_pairs(logw, (0.05, 0.01))
    assert slope == pytest.approx(0.1) and intercept == pytest.approx(-0.2)
    assert need == {"0.05": pytest.approx((math.log(20) + 0.2) / 0.1), "0.01": pytest.approx((math.log(100) + 0.2) / 0.1)}
    assert extrapolated_pairs(-0.01 * t, (0.05,))[2] == {"0.05": math.inf}  # no growth: never


def test_groups_sort_the_black_columns():
    g = groups({"gray_ppl"})
    member = lambda c: sorted(name for name, keep in g.items() if keep(c))  # noqa: E731
    assert member("black_match_rate") == ["all black", "label-only greedy match"]
    assert member("black_min_k_20") == ["all black", "estimated probabilities, sigmoid (token-level)"]
    assert member("raw_min_k_20") == ["estimated probabilities, raw (token-level)"]
    assert member("black_ref_diff") == ["all black", "reference-relative (label-only and estimated)"]
    assert member("black_pert_synonym") == ["all black", "perturbations (estimated, 6 kinds)"]
    assert member("gray_ppl") == ["all gray", "gray lean (the default gray audit's set)"]


def _scores(ids, lp, argmax, top=None):
    n = len(ids)
    return TokenScores(token_ids=np.array(ids), logprobs=np.array(lp, float), argmax=np.array(argmax),
                       mu=np.zeros(n), sigma2=np.ones(n), top_logprobs=None if top is None else np.array(top, float))


def test_boundary_counts_bin_positions_by_the_reference_margin():
    # reference: position 0 greedy-correct (margin −0.1 − (−2.0) = 1.9), position 1 not (−3.0 − (−0.5) = −2.5)
    ref = _scores([5, 6], [-0.1, -3.0], [5, 9], [[-0.1, -2.0], [-0.5, -3.0]])
    target = _scores([5, 6], [-0.05, -1.0], [5, 6], None)  # matches both; gains 0.05 and 2.0
    counts = boundary_counts([target], [ref])
    assert counts.shape == (1, 3, 8)
    # bins of EDGES: [−4, −2) is bin 1, [1, ∞) is bin 7
    assert counts[0, :, 1].tolist() == [1, 1, pytest.approx(2.0)] and counts[0, :, 7].tolist() == [1, 1, pytest.approx(0.05)]
    assert counts[0, 0].sum() == 2


def test_boundary_rows_pool_positions_and_subtract_the_non_members():
    edges = np.array([-np.inf, 0.0, np.inf])
    # (passages, [positions, matches, gain], bins): members match 3 of 4 in bin 0, non-members 1 of 4
    M = np.array([[[2, 2], [2, 1], [1.0, 0.4]], [[2, 2], [1, 1], [0.2, 0.2]]])
    N = np.array([[[4, 4], [1, 2], [0.0, 0.8]]])
    rows = boundary_rows(M, N, n_boot=20, seed=0, edges=edges)
    assert rows[0]["margin"] == [-math.inf, 0.0] and rows[0]["share_of_positions"] == pytest.approx(8 / 16)
    assert rows[0]["match_rate_nonmember"] == pytest.approx(1 / 4)
    assert rows[0]["match_diff"] == pytest.approx(3 / 4 - 1 / 4) and rows[0]["gain_diff"] == pytest.approx(1.2 / 4 - 0)
    assert rows[1]["match_diff"] == pytest.approx(2 / 4 - 2 / 4) and rows[1]["gain_diff"] == pytest.approx(0.6 / 4 - 0.8 / 4)
    assert rows[0]["match_diff_ci"][0] <= rows[0]["match_diff"] <= rows[0]["match_diff_ci"][1]


def test_exposure_result_reads_the_held_out_rows():
    assert exposure_testbed(1) == "tiny-pretrain-2k" and exposure_testbed(4) == "tiny-pretrain-2k-x4"
    table = pd.DataFrame({"split": ["member", "heldout", "heldout"], "gray_ppl": [1.0, math.e, math.e ** 3],
                          "black_match_rate": [0.9, 0.2, 0.4]})
    manifest = {"member_fraction": 0.13, "target_final_loss": 3.0, "reference_final_loss": 3.2, "build_seconds": 9}
    r = exposure_result(2, manifest, table, [], {"simulation": 1.0})
    assert r["testbed"] == "tiny-pretrain-2k-x2" and r["heldout_loglik"] == pytest.approx(-2.0)
    assert r["heldout_match_rate"] == pytest.approx(0.3) and r["member_fraction"] == 0.13


def test_di_table_keeps_the_suspect_split_and_the_held_out_rows_in_order():
    features = pd.DataFrame({"f": [1.0, 2.0, 3.0, 4.0]})
    split = np.array(["member", "heldout", "nonmember", "member"])
    out = di_table(features, split, "member")
    assert out["set"].tolist() == ["suspect", "heldout", "suspect"] and out["f"].tolist() == [1.0, 2.0, 4.0]
