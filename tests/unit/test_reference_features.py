"""The features that combine K ≥ 2 reference models (trainspotter.features.references), each
against numbers worked out by hand on small arrays."""

import math

import numpy as np
import pytest

from trainspotter.features.extract import feature_columns
from trainspotter.features.features import FEATURE_SETS, FeatureConfig, catalog, token_level_row
from trainspotter.features.orientation import direction
from trainspotter.features.references import refs_diff, refs_lira, refs_rmia, refs_token_lira

# target ℓ_t = mean(-1, -2, -3) = -2; references ℓ_1 = -7/3, ℓ_2 = -5/2
TARGET = [-1.0, -2.0, -3.0]
REFS = [[-1.5, -2.5, -3.0], [-2.0, -2.0, -3.5]]


def Phi(z):
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def test_refs_diff_is_target_log_ppl_minus_mean_reference_log_ppl():
    # log PPL_t = 2, log PPL_k = 7/3 and 5/2, mean 29/12: 2 - 29/12 = -5/12
    assert refs_diff(TARGET, REFS) == pytest.approx(-5 / 12, abs=1e-12)


def test_refs_lira_is_the_gaussian_tail_of_the_target_among_the_references():
    mu = (-7 / 3 - 5 / 2) / 2  # -29/12
    sd = abs(-7 / 3 + 5 / 2) / math.sqrt(2)  # two values: s = |a - b| / sqrt(2) (ddof = 1)
    assert refs_lira(TARGET, REFS) == pytest.approx(Phi((-2 - mu) / sd), abs=1e-12)
    assert refs_lira(TARGET, REFS) == pytest.approx(Phi((5 / 12) / (1 / 6 / math.sqrt(2))), abs=1e-12)


def test_refs_token_lira_averages_the_per_token_gaussian_tails():
    # per token: μ = (-1.75, -2.25, -3.25), σ = |a - b|/√2 = (0.5, 0.5, 0.5)/√2
    s = 0.5 / math.sqrt(2)
    expected = (Phi(0.75 / s) + Phi(0.25 / s) + Phi(0.25 / s)) / 3
    assert refs_token_lira(TARGET, REFS) == pytest.approx(expected, abs=1e-12)


def test_refs_rmia_is_the_log_ratio_of_target_to_mean_reference_likelihood():
    expected = -2 - math.log((math.exp(-7 / 3) + math.exp(-5 / 2)) / 2)
    assert refs_rmia(TARGET, REFS) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.41325, abs=1e-4)


def test_references_that_agree_give_the_limit_of_the_gaussian_tail():
    same = [[-2.0, -2.0, -2.0], [-2.0, -2.0, -2.0]]  # ℓ_k = -2 = ℓ_t; σ = 0 everywhere
    assert refs_lira(TARGET, same) == 0.5
    # tokens: -1 > -2 (1), -2 = -2 (1/2), -3 < -2 (0)
    assert refs_token_lira(TARGET, same) == pytest.approx(0.5)
    assert refs_lira([-1.0], [[-2.0], [-2.0]]) == 1.0 and refs_lira([-3.0], [[-2.0], [-2.0]]) == 0.0


def test_token_lira_needs_one_tokenisation_and_every_feature_needs_two_references():
    assert math.isnan(refs_token_lira(TARGET, [[-1.0, -2.0], [-1.0, -2.0]]))
    for fn in (refs_diff, refs_lira, refs_token_lira, refs_rmia):
        with pytest.raises(ValueError, match="at least 2 references"):
            fn(TARGET, REFS[:1])


def test_member_like_directions_and_catalogue():
    assert direction("gray_refs_diff") == -1  # lower loss than the references: member
    assert all(direction(f"black_refs_{n}") == +1 for n in ("lira", "token_lira", "rmia"))
    names = {s.name: s for s in catalog(FeatureConfig(), "both")}
    for a in ("gray", "black"):
        for n in ("diff", "lira", "token_lira", "rmia"):
            assert names[f"{a}_refs_{n}"].models == ("target", "references")


def test_columns_by_number_of_references():
    lean = FEATURE_SETS["lean"]
    none, one, two = (feature_columns(lean, "gray", k) for k in (0, 1, 2))
    assert "gray_ref_diff" not in none and "gray_ref_diff" in one
    assert not any("_refs_" in c for c in one)
    assert two == one + ["gray_refs_diff", "gray_refs_lira", "gray_refs_token_lira", "gray_refs_rmia"]
    calibrated = feature_columns(FEATURE_SETS["calibrated"], "gray", 3)
    assert calibrated == ["gray_ref_ratio", "gray_ref_diff", "gray_ez", "gray_refs_diff", "gray_refs_lira",
                          "gray_refs_token_lira", "gray_refs_rmia"]


def test_token_level_row_adds_them_only_with_two_references():
    lp, refs = np.array(TARGET), [np.array(r) for r in REFS]
    one = token_level_row("gray", "x", lp, FEATURE_SETS["lean"], reference_logprobs=refs[0],
                          references_logprobs=refs[:1])
    two = token_level_row("gray", "x", lp, FEATURE_SETS["lean"], reference_logprobs=refs[0],
                          references_logprobs=refs)
    assert not any("_refs_" in k for k in one)
    assert {k: v for k, v in two.items() if k in one} == one  # the first reference's features unchanged
    assert two["gray_refs_diff"] == pytest.approx(-5 / 12)
