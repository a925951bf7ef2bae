"""The demo path on the `mini` testbed, the MLflow record and the task cache."""

import json

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from trainspotter.testbeds.build import PRESETS as TESTBEDS
from trainspotter.presets import DEFAULT_PRESET, TEST_PRESETS


@pytest.fixture(scope="module")
def demo(mini_testbed):
    from trainspotter.flows.demo import demo_flow

    return {r["set"]: r for r in demo_flow(testbed="mini", alpha=0.05)}


def test_members_rejected_negative_control_not(demo):
    members, control = demo["members"], demo["negative-control"]
    assert members["reject"] and members["e_value"] >= 1 / 0.05
    assert members["stop_time"] == members["pairs_used"] < TESTBEDS["mini"].n_per_split
    assert not control["reject"] and control["max_wealth"] < 1 / 0.05
    assert control["pairs_used"] == TESTBEDS["mini"].n_per_split  # ran out of data, never crossed
    # anytime-valid p-value = 1 / max wealth
    assert control["p_value"] == pytest.approx(min(1.0, 1 / control["max_wealth"]))
    # Maini et al.'s fixed-sample DI p-value, reported beside the e-value
    assert members["baseline_p_value"] < 0.05 and 0 < control["baseline_p_value"] <= 1


def test_mlflow_run_holds_params_metrics_and_artifacts(demo):
    from trainspotter.flows.tracking import tracking_uri

    r = demo["members"]
    client = MlflowClient(tracking_uri())
    run = client.get_run(r["run_id"])
    params = run.data.params
    assert params["model"] == "testbed:mini" and params["reference"] == "testbed:mini/reference"
    assert params["test.alpha"] == "0.05" and params["preset"] == DEFAULT_PRESET
    assert all(params[f"test.{k}"] == str(v) for k, v in TEST_PRESETS[DEFAULT_PRESET].items())
    assert run.info.status == "FINISHED"
    inputs = {d.dataset.name: d.tags[0].value for d in run.inputs.dataset_inputs}
    assert inputs == {"suspect": "suspect", "heldout": "heldout", "features": "features"}
    metrics = run.data.metrics
    assert metrics["reject"] == 1.0 and metrics["pairs_used"] == r["pairs_used"]
    assert metrics["e_value"] == pytest.approx(r["e_value"])
    assert metrics["baseline_p_value"] == pytest.approx(r["baseline_p_value"])
    wealth = client.get_metric_history(r["run_id"], "wealth")
    assert [m.step for m in sorted(wealth, key=lambda m: m.step)] == list(range(1, r["pairs_used"] + 1))
    assert max(wealth, key=lambda m: m.step).value == pytest.approx(r["e_value"])
    names = {a.path for a in client.list_artifacts(r["run_id"])}
    assert {"features.parquet", "wealth.png", "config.yaml", "summary.json"} <= names
    local = client.download_artifacts(r["run_id"], "features.parquet")
    df = pd.read_parquet(local)
    assert len(df) == 2 * r["pairs_used"] and set(df["set"]) == {"suspect", "heldout"}
    assert set(r["features"]) <= set(df.columns)
    assert run.data.tags["model_fingerprint"] != run.data.tags["reference_fingerprint"]
    summary = json.loads(open(client.download_artifacts(r["run_id"], "summary.json")).read())
    assert summary["reject"] is True


def test_rerun_hits_the_feature_cache(demo, monkeypatch):
    """A second identical audit recomputes no features: the task body never runs."""
    import trainspotter.tasks.worker as worker
    from trainspotter.testbeds.build import split_path
    from trainspotter.flows.audit import AuditConfig, audit_flow

    calls = []
    original = worker.extract_rows
    monkeypatch.setattr("trainspotter.tasks.worker.extract_rows", lambda *a, **k: calls.append(1) or original(*a, **k))
    config = AuditConfig(name="demo-mini-members", suspect=str(split_path("mini", "member")),
                         heldout=str(split_path("mini", "heldout")), model="testbed:mini",
                         reference="testbed:mini/reference")
    again = audit_flow(config)
    assert calls == []
    assert again["e_value"] == pytest.approx(demo["members"]["e_value"])
    assert again["pairs_used"] == demo["members"]["pairs_used"]


