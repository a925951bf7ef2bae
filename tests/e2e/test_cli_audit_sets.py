"""`trainspotter audit` with several --suspect sets on the `mini` testbed: e-BH's decision in
JSON and in the table, one parent MLflow run with a nested run per set, the same decision
from the library, and bad sets as one error line."""

import json
import os

import pytest
from cli_process import run_cli



def run(*args, env=None):
    return run_cli(list(args), env=env or os.environ.copy(), timeout=600)


@pytest.fixture(scope="module")
def files(mini_testbed):
    return {k: str(mini_testbed / f"{k}.jsonl") for k in ("member", "nonmember", "heldout")}


def test_members_rejected_nonmembers_not_at_fdr_alpha(files, tmp_path):
    from mlflow.tracking import MlflowClient

    from trainspotter import AuditSetsConfig, audit_sets
    from trainspotter.flows.report import render_report
    from trainspotter.flows.tracking import tracking_uri

    args = ["audit", "--suspect", files["member"], "--suspect", files["nonmember"], "--heldout", files["heldout"],
            "--model", "testbed:mini", "--reference", "testbed:mini/reference", "--name", "two-sets"]
    out = run(*args, "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout)
    member, nonmember = r["sets"]
    assert (member["label"], member["verdict"], nonmember["label"], nonmember["verdict"]) == \
        ("member", "trained on", "nonmember", "no evidence")
    assert r["alpha"] == 0.05 and r["thresholds"] == [40.0, 20.0] and r["rejections"] == 1
    # the member set stopped querying at K/α = 40; the non-members ran to the end of the data
    assert member["e_value"] >= 40 and member["result"]["stopped_by"] == "rejected"
    assert nonmember["e_value"] < 20 and nonmember["result"]["pairs_used"] == 80
    assert "greedy tokens only" not in nonmember["result"]["explanation"]  # gray-box: no black-box caveat

    client = MlflowClient(tracking_uri())
    runs = client.search_runs([client.get_experiment_by_name("audit/two-sets").experiment_id])
    [parent] = [x for x in runs if "mlflow.parentRunId" not in x.data.tags]
    children = {x.info.run_name: x for x in runs if x.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert parent.info.run_id == r["run_id"] and len(runs) == 3 and set(children) == {"member", "nonmember"}
    assert {c.info.run_id for c in children.values()} == {member["run_id"], nonmember["run_id"]}
    child = children["member"].data
    assert child.params["test.alpha"] == "0.025" and child.params["blind_alpha"] == "0.05"
    assert child.tags["ebh_verdict"] == "trained on" and child.metrics["e_value"] == pytest.approx(member["e_value"])
    assert parent.data.metrics["rejections"] == 1.0 and all(x.info.status == "FINISHED" for x in runs)
    page = render_report(r["run_id"], tmp_path / "sets.html").read_text()
    assert "2 suspect sets" in page and "Trained on: member" in page and member["run_id"] in page

    # the library call, without Prefect or MLflow, decides the same on the same features
    lib = audit_sets(AuditSetsConfig(name="two-sets-lib", suspect=[files["member"], files["nonmember"]],
                                     heldout=files["heldout"], model="testbed:mini",
                                     reference="testbed:mini/reference"))
    assert [(s.label, s.verdict) for s in lib.sets] == [("member", "trained on"), ("nonmember", "no evidence")]
    assert [s.e_value for s in lib.sets] == pytest.approx([member["e_value"], nonmember["e_value"]], rel=1e-9)

    table = run(*args, env=os.environ | {"COLUMNS": "120"})
    text = " ".join(table.stdout.split())  # rich folds the caption
    assert table.returncode == 0, table.stderr[-2000:]
    assert "2 suspect sets, e-BH at FDR α = 0.05" in text and "Decision by e-BH (Wang & Ramdas 2022)" in text
    decisions = [line.strip("│ ").rpartition("│")[2].strip() for line in table.stdout.splitlines()
                 if line.startswith(("│ member ", "│ nonmember "))]
    assert decisions == ["trained on", "no evidence"], table.stdout  # each whole, on its row's line


@pytest.mark.parametrize("sets,expected", [
    (("member", "member"), "{member}: given twice as a suspect set"),
    (("member", "heldout"), "{heldout} and {heldout}: 80 passages in both sets"),
])
def test_bad_sets_are_one_error_line_naming_the_file(files, sets, expected):
    args = [a for s in sets for a in ("--suspect", files[s])]
    out = run("audit", *args, "--heldout", files["heldout"], "--model", "testbed:mini")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("error: " + expected.format(**files))
