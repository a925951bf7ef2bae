"""Per-sample MIA methods: definitions and orientation on hand-made tables, the registry's
minimal extractions, cross-fitting (no sample scores itself), and the model-based methods'
reading of the reference bank's columns."""

import fnmatch
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from trainspotter.errors import InputError
from trainspotter.features import model_based
from trainspotter.features.extract import feature_columns
from trainspotter.evaluation.mia import (BANK_IN, BANK_LL, METHODS, PETAL_PREFIX, Extraction, as_petal, bank_arrays,
                                         cross_fit, crossfit_folds, merge_extractions, method_columns, method_scores,
                                         scoring_pipeline)

BANK_METHODS = ["model_loss", "model_calibration", "lira_online", "lira_offline", "model_fpr", "rmia"]


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
        "gray_conf": [0.6, 0.3], "gray_ent": [1.0, 2.5], "gray_ment": [0.8, 2.0],  # TDDBench's metric-based
        "black_match_rate": [0.5, 0.2], "black_pert_match_rate_case": [0.4, 0.3], "gray_margin": [0.5, -1.0],
        # reference bank of 4: row 0 (ℓ_target = −1) sits near its IN references (0, 1) and far
        # above its OUT ones; row 1 (ℓ_target = −2) below its IN ones (2, 3)
        **{f"{BANK_LL}{j}": v for j, v in enumerate([[-1.1, -1.9], [-1.2, -2.0], [-2.0, -1.6], [-2.1, -1.7]])},
        **{f"{BANK_IN}{j}": v for j, v in enumerate([[1, 0], [1, 0], [0, 1], [0, 1]])},
    })


@pytest.fixture
def population():
    # passages no model trained on, each as likely under the target as under every reference: LR(z) = 1
    return pd.DataFrame({"gray_ppl": [math.e ** 2, math.e ** 3],
                         **{f"{BANK_LL}{j}": [-2.0, -3.0] for j in range(4)},
                         **{f"{BANK_IN}{j}": [0, 0] for j in range(4)}})


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
    assert s("model_loss") == pytest.approx([-1 + 1.6, -2 + 1.8])  # minus the mean over all 4 references
    assert s("model_calibration") == pytest.approx([-1 + 2.05, -2 + 1.95])  # minus the OUT mean
    assert s("lira_online") == pytest.approx([108.0, -12.0])  # as in test_model_based
    assert s("model_fpr") == pytest.approx([1.0, 0.25])  # above both OUT; tied with −2 of (−1.9, −2)


def test_every_single_feature_method_ranks_the_member_like_row_first(table, population):
    for name, m in METHODS.items():
        # learning-based methods train on shadow columns, Query-qrm on a population, Query-ref reads the
        # bank on perturbed variants, Query-transfer a surrogate's column: test_tddbench
        if not m.needs_labels and m.paradigm != "learning" and name not in ("query_qrm", "query_ref", "query_transfer"):
            scores = method_scores(name, table, population=population)
            assert scores[0] > scores[1], name
    # RMIA: LR(x) = e^-1 / mean(e^ℓ_j) = 1.65 ≥ LR(z) = 1 for both z; row 1: 0.81 < 1
    assert method_scores("rmia", table, population=population) == pytest.approx([1.0, 0.0])


def test_bank_methods_score_like_the_model_based_functions():
    """The registry reads the bank columns in reference order (bank_ll_10 after bank_ll_2) and
    scores as model_based does on the arrays."""
    rng = np.random.default_rng(5)
    n, m, order = 12, 11, rng.permutation(11)
    ll, flags = rng.normal(-3, 1, (n, m)), rng.random((n, m)) < 0.5
    flags[:, 0], flags[:, 1] = True, False
    target = rng.normal(-3, 1, n)
    df = pd.DataFrame({"gray_ppl": np.exp(-target), **{f"{BANK_LL}{j}": ll[:, j] for j in order},
                       **{f"{BANK_IN}{j}": flags[:, j].astype(int) for j in order}})
    pop_ll, pop_target = rng.normal(-3, 1, (5, m)), rng.normal(-3, 1, 5)
    pop = pd.DataFrame({"gray_ppl": np.exp(-pop_target), **{f"{BANK_LL}{j}": pop_ll[:, j] for j in range(m)},
                        **{f"{BANK_IN}{j}": 0 for j in range(m)}})
    t, r, f = bank_arrays(df)
    assert t == pytest.approx(target) and r.tolist() == ll.tolist() and f.tolist() == flags.tolist()
    expected = {"model_loss": model_based.model_loss(target, ll),
                "model_calibration": model_based.model_calibration(target, ll, flags),
                "lira_online": model_based.lira_online(target, ll, flags),
                "lira_offline": model_based.lira_offline(target, ll, flags),
                "model_fpr": model_based.model_fpr(target, ll, flags),
                "rmia": model_based.rmia(target, ll, flags, pop_target, pop_ll)}
    assert list(expected) == BANK_METHODS
    for name, want in expected.items():
        assert method_scores(name, df, population=pop) == pytest.approx(want), name
    assert len(np.unique(expected["rmia"])) > 2  # the population comparison is not degenerate


