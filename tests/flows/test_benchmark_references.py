"""`trainspotter benchmark` with several reference models on `mini-pretrain`: the model-based
methods on the testbed's reference bank (K = 2 OUT + 2 IN), RMIA's population, their cost,
the *_refs_* features of two --reference, and the errors a user can run into."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from trainspotter.backends import load_backend
from trainspotter.errors import InputError
from trainspotter.evaluation.mia import METHODS

BANKED = [m for m, method in METHODS.items() if method.paradigm == "model"]
ARGS = ["--testbed", "mini-pretrain", "--limit", "16", "--trials", "8", "--null-trials", "8", "--alphas", "0.05",
        "--strategies", "mixture", "--payoffs", "diff", "--n-boot", "50", "--cost-samples", "4",
        "--cost-repeats", "1", "--perturbation-kinds", "deletion"]


@pytest.fixture(scope="module")
def bench(artifacts, tmp_path_factory):
    from trainspotter.flows.cli import app

    out = tmp_path_factory.mktemp("bench-refs")
    result = CliRunner().invoke(app, ["benchmark", *ARGS, "--methods", ",".join(["refl", *BANKED]),
                                      "--reference-models", "2", "--reference", "testbed:mini-pretrain/reference",
                                      "--reference", "testbed:mini-pretrain/out-0", "--di-access", "gray",
                                      "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_model_based_method_is_scored_and_costed(bench):
    assert set(BANKED) == {"model_loss", "model_calibration", "lira_online", "lira_offline", "model_fpr", "rmia"}
    rows = {r["method"]: r for r in bench["methods"]}
    assert list(rows) == ["refl", *BANKED]
    for name in BANKED:
        assert 0 <= rows[name]["metrics"]["auroc"] <= 1
        assert rows[name]["cost"]["seconds"] > 0  # its bank models' forward passes are timed too


def test_the_bank_columns_are_the_bank_models_log_likelihoods_and_training_sets(bench):
    from trainspotter.data import load_passages
    from trainspotter.evaluation.benchmark import BenchmarkConfig
    from trainspotter.testbeds.reference_models import load_reference_manifest
    from trainspotter.testbeds.build import split_path
    from trainspotter.flows.benchmark import features_table

    table = features_table(BenchmarkConfig(**bench["config"]))  # cached: the table the run scored
    assert set(table["split"]) == {"member", "nonmember", "heldout"}  # held-out: RMIA's population
    models = load_reference_manifest("mini-pretrain")["models"]
    by_id = {p["id"]: p["text"] for s in ("member", "nonmember", "heldout")
             for p in load_passages(split_path("mini-pretrain", s))}
    texts = [by_id[i] for i in table["id"]]
    bank = ["out-0", "out-1", "in-0", "in-1"]  # bank index j
    for j, name in enumerate(bank):
        seen = set(models[name].get("candidates_in", ()))
        assert table[f"bank_in_{j}"].tolist() == [int(i in seen) for i in table["id"]]
        ll = [s.logprobs.mean() for s in load_backend(f"testbed:mini-pretrain/{name}").score(texts)]
        np.testing.assert_allclose(table[f"bank_ll_{j}"], ll, rtol=1e-6)
    assert table.loc[table["split"] == "heldout", [f"bank_in_{j}" for j in range(4)]].to_numpy().sum() == 0
    # two --reference: the DI features combine them
    assert {"gray_refs_diff", "gray_refs_lira", "gray_refs_token_lira", "gray_refs_rmia"} <= set(table.columns)


def test_model_based_methods_without_a_bank_and_a_bank_for_a_finetuned_testbed_are_clear_errors(artifacts):
    from trainspotter.flows.cli import app

    runner = CliRunner()
    no_bank = runner.invoke(app, ["benchmark", *ARGS, "--methods", "lira_online"])
    assert isinstance(no_bank.exception, InputError)
    assert str(no_bank.exception).startswith("option --methods: method(s) lira_online need reference models")
    assert "--reference-models K" in str(no_bank.exception)
    finetuned = runner.invoke(app, ["benchmark", *ARGS[2:], "--testbed", "mini", "--methods", "lira_offline",
                                    "--reference-models", "1", "--di-access", "none"])
    assert isinstance(finetuned.exception, InputError)
    assert ("testbed 'mini': reference models are built for pre-training testbeds without twins only"
            in str(finetuned.exception))
