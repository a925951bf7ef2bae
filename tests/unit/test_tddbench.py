"""TDDBench's metric- and learning-based algorithms and its protocol (issue 21): every new
score against a hand computation on a tiny array, the classifier on a separable toy case,
the partitions and the mean ± std."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trainspotter.backends.base import TokenScores
from trainspotter.evaluation import learning_based
from trainspotter.evaluation.mia import METHODS, method_scores
from trainspotter.evaluation.tddbench import PARADIGMS, partitions, render_tddbench, summarise
from trainspotter.features.catalog import catalog
from trainspotter.features.features import FeatureConfig, prediction_row
from trainspotter.features.orientation import direction

TDDBENCH_21 = ["Metric-loss", "Metric-conf", "Metric-corr", "Metric-ent", "Metric-ment", "Learn-original",
               "Learn-top3", "Learn-sorted", "Learn-label", "Learn-merge", "Model-loss", "Model-calibration",
               "Model-lira", "Model-fpr", "Model-robust", "Query-augment", "Query-transfer", "Query-adv",
               "Query-neighbor", "Query-qrm", "Query-ref"]


def _scores(top_p: list[list[float]], true_p: list[float], mentr: list[float], proj=None) -> TokenScores:
    """Two positions; μ from the full distributions is not needed: given directly."""
    top = np.log(np.asarray(top_p))
    return TokenScores(token_ids=np.array([1, 2]), logprobs=np.log(true_p), argmax=np.array([1, 0]),
                       mu=np.array([-0.5, -1.5]), sigma2=np.zeros(2), max_logprob=top[:, 0], mentr=np.array(mentr),
                       top_logprobs=top, projection=None if proj is None else np.asarray(proj, dtype=float))


def test_prediction_row_by_hand():
    top = [[0.5] + [0.05] * 9, [0.9] + [0.01] * 9]
    s = _scores(top, [0.5, 0.01], [1.0, 3.0], proj=[np.arange(16), np.arange(16) + 2])
    row = prediction_row(s, FeatureConfig(prediction_vectors=True))
    assert row["gray_conf"] == pytest.approx((0.5 + 0.9) / 2)
    assert row["gray_ent"] == pytest.approx(1.0)  # mean of −μ = (0.5 + 1.5)/2
    assert row["gray_ment"] == pytest.approx(2.0)
    assert row["gray_true_p"] == pytest.approx(0.255)
    assert row["gray_top_p_1"] == pytest.approx(0.7) and row["gray_top_p_2"] == pytest.approx(0.03)
    assert [row[f"gray_pv_{j}"] for j in (1, 16)] == pytest.approx([1.0, 16.0])
    assert "gray_top_p_1" not in prediction_row(s, FeatureConfig())  # vectors only when asked


def test_prediction_row_is_nan_where_the_backend_has_no_distribution():
    s = TokenScores(token_ids=np.array([1]), logprobs=np.array([-1.0]), argmax=np.array([1]), mu=np.array([np.nan]),
                    sigma2=np.array([np.nan]))
    row = prediction_row(s, FeatureConfig(prediction_vectors=True))
    assert all(np.isnan(row[k]) for k in ("gray_conf", "gray_ent", "gray_ment", "gray_top_p_3", "gray_pv_2"))
    assert row["gray_true_p"] == pytest.approx(np.exp(-1.0))


def test_metric_columns_are_catalogued_with_their_member_like_direction():
    names = {s.name for s in catalog(FeatureConfig(), "gray")}
    assert {"gray_conf", "gray_ent", "gray_ment", "gray_true_p"} <= names
    assert not any(n.startswith(("gray_top_p_", "gray_pv_")) for n in names)
    assert [direction(c) for c in ("gray_conf", "gray_true_p", "gray_top_p_1", "gray_ent", "gray_ment")] == \
        [1, 1, 1, -1, -1]
    vec = [s.name for s in catalog(FeatureConfig(prediction_vectors=True), "gray")]
    assert sum(n.startswith("gray_top_p_") for n in vec) == 10 and sum(n.startswith("gray_pv_") for n in vec) == 16


def test_metric_scores_by_hand():
    df = pd.DataFrame({"gray_conf": [0.2, 0.7], "black_match_rate": [0.25, 0.5], "gray_ent": [3.0, 1.0],
                       "gray_ment": [2.5, 0.5], "gray_ppl": [np.e, np.e ** 2]})
    assert method_scores("metric_conf", df).tolist() == [0.2, 0.7]
    assert method_scores("metric_corr", df).tolist() == [0.25, 0.5]
    assert method_scores("metric_ent", df).tolist() == [-3.0, -1.0]
    assert method_scores("metric_ment", df).tolist() == [-2.5, -0.5]
    assert method_scores("loss", df).tolist() == pytest.approx([-1.0, -2.0])


def test_margin_to_the_greedy_boundary_by_hand():
    """Position 0: greedy right (argmax 1 = token 1), margin log 0.5 − log 0.05; position 1:
    greedy wrong (argmax 0 ≠ token 2), margin log p_y − log 0.9 = log 0.01 − log 0.9."""
    from trainspotter.features.features import margins

    s = _scores([[0.5] + [0.05] * 9, [0.9] + [0.01] * 9], [0.5, 0.01], [1.0, 3.0])
    want = [np.log(0.5) - np.log(0.05), np.log(0.01) - np.log(0.9)]
    assert margins(s) == pytest.approx(want)
    assert prediction_row(s, FeatureConfig())["gray_margin"] == pytest.approx(np.mean(want))


def test_query_scores_by_hand():
    df = pd.DataFrame({"black_match_rate": [0.5, 0.2], "black_pert_match_rate_case": [0.3, 0.2],
                       "black_pert_match_rate_deletion": [0.1, 0.5], "gray_margin": [0.7, -0.2]})
    assert method_scores("query_augment", df) == pytest.approx([0.3, 0.3])  # (0.5 + 0.3 + 0.1) / 3
    assert method_scores("query_adv", df).tolist() == [0.7, -0.2]


def test_qrm_is_the_residual_to_the_population_quantile_line():
    """Non-members with ℓ = −1 − 0.5 log bytes exactly: every quantile line is that line, so the
    score is ℓ − (−1 − 0.5 log bytes) (the ratio column is ℓ / bytes)."""
    line = lambda b: -1 - 0.5 * np.log(b)  # noqa: E731
    table = lambda ll, b: pd.DataFrame({"gray_ppl": np.exp(-np.asarray(ll)),  # noqa: E731
                                        "gray_zlib_ratio": np.asarray(ll) / np.asarray(b)})
    b_pop = np.array([20.0, 50.0, 100.0, 200.0, 400.0])
    pop = table(line(b_pop), b_pop)
    df = table([line(80.0) + 0.3, line(30.0) - 0.2], [80.0, 30.0])
    assert method_scores("query_qrm", df, population=pop) == pytest.approx([0.3, -0.2], abs=1e-6)
    with pytest.raises(Exception, match="population"):
        method_scores("query_qrm", df)


def test_query_ref_averages_online_lira_over_x_and_its_variants():
    """Two candidates, bank of 2 OUT + 2 IN; one perturbation kind. LiRA online on x and on the
    variant (ℓ_target(x̃) = ℓ(x) − pert_diff, the bank's ℓ from bank_qll_case_<j>), averaged."""
    from trainspotter.features import model_based

    target = np.array([-1.0, -2.0])
    refs = np.array([[-1.5, -1.7, -1.1, -1.0], [-2.1, -2.3, -1.6, -2.2]])
    q_refs = refs - 0.5
    in_mask = np.array([[0, 0, 1, 1], [0, 0, 1, 0]], bool)
    df = pd.DataFrame({"gray_ppl": np.exp(-target), "gray_pert_diff_case": [0.2, 0.9],
                       **{f"bank_ll_{j}": refs[:, j] for j in range(4)},
                       **{f"bank_in_{j}": in_mask[:, j].astype(int) for j in range(4)},
                       **{f"bank_qll_case_{j}": q_refs[:, j] for j in range(4)}})
    want = (model_based.lira_online(target, refs, in_mask)
            + model_based.lira_online(target - np.array([0.2, 0.9]), q_refs, in_mask)) / 2
    assert method_scores("query_ref", df) == pytest.approx(want)
    with pytest.raises(Exception, match="bank_qll_case_0"):
        method_scores("query_ref", df.drop(columns=["bank_qll_case_0"]))


def test_every_tddbench_name_is_a_method_of_its_paradigm():
    for m in METHODS.values():
        assert m.paradigm in PARADIGMS, m.name
        if m.tddbench:
            assert m.tddbench.split("-")[0].lower().replace("learn", "learning") == m.paradigm, m.name


# ---------------------------------------------------------------- learning-based

def _shadow_table(n: int, seed: int, separable: bool = True) -> pd.DataFrame:
    """Target and shadow columns of Learn-top3; the shadow's IN rows have a larger top-1
    probability (0.8 vs 0.2, no overlap), and so have the target's members."""
    rng = np.random.default_rng(seed)
    shadow_in = np.r_[np.ones(n // 2, int), np.zeros(n - n // 2, int)]
    member = rng.permutation(shadow_in)
    gap = 0.6 if separable else 0.0
    cols = {}
    for prefix, y in (("", member), ("shadow_", shadow_in)):
        cols[f"{prefix}gray_top_p_1"] = 0.2 + gap * y + rng.uniform(-0.05, 0.05, n)
        cols[f"{prefix}gray_top_p_2"] = rng.uniform(0.05, 0.1, n)
        cols[f"{prefix}gray_top_p_3"] = rng.uniform(0.01, 0.05, n)
    return pd.DataFrame(cols | {"shadow_in": shadow_in}), member


def test_auxiliary_classifier_separates_a_separable_toy_case():
    train, _ = _shadow_table(200, 0)
    test, member = _shadow_table(100, 1)
    p = learning_based.fit_score(train, test, "top3", seed=0)
    assert p[member == 1].min() > p[member == 0].max()  # AUROC 1
    clf = learning_based.classifier().named_steps["mlp"]
    assert (clf.hidden_layer_sizes, clf.learning_rate_init, clf.early_stopping, clf.n_iter_no_change,
            clf.max_iter) == ((64, 32), 1e-3, True, 30, 500)  # TDDBench Sec. 3


def test_learning_method_cross_fits_without_a_train_table_and_fits_on_it_with_one():
    df, member = _shadow_table(120, 2)
    out_of_fold = method_scores("learn_top3", df, folds=4, seed=0)
    assert np.isfinite(out_of_fold).all() and out_of_fold[member == 1].min() > out_of_fold[member == 0].max()
    train, _ = _shadow_table(120, 3)
    fitted = method_scores("learn_top3", df, train=train)
    assert fitted[member == 1].min() > fitted[member == 0].max()


def test_learning_inputs_are_the_documented_columns():
    assert learning_based.INPUTS["top3"] == ["gray_top_p_1", "gray_top_p_2", "gray_top_p_3"]
    assert len(learning_based.INPUTS["sorted"]) == 10 and len(learning_based.INPUTS["original"]) == 16
    assert learning_based.INPUTS["label"][-1] == "gray_true_p"
    assert set(learning_based.INPUTS["merge"]) >= {"gray_ppl", "gray_ent", "gray_ment", "gray_conf"}


def test_shadow_columns_mark_what_the_shadow_trained_on():
    shadow = pd.DataFrame({"id": ["a", "b"], "gray_ppl": [2.0, 3.0]})
    out = learning_based.shadow_columns(shadow, ["a", "b"], frozenset({"b"}))
    assert out.columns.tolist() == ["shadow_gray_ppl", "shadow_in"] and out["shadow_in"].tolist() == [0, 1]


# ---------------------------------------------------------------- the protocol

def test_partitions_take_half_of_each_class_seeded_and_disjoint():
    y = np.r_[np.ones(7, int), np.zeros(10, int)]
    parts = partitions(y, 5, seed=3)
    assert len(parts) == 5
    for evaluation, training in parts:
        assert y[evaluation].sum() == 3 and (1 - y[evaluation]).sum() == 5  # ⌊7/2⌋, ⌊10/2⌋
        assert sorted(np.r_[evaluation, training].tolist()) == list(range(17))
    assert len({tuple(e) for e, _ in parts}) > 1  # the partitions differ
    assert all((a == b).all() for (a, _), (b, _) in zip(parts, partitions(y, 5, seed=3)))


def test_summarise_is_mean_and_sample_std():
    per = [{k: v for k in ("precision", "recall", "f1", "accuracy", "fnr", "fpr", "advantage", "tpr_at_1pct_fpr",
                           "tpr_at_10pct_fpr", "auroc", "tpr_at_0.1pct_fpr")} for v in (0.5, 0.6, 0.7)]
    s = summarise(per)
    assert s["auroc"]["mean"] == pytest.approx(0.6) and s["auroc"]["std"] == pytest.approx(0.1)  # ddof 1
    assert len(s) == 11


def test_protocol_scores_only_evaluation_rows_and_fits_scoring_on_training_rows():
    """scoring_gray fitted on the training half scores the evaluation half: a perfectly
    separating column gives AUROC 1 on every partition."""
    from trainspotter.evaluation.tddbench import partition_metrics

    y = np.r_[np.ones(20, int), np.zeros(20, int)]
    df = pd.DataFrame({"gray_ppl": np.where(y == 1, 2.0, 4.0) + np.linspace(0, 0.1, 40)})
    per = partition_metrics("scoring_gray", df, y, partitions(y, 3), seed=0)
    assert [m["auroc"] for m in per] == [1.0] * 3
    assert all(m["n_members"] == 10 and m["n_nonmembers"] == 10 for m in per)


def test_render_groups_by_paradigm_and_ranks_paradigms():
    row = lambda name, paradigm, auroc: {"method": name, "label": name, "tddbench": None, "paradigm": paradigm,  # noqa: E731
                                         "access": "gray", "cost": None,
                                         "summary": summarise([{k: auroc for k in (
                                             "precision", "recall", "f1", "accuracy", "fnr", "fpr", "advantage",
                                             "tpr_at_1pct_fpr", "tpr_at_10pct_fpr", "auroc", "tpr_at_0.1pct_fpr")}] * 2)}
    md = render_tddbench("t", "h", [row("a", "metric", 0.6), row("b", "model", 0.7), row("c", "metric", 0.5)], 5,
                         (10, 10))
    assert md.index("## Metric-based") < md.index("## Model-based")
    assert "| Model-based | 0.700 | 0.700 |" in md and "| Metric-based | 0.550 | 0.600 |" in md
    assert md.index("| Model-based | 0.700") < md.index("| Metric-based | 0.550")


# ---------------------------------------------------------------- Query-transfer's surrogate

def test_distilled_surrogate_follows_the_targets_greedy_tokens(mini_testbed, tmp_path):
    """Fine-tuned on held-out texts labelled by the target's greedy tokens, the surrogate agrees
    with those labels more often than the reference it started from (20 epochs, so that 32
    texts suffice); ``build_surrogate`` builds once and then reuses its folder."""
    from trainspotter.backends.hf import HFBackend
    from trainspotter.data import load_passages
    from trainspotter.evaluation.query_based import build_surrogate, distil, greedy_labels

    target, student = HFBackend(mini_testbed / "target"), mini_testbed / "reference"
    texts = [p["text"] for p in load_passages(mini_testbed / "heldout.jsonl")[:32]]
    pairs = greedy_labels(target, texts)
    assert all(len(labels) == len(ids) - 1 for ids, labels in pairs)

    def agreement(path) -> float:
        return float(np.mean(np.concatenate([s.argmax == np.asarray(y)
                                             for s, (_, y) in zip(HFBackend(path).score(texts), pairs)])))

    surrogate = distil(student, pairs, tmp_path / "distilled", epochs=20, lr=2e-3)
    assert agreement(surrogate) > agreement(student) + 0.1
    path = build_surrogate(target, student, texts, tmp_path / "built")
    stamp = (path / "config.json").stat().st_mtime_ns
    assert build_surrogate(target, student, texts, tmp_path / "built") == path
    assert (path / "config.json").stat().st_mtime_ns == stamp and len(list((tmp_path / "built").iterdir())) == 1
