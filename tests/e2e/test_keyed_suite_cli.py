"""`trainspotter benchmark --suite keyed` (issue 53 item 5) on `mini-pretrain-keyed`, as a user runs it
at 80 columns: the tables, the JSON report, the plot and the MLflow run, the options given reaching
the suite; a testbed without a release, or two levels, is one error line. The testbed here trains
three batches (tests/brief_training.py, in a root of its own): nothing asserts power, only that
every row is there, computed on the settings given, and what holds whatever the model learnt."""

import json
import os
import re

import pytest
from brief_training import built_briefly
from cli_process import run_cli

TABLE = set("│┃━─┏┗┡└")
SETTINGS = {"random_keys": 30, "black_tokens": 256, "prompt_tokens": 16, "new_tokens": 32, "gray_passages": 4,
            "samples": 4}


def run(*args, root=None):
    env = os.environ | {"COLUMNS": "80"} | ({"TRAINSPOTTER_ARTIFACTS": str(root)} if root else {})
    return run_cli([str(a) for a in args], env=env, timeout=1200)


def one_error_line(out) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return lines[0]


@pytest.fixture(scope="module")
def keyed_root(tmp_path_factory):
    """`mini-pretrain-keyed` built, briefly trained, in an artifacts root of this module's own."""
    root = tmp_path_factory.mktemp("keyed-suite")
    built_briefly("mini-pretrain-keyed", root)
    return root


def test_keyed_suite_from_the_command_line(keyed_root, tmp_path):
    config = tmp_path / "keyed.yaml"
    config.write_text("".join(f"{k}: {v}\n" for k, v in SETTINGS.items()))
    out = run("benchmark", "--suite", "keyed", "--testbed", "mini-pretrain-keyed", "--trials", 2, "--alphas", 0.1,
              "--seed", 3, "--config", config, "--out", tmp_path / "out", root=keyed_root)
    assert out.returncode == 0, out.stderr[-3000:]
    table = [line for line in out.stdout.splitlines() if set(line) & TABLE]
    assert table and max(len(line) for line in table) <= 80
    cells = [[c.strip() for c in re.split("[│┃]", line)[1:-1]] for line in table]
    rows = {tuple(c[:2]): c for c in cells if c}
    # the power rows, with the budgets
    assert rows[("black", "256 tokens")][2] and rows[("choice", "256 tokens")][2] and rows[("gray", "4 passages")][2]
    for model in ("target", "reference"):
        assert re.fullmatch(r"[01]\.\d{3}", rows[(model, "black")][2]) and (model, "gray") in rows
        assert re.fullmatch(r"[01]\.\d{3}", rows[(model, "choice")][2])

    res = json.loads((tmp_path / "out" / "keyed-suite.json").read_text())
    for access, budget in (("black", "256 tokens"), ("choice", "256 tokens"), ("gray", "4 passages")):
        assert rows[(access, budget)][2:4] == [f"{res[access]['tpr']:.2f}", f"{res[access]['flat_tpr']:.2f}"]
    assert res["config"] | SETTINGS == res["config"] and (res["config"]["trials"], res["config"]["test"]["alpha"],
                                                          res["config"]["seed"]) == (2, 0.1, 3)
    assert res["black"]["trials"] == res["choice"]["trials"] == res["gray"]["trials"] == 2
    assert res["black"]["budget"] == res["choice"]["budget"] == 256 and res["gray"]["budget"] == 4
    for probe in ("black", "choice"):  # a unit of the release counted once ever
        assert 0 < res[probe]["mean_units"] <= res["release_units"]
    # forced choice: 4 draws a unit, each at most a token per point where the forms part, within 256 tokens
    assert res["choice"]["mean_units"] <= 256 / 4
    assert res["h0"]["reference, release prompts"]["black"]["keys"] == 30
    for model in ("target", "reference"):
        for access in ("black", "choice", "gray"):
            row = res["h0"][model][access]
            assert row["keys"] == 30 and row["units"] > 0
            for test in ("eprocess", "fixed_n", "stamp", "rank"):
                assert row[test]["rate"] == row[test]["rejected"] / 30
    # gray-box forms are scored relative to the testbed's reference: the reference against itself
    # gives every form the same share, so under any key it bets nothing and no test rejects
    gray_ref = res["h0"]["reference"]["gray"]
    assert all(gray_ref[t]["rejected"] == 0 for t in ("eprocess", "fixed_n", "stamp"))
    assert logged_panels(tmp_path / "out" / "keyed-suite.md") == ["black, continuations", "black, forced choice",
                                                                  "gray"]
    md = (tmp_path / "out" / "keyed-suite.md").read_text()
    assert md.startswith("# Keyed suite: testbed `mini-pretrain-keyed`")
    assert "| black, continuations | 256 generated tokens |" in md and "| black, forced choice | 256 generated" in md
    assert (tmp_path / "out" / "evidence.png").stat().st_size > 0

    from mlflow.tracking import MlflowClient

    run_id = re.search(r"MLflow run (\w+)", out.stdout).group(1)
    client = MlflowClient(f"sqlite:///{keyed_root / 'mlflow.db'}")
    logged = client.get_run(run_id)
    assert logged.data.metrics["black.tpr"] == res["black"]["tpr"] and logged.data.params["random_keys"] == "30"
    assert {a.path for a in client.list_artifacts(run_id)} == {"keyed-suite.md", "keyed-suite.json", "evidence.png"}


def logged_panels(md):
    """The power table's rows, in order."""
    rows = [line.split("|")[1].strip() for line in md.read_text().split("H0:")[0].splitlines() if line.startswith("| ")]
    return [r for r in rows if r not in ("access", "---")]


def test_a_testbed_without_a_release_or_two_levels_is_one_error_line():
    line = one_error_line(run("benchmark", "--suite", "keyed", "--testbed", "mini"))
    assert line.startswith("error: option --testbed: --suite keyed needs a keyed testbed (tiny-pretrain-keyed, ")
    assert line.endswith("; mini is not one")
    assert one_error_line(run("benchmark", "--suite", "keyed", "--testbed", "mini-pretrain-keyed", "--alphas",
                              "0.05,0.1")) == "error: option --alphas '0.05,0.1': --suite keyed takes one level"