def test_bank_input_errors_name_the_problem(table, population):
    with pytest.raises(InputError, match="'rmia' needs a population table"):
        method_scores("rmia", table)
    bad = population.assign(**{f"{BANK_IN}2": [0, 1]})
    with pytest.raises(InputError, match="population table: row 1 is marked as trained on by reference 2"):
        method_scores("rmia", table, population=bad)
    with pytest.raises(InputError, match="population table has 3 reference models"):
        method_scores("rmia", table, population=population.drop(columns=[f"{BANK_LL}3", f"{BANK_IN}3"]))
    with pytest.raises(InputError, match="reference\\(s\\) \\[1\\] have only one of them"):
        method_scores("lira_online", table.drop(columns=[f"{BANK_IN}1"]))
    with pytest.raises(InputError, match="bank_in_3 at row 0 \\(id 'p0'\\) is not 0 or 1"):
        method_scores("model_fpr", table.assign(**{f"{BANK_IN}3": [0.5, 1], "id": ["p0", "p1"]}))
    with pytest.raises(InputError, match="bank_ll_0 at row 1 is not a finite"):
        method_scores("model_loss", table.assign(**{f"{BANK_LL}0": [-1.0, np.nan]}))
    with pytest.raises(InputError, match="there are none"):
        method_scores("model_loss", table.drop(columns=[c for c in table.columns if c.startswith("bank_")]))


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
    from trainspotter.evaluation.benchmark import SHADOW_FEATURES

    m = METHODS[name]
    ex = m.extraction
    cols = feature_columns(ex.config(), ex.access, references=int(ex.reference))
    if ex.estimator == "petal":
        cols = list(as_petal(pd.DataFrame(columns=cols)).columns)
    for pattern in m.columns:
        if pattern.startswith("bank_"):  # the reference bank's columns, which the bank extraction adds
            assert ex.bank, (name, pattern)
        elif pattern == "transfer_ll":  # the surrogate's extraction gives it (flows.benchmark.features_table)
            assert ex.surrogate, name
        elif pattern.startswith("shadow_"):  # the shadow model's: its extraction (SHADOW_FEATURES) gives them
            assert ex.shadow, (name, pattern)
            shadow = feature_columns(SHADOW_FEATURES, "gray", references=0)
            assert pattern == "shadow_in" or pattern.removeprefix("shadow_") in shadow, (name, pattern)
        else:
            assert any(fnmatch.fnmatchcase(c, pattern) for c in cols), (name, pattern)
    assert all(c.startswith(m.access + "_") or c.startswith(PETAL_PREFIX) for c in cols) or ex.surrogate


def test_minimal_extractions_are_minimal():
    cfg = lambda name: METHODS[name].extraction.config()  # noqa: E731
    for name in ("loss", "zlib", "min_k", "min_kpp", "refl", "ez_mia", "petal"):
        assert not cfg(name).perturbations and not cfg(name).sequence, name
    assert cfg("neighbor").perturbations and not cfg("neighbor").sequence
    assert cfg("baseline").sequence and not cfg("baseline").perturbations
    assert cfg("petal").estimator == "petal" and cfg("loss").estimator == "sigmoid"
    assert [n for n, m in METHODS.items() if m.extraction.reference] == [
        "refl", "ez_mia", "petal", "scoring_gray", "scoring_black"]
    assert [n for n, m in METHODS.items() if m.extraction.bank] == ["query_ref", *BANK_METHODS]
    assert [n for n, m in METHODS.items() if m.needs_population] == ["query_transfer", "query_qrm", "rmia"]
    for name in BANK_METHODS:
        assert not cfg(name).perturbations and not cfg(name).sequence, name
    assert merge_extractions([Extraction("gray"), Extraction("black", sequence=True)]) == \
        ("both", False, False, True, False)
    assert merge_extractions([Extraction("gray", reference=True), Extraction("gray", perturbations=True)]) == \
        ("gray", True, True, False, False)
    assert merge_extractions([Extraction("gray"), METHODS["learn_sorted"].extraction]) == \
        ("gray", False, False, False, True)
    assert cfg("learn_sorted").prediction_vectors and not cfg("loss").prediction_vectors
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
