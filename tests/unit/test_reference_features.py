"""The features that combine K ≥ 2 reference models (trainspotter.features.references), each
against numbers worked out by hand on small arrays."""

import math

import numpy as np
import pytest

from trainspotter.features.extract import feature_columns
from trainspotter.features.catalog import catalog
from trainspotter.features.features import FEATURE_SETS, FeatureConfig, token_level_row
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


def _bank_table(target_ll, refs_ll):
    """A benchmark features table (evaluation.mia's bank columns), every reference OUT."""
    import pandas as pd

    from trainspotter.evaluation.mia import BANK_IN, BANK_LL

    return pd.DataFrame({"gray_ppl": np.exp(-target_ll), **{f"{BANK_LL}{j}": refs_ll[:, j] for j in range(refs_ll.shape[1])},
                         **{f"{BANK_IN}{j}": 0 for j in range(refs_ll.shape[1])}})


def test_every_reference_feature_is_its_benchmark_twin():
    """Each audit feature with a model-based twin (references.BENCHMARK_TWINS) equals it on the
    passages' ℓ, computed through the audit's row code (token_level_row) and, where a benchmark
    row computes the twin, through that row (evaluation.mia.method_scores) too. The catalogue's
    refs_* features are exactly the twins plus refs_token_lira (refs_lira per token)."""
    from trainspotter.evaluation.mia import METHODS, method_scores
    from trainspotter.features.references import BENCHMARK_TWINS

    names = {s.name.split("_refs_")[1] for s in catalog(FeatureConfig()) if "_refs_" in s.name}
    assert names == set(BENCHMARK_TWINS) | {"token_lira"}
    rng = np.random.default_rng(3)
    n, k = 40, 3
    tokens = [rng.normal(-3, 1, (k + 1, int(rng.integers(3, 9)))) for _ in range(n)]
    rows = [token_level_row("gray", "x", t[0], FeatureConfig(), references_logprobs=list(t[1:])) for t in tokens]
    target_ll = np.array([t[0].mean() for t in tokens])
    refs_ll = np.array([t[1:].mean(axis=1) for t in tokens])
    for name, twin in BENCHMARK_TWINS.items():
        feature = np.array([r[f"gray_refs_{name}"] for r in rows])
        np.testing.assert_allclose(feature, twin(target_ll, refs_ll), rtol=1e-12, atol=1e-12, err_msg=name)
        if twin.method:  # the benchmark's row measures the audit's feature (up to its sign)
            np.testing.assert_allclose(feature, twin.sign * method_scores(twin.method, _bank_table(target_ll, refs_ll)),
                                       rtol=1e-12, atol=1e-12, err_msg=name)
            assert direction(f"gray_refs_{name}") == twin.sign
    # the offline LiRA row pools σ over passages, the feature does not: the row says so
    assert "global σ" in METHODS["lira_offline"].label and dict(BENCHMARK_TWINS["lira"].kwargs)["variance"] == "per_example"
    pooled = METHODS["lira_offline"].score(_bank_table(target_ll, refs_ll))
    assert not np.allclose(np.exp(pooled), [r["gray_refs_lira"] for r in rows])
