"""Per-sample MIA methods: definitions and orientation on hand-made tables, the registry's
minimal extractions, and cross-fitting (no sample scores itself)."""

import fnmatch
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from trainspotter.errors import InputError
from trainspotter.features.extract import feature_columns
from trainspotter.evaluation.mia import (METHODS, PETAL_PREFIX, Extraction, as_petal, cross_fit, crossfit_folds,
                              merge_extractions, method_columns, method_scores, scoring_pipeline)


@pytest.fixture
def table():
    # row 0 is the member-like row under every method's hypothesis, row 1 the non-member-like one
    return pd.DataFrame({
        "gray_ppl": [math.e, math.e ** 2],           # LOSS: -log PPL = -1 vs -2
        "gray_zlib_ratio": [-0.01, -0.03],           # mean log p / zlib bytes
        "gray_min_k_20": [-2.0, -5.0],
        "gray_min_kpp_20": [-0.5, -1.5],
        "gray_ref_diff": [-0.4, 0.1],                # target much better than reference
        "gray_pert_diff_synonym": [0.6, 0.1],        # members lose more under perturbation
        "gray_pert_diff_case": [0.2, 0.3],
        "gray_pert_ratio_case": [9.0, -9.0],         # not read by Neighbor
        "gray_ez": [3.0, 0.8],
        "black_ppl": [100.0, 1.0],                   # sigmoid estimate: not read by PETAL
        "petal_ppl": [math.exp(0.5), math.exp(1.5)],
        "black_seq_bertscore": [0.9, 0.4],
    })


def test_definitions(table):
    s = lambda name: method_scores(name, table)  # noqa: E731
    assert s("loss") == pytest.approx([-1.0, -2.0])
    assert s("zlib") == pytest.approx([-0.01, -0.03])
    assert s("min_k") == pytest.approx([-2.0, -5.0])
    assert s("min_kpp") == pytest.approx([-0.5, -1.5])
    assert s("refl") == pytest.approx([0.4, -0.1])
    assert s("neighbor") == pytest.approx([0.4, 0.2])  # mean of the two pert_diff columns only
    assert s("ez_mia") == pytest.approx([3.0, 0.8])
    assert s("petal") == pytest.approx([-0.5, -1.5])  # -log petal_ppl, not black_ppl
    assert s("baseline") == pytest.approx([0.9, 0.4])


def test_every_single_feature_method_ranks_the_member_like_row_first(table):
    for name, m in METHODS.items():
        if not m.needs_labels:
            scores = method_scores(name, table)
            assert scores[0] > scores[1], name


def test_missing_columns_are_named(table):
    with pytest.raises(InputError, match="'gray_pert_diff_\\*'"):
        method_scores("neighbor", table.drop(columns=["gray_pert_diff_synonym", "gray_pert_diff_case"]))
    with pytest.raises(InputError, match="unknown method 'nope'"):
        method_scores("nope", table)
    with pytest.raises(ValueError, match="needs the labels"):
        method_scores("scoring_gray", table)


@pytest.mark.parametrize("name", list(METHODS))
def test_minimal_extraction_provides_the_columns(name):
    """Each method's minimal extraction yields every column it reads (catalogue, no model)."""
    m = METHODS[name]
    ex = m.extraction
    cols = feature_columns(ex.config(), ex.access, references=int(ex.reference))
    if ex.estimator == "petal":
        cols = list(as_petal(pd.DataFrame(columns=cols)).columns)
    for pattern in m.columns:
        assert any(fnmatch.fnmatchcase(c, pattern) for c in cols), (name, pattern)
    assert all(c.startswith(m.access + "_") or c.startswith(PETAL_PREFIX) for c in cols)


def test_minimal_extractions_are_minimal():
    cfg = lambda name: METHODS[name].extraction.config()  # noqa: E731
    for name in ("loss", "zlib", "min_k", "min_kpp", "refl", "ez_mia", "petal"):
        assert not cfg(name).perturbations and not cfg(name).sequence, name
    assert cfg("neighbor").perturbations and not cfg("neighbor").sequence
    assert cfg("baseline").sequence and not cfg("baseline").perturbations
    assert cfg("petal").estimator == "petal" and cfg("loss").estimator == "sigmoid"
    assert [n for n, m in METHODS.items() if m.extraction.reference] == [
        "refl", "ez_mia", "petal", "scoring_gray", "scoring_black"]
    assert merge_extractions([Extraction("gray"), Extraction("black", sequence=True)]) == \
        ("both", False, False, True)
    assert merge_extractions([Extraction("gray", reference=True), Extraction("gray", perturbations=True)]) == \
        ("gray", True, True, False)
    assert merge_extractions([METHODS["petal"].extraction]) is None  # PETAL has its own set


def test_folds_use_every_sample_exactly_once_and_never_train_on_it():
    y = np.r_[np.ones(23, int), np.zeros(31, int)]
    folds = crossfit_folds(y, 5, seed=3)
    assert len(folds) == 5
    tests = np.concatenate([te for _, te in folds])
    assert sorted(tests.tolist()) == list(range(len(y)))  # each sample in exactly one test fold
    for train, test in folds:
        assert not set(train) & set(test) and len(train) + len(test) == len(y)
        assert abs(y[test].mean() - y.mean()) < 0.1  # stratified
    assert [t.tolist() for _, t in crossfit_folds(y, 5, seed=3)] == [t.tolist() for _, t in folds]
    assert len(crossfit_folds(np.r_[np.ones(3), np.zeros(10)], 5)) == 3  # lowered to the smaller class
    with pytest.raises(ValueError, match="at least 2 members"):
        crossfit_folds([1, 0, 0, 0], 5)


def test_cross_fitting_does_not_let_a_sample_score_itself():
    """80 pure-noise features for 60 samples: a model fitted on all samples separates them
    perfectly in-sample (it memorises each sample's unique noise), so scoring any sample with
    a model that saw it inflates the AUROC; out-of-fold scores stay near chance."""
    rng = np.random.default_rng(0)
    y = np.tile([1, 0], 30)
    X = rng.normal(size=(60, 80))
    in_sample = scoring_pipeline().fit(X, y).decision_function(X)
    assert roc_auc_score(y, in_sample) == 1.0
    auc = roc_auc_score(y, cross_fit(X, y, folds=5, seed=0))
    assert 0.3 < auc < 0.7, auc
    # and with real signal the cross-fitted score does find it
    X[:, :10] += 1.5 * y[:, None]
    assert roc_auc_score(y, cross_fit(X, y, folds=5, seed=0)) > 0.85


def test_scoring_methods_read_only_their_access_columns():
    rng = np.random.default_rng(1)
    n = 40
    y = np.tile([1, 0], n // 2)
    df = pd.DataFrame({"gray_a": rng.normal(size=n), "gray_b": rng.normal(size=n),
                       "black_a": rng.normal(size=n) + 3 * y, "petal_ppl": 1 + y})
    assert method_columns(METHODS["scoring_gray"], df) == ["gray_a", "gray_b"]
    assert method_columns(METHODS["scoring_black"], df) == ["black_a"]
    assert roc_auc_score(y, method_scores("scoring_black", df, y)) > 0.95
    assert roc_auc_score(y, method_scores("scoring_gray", df, y)) < 0.8  # the signal is only in black_a
    # NaN/inf features are imputed from the training folds, not propagated
    df.loc[3, "black_a"], df.loc[4, "black_a"] = np.nan, np.inf
    assert np.isfinite(method_scores("scoring_black", df, y)).all()