def test_report_regenerated_from_mlflow(demo, tmp_path):
    from mlflow.tracking import MlflowClient

    from trainspotter.flows.report import render_report
    from trainspotter.flows.tracking import tracking_uri

    r = demo["negative-control"]
    page = render_report(r["run_id"], tmp_path / "report.html").read_text()
    assert "No rejection" in page and f"{r['pairs_used']} / {r['pairs_available']}" in page
    assert "gray_ref_ratio" in page  # feature weights of the scoring model
    names = {a.path for a in MlflowClient(tracking_uri()).list_artifacts(r["run_id"])}
    assert "report.html" in names


def test_black_box_audit_from_greedy_tokens_alone(mini_testbed):
    """access="black": the features come from the greedy tokens only (BADI App. A.6), yet the
    members are still detected; the log-prob columns never enter the test."""
    from trainspotter.testbeds.build import split_path
    from trainspotter.flows.audit import AuditConfig, audit_flow

    result = audit_flow(AuditConfig(
        name="black-mini", suspect=str(split_path("mini", "member")),
        heldout=str(split_path("mini", "heldout")), model="testbed:mini",
        reference="testbed:mini/reference", access="black"))
    assert result["features"] and all(c.startswith("black_") for c in result["features"])
    assert "black_ez" in result["features"] and "black_min_k_20" in result["features"]
    assert result["reject"] and result["stopped_by"] == "rejected"


def test_crashed_audit_leaves_a_failed_run_with_the_steps_before_the_crash(mini_testbed, monkeypatch):
    """The run is open from the start and logs every batch: a crash on batch 3 leaves a
    FAILED run holding W_t for the 2 batches before it, and the error reaches the caller."""
    import trainspotter.flows.audit as audit_module
    from trainspotter.testbeds.build import split_path
    from trainspotter.flows.tracking import tracking_uri

    real = audit_module.extract_batch

    def flaky(passages, model, reference, access, features, chunk=0, answers=False):
        if chunk == 2:
            raise RuntimeError("model server went away")
        return real(passages, model, reference, access, features, chunk=chunk, answers=answers)

    monkeypatch.setattr(audit_module, "extract_batch", flaky)
    config = audit_module.AuditConfig(
        name="crash-mini", suspect=str(split_path("mini", "nonmember")),
        heldout=str(split_path("mini", "heldout")), model="testbed:mini",
        reference="testbed:mini/reference", batch_pairs=4)
    with pytest.raises(RuntimeError, match="went away"):
        audit_module.audit_flow(config)
    client = MlflowClient(tracking_uri())
    [run] = client.search_runs([client.get_experiment_by_name("audit/crash-mini").experiment_id])
    assert run.info.status == "FAILED"
    wealth = client.get_metric_history(run.info.run_id, "wealth")
    assert sorted(m.step for m in wealth) == list(range(1, 9))


def test_an_audit_reads_each_file_once(demo, monkeypatch):
    """The flow reads the suspect and held-out files once (logged as the run's inputs, then
    audited); files its caller already read (the CLI, for its checks) are not read again."""
    import sys
    from collections import Counter

    from trainspotter.testbeds.build import split_path
    from trainspotter.flows.audit import AuditConfig, run_audit

    audit_module = sys.modules["trainspotter.loop.inputs"]  # where the audit reads its files
    reads, load = Counter(), audit_module.load_passages
    monkeypatch.setattr(audit_module, "load_passages", lambda path: reads.update([str(path)]) or load(path))
    paths = str(split_path("mini", "member")), str(split_path("mini", "heldout"))
    config = AuditConfig(name="read-once", suspect=paths[0], heldout=paths[1], model="testbed:mini",
                         reference="testbed:mini/reference")
    first = run_audit(config)
    assert reads == {paths[0]: 1, paths[1]: 1}
    reads.clear()
    again = run_audit(config, passages={p: load(p) for p in paths})
    assert reads == {} and again["e_value"] == pytest.approx(first["e_value"]) == demo["members"]["e_value"]
