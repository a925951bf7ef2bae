"""`trainspotter benchmark --suite twins` (issue 35 item 5) on `mini-pretrain-twins`: the table at
80 columns, the JSON report (the paired AUROC, every e-process row with its H0 control), the plot,
and the MLflow run holding them; a testbed without twins is one error line. Nothing here asserts
the power of the seconds-scale models, which train three batches here (tests/brief_training.py, in
an artifacts root of this module's own): only that every row is there and well-formed."""

import json
import os
import re

import pytest

from brief_training import built_briefly
from cli_process import run_cli

from trainspotter.evaluation.twins_suite import SUBSETS

TABLE = set("│┃━─┏┗┡└")


def run(*args, root=None):
    env = os.environ | {"COLUMNS": "80"} | ({"TRAINSPOTTER_ARTIFACTS": str(root)} if root else {})
    return run_cli([*args], env=env, timeout=1800)


@pytest.fixture(scope="module")
def twins_root(tmp_path_factory):
    """`mini-pretrain-twins` (k = 2) built, briefly trained, in an artifacts root of its own."""
    root = tmp_path_factory.mktemp("twins-suite")
    built_briefly("mini-pretrain-twins", root)
    return root


def test_twins_suite_from_the_command_line(tmp_path, twins_root):
    out = run("benchmark", "--suite", "twins", "--testbed", "mini-pretrain-twins", "--trials", "20", "--out",
              str(tmp_path), root=twins_root)
    assert out.returncode == 0, out.stderr[-3000:]
    table = [line for line in out.stdout.splitlines() if set(line) & TABLE]
    assert table and max(len(line) for line in table) <= 80
    cells = [[c.strip() for c in re.split("[│┃]", line)[1:-1]] for line in table]
    rows = {c[0]: c for c in cells if c}
    labels = [f"twins {m}, {s}" for s in SUBSETS for m in ("all", "one")] + ["unpaired, lean (online)",
                                                                            "unpaired, lean (fixed)"]
    assert set(labels) <= set(rows), rows.keys()
    assert all(re.fullmatch(r"[01]\.\d{3}", rows[label][4]) for label in labels)  # the H0 rate of each row
    assert "gray_ref_diff" in rows and re.fullmatch(r"[01]\.\d{3}", rows["gray_ref_diff"][1])
    res = json.loads((tmp_path / "twins-suite.json").read_text())
    assert res["k"] == 2 and res["trials"] == 20 and res["members"] >= 20 and res["nonmembers"] >= 20
    assert res["auroc"] and all(0 <= a["paired"] <= 1 and 0 <= a["unpaired"] <= 1 for a in res["auroc"].values())
    for name in SUBSETS:
        for mode in ("one", "mean"):
            h1, h0 = res["twins"][f"members, {mode}: {name}"], res["twins"][f"nonmembers, {mode}: {name}"]
            assert h1["trials"] == h0["trials"] == 20 and 0 <= h0["p_above_alpha"] <= 1
            assert 1 <= h1["mean_pairs_to_decision"] <= h1["pairs"] == res["members"]  # censored at all pairs
        # k = 2: one private version is every private version, trial by trial
        assert res["twins"][f"members, one: {name}"] == res["twins"][f"members, mean: {name}"]
    pooled = "unpaired, pooled control (H0, a fresh split per trial): lean (online)"
    assert 0 <= res["unpaired"][pooled]["p_above_alpha"] <= 1
    assert set(res["stamp"]) == {"log perplexity", "gray_ref_diff"}
    assert (tmp_path / "twins-suite.md").read_text().startswith("# Twins suite: testbed `mini-pretrain-twins`")
    assert (tmp_path / "decided.png").stat().st_size > 0
    run_id = re.search(r"MLflow run (\w+)", out.stdout).group(1)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{twins_root / 'mlflow.db'}")
    assert {a.path for a in client.list_artifacts(run_id)} >= {"twins-suite.md", "twins-suite.json", "decided.png"}
    metrics = client.get_run(run_id).data.metrics
    assert metrics["auroc.gray_ref_diff.paired"] == res["auroc"]["gray_ref_diff"]["paired"]
    assert metrics["twins.nonmembers_mean_lean.binom_p"] == res["twins"]["nonmembers, mean: lean"]["p_above_alpha"]


def test_a_testbed_without_twins_is_one_error_line():
    out = run("benchmark", "--suite", "twins", "--testbed", "mini", "--trials", "20")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: --testbed mini: the twins suite needs")
