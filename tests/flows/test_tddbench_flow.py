"""`trainspotter benchmark --suite tddbench` on `mini-pretrain` (issue 21): TDDBench's protocol
through the CLI — every selected method over random partitions, mean ± std of the ten
metrics, cost in a fresh process per method, tables grouped by paradigm."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from trainspotter.evaluation.tddbench import TEN_METRICS

# one or two per paradigm, each kind of extra input: black columns, the shadow, the bank (on the
# perturbed variants too), the population, the surrogate, fitting on the training rows
METHODS = ["loss", "metric_corr", "metric_ment", "learn_merge", "rmia", "query_ref", "query_transfer", "scoring_gray"]
PARTITIONS = 3


@pytest.fixture(scope="module")
def run(artifacts, tmp_path_factory):
    from trainspotter.flows.cli import app

    out = tmp_path_factory.mktemp("tddbench")
    result = CliRunner().invoke(app, ["benchmark", "--suite", "tddbench", "--testbed", "mini-pretrain", "--limit", "16",
                                      "--methods", ",".join(METHODS), "--reference-models", "1",
                                      "--partitions", str(PARTITIONS), "--cost-samples", "16", "--cost-repeats", "1",
                                      "--perturbation-kinds", "deletion", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), out


def test_every_method_has_mean_and_std_of_the_ten_metrics_over_the_partitions(run):
    res, _ = run
    rows = {r["method"]: r for r in res["methods"]}
    assert list(rows) == METHODS
    assert len(res["partitions"]) == PARTITIONS
    labels = [i < 16 for i in range(32)]  # members come first in the table (16 per split)
    for evaluation in res["partitions"]:
        assert sum(labels[i] for i in evaluation) == 8 and len(evaluation) == 16  # half of each class
    for name, r in rows.items():
        assert len(r["partitions"]) == PARTITIONS
        for key, _ in TEN_METRICS:
            values = [m[key] for m in r["partitions"]]
            assert r["summary"][key]["mean"] == pytest.approx(np.mean(values)), (name, key)
            assert r["summary"][key]["std"] == pytest.approx(np.std(values, ddof=1)), (name, key)
        assert all(m["n_members"] == 8 and m["n_nonmembers"] == 8 for m in r["partitions"])
    assert rows["loss"]["paradigm"] == "metric" and rows["loss"]["tddbench"] == "Metric-loss"
    assert rows["learn_merge"]["paradigm"] == "learning" and rows["query_transfer"]["tddbench"] == "Query-transfer"


def test_cost_is_measured_in_a_fresh_process_per_method(run):
    res, _ = run
    for r in res["methods"]:
        c = r["cost"]
        assert c["fresh_process"] and c["seconds"] > 0 and c["cost_samples"] == 16, r["method"]
        assert c["peak_rss_mb"] is not None, r["method"]


def test_table_is_grouped_by_paradigm(run):
    _, out = run
    md = (out / "tddbench.md").read_text()
    order = [md.index(h) for h in ("## Metric-based", "## Learning-based", "## Model-based", "## Query-based",
                                   "## LLM attacks")]
    assert order == sorted(order)
    assert "Metric-ment" in md and "± " in md and "## Paradigms by mean AUROC" in md
    assert json.loads((out / "tddbench.json").read_text())["methods"][0]["method"] == "loss"
