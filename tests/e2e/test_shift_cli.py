"""Held-out shift through the command line: an audit whose held-out set differs from its
suspect set ends "inconclusive" (exit 3) and says why, in the table, the JSON, MLflow and the
report; the shift suite runs as `trainspotter benchmark --suite shift`."""

import json
import os
import re
import string
import subprocess
import sys

INCONCLUSIVE_EXIT = 3


def run(*args):
    return subprocess.run([sys.executable, "-m", "trainspotter.flows.cli", *args], capture_output=True, text=True,
                          env=os.environ | {"COLUMNS": "200"}, timeout=900)


def _reformatted(src, dst):
    """The same kind of passages as another pipeline would store them: lower-cased, without
    punctuation (a formatting shift that has nothing to do with training)."""
    table = str.maketrans("", "", string.punctuation)
    rows = [json.loads(line) for line in src.read_text().splitlines()]
    dst.write_text("".join(json.dumps({"id": r["id"], "text": r["text"].lower().translate(table)}) + "\n"
                           for r in rows))
    return str(dst)


def test_shifted_held_out_set_is_inconclusive_and_queries_nothing(tmp_path, mini_testbed):
    heldout = _reformatted(mini_testbed / "heldout.jsonl", tmp_path / "heldout.jsonl")
    args = ["audit", "--suspect", str(mini_testbed / "nonmember.jsonl"), "--heldout", heldout,
            "--model", "testbed:mini", "--reference", "testbed:mini/reference", "--name", "shifted"]
    out = run(*args, "--json")
    assert out.returncode == INCONCLUSIVE_EXIT, out.stderr[-2000:]
    r = json.loads(out.stdout)
    assert r["verdict"] == "inconclusive" and r["reject"] is False and r["blind"]["fired"] is True
    assert r["blind"]["e_value"] >= 20 and r["blind"]["pairs_available"] == 80
    assert r["stopped_by"] == "shift" and r["pairs_queried"] == 0  # no model query was spent
    assert "What to do" in r["explanation"] and any("upper" in d for d in r["blind"]["differences"])

    # "continue" queries the model anyway, same verdict; the table says it in words.
    out = run(*args, "--shift-check", "continue")
    assert out.returncode == INCONCLUSIVE_EXIT, out.stderr[-2000:]
    text = re.sub(r"\s+", " ", out.stdout)
    assert "inconclusive: held-out differs from suspect" in text
    assert "Inconclusive: the held-out set differs from the suspect set" in text
    run_id = re.search(r"MLflow run (\w+)", text).group(1)

    from mlflow.tracking import MlflowClient

    from trainspotter.flows.tracking import tracking_uri

    logged = MlflowClient(tracking_uri()).get_run(run_id).data
    assert logged.tags["verdict"] == "inconclusive" and logged.metrics["blind_fired"] == 1.0
    assert logged.metrics["model_reject"] in (0.0, 1.0) and logged.metrics["pairs_queried"] > 0
    assert logged.metrics["blind_e_value"] == r["blind"]["e_value"]  # the check is deterministic
    page = tmp_path / "report.html"
    assert run("report", run_id, "--out", str(page)).returncode == 0
    assert "<b>Inconclusive</b>" in page.read_text()


def test_calibrated_feature_set_needs_a_reference(mini_testbed):
    held = str(mini_testbed / "heldout.jsonl")
    out = run("audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout", held,
              "--model", "testbed:mini", "--features", "calibrated")
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: option --features: the calibrated (reference-relative) feature set needs a reference model")
    out = run("audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout", held, "--model",
              "testbed:mini", "--reference", "testbed:mini/reference", "--features", "calibrated", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout)
    assert r["verdict"] == "trained on" and r["features"] == ["gray_ref_ratio", "gray_ref_diff", "gray_ez"]


def test_shift_suite_from_the_command_line(tmp_path, mini_testbed):
    out = run("benchmark", "--suite", "shift", "--testbed", "mini", "--trials", "10", "--null-trials", "10",
              "--limit", "40", "--out", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout)
    kinds = [(s["kind"], s["suspect"]) for s in res["scenarios"]]
    assert len(kinds) == 10 and {k for k, _ in kinds} == {"length", "topic", "period", "source", "position"}
    length = [s for s in res["scenarios"] if s["kind"] == "length"]
    assert all(s["blind"]["rate"] == 1.0 for s in length)  # 64 vs 32 tokens: seen at once
    for s in res["scenarios"]:  # with the guard, "trained on" needs the blind check silent
        for t in s["tests"].values():
            assert t["guarded"]["rate"] <= min(t["model"]["rate"], 1 - s["blind"]["rate"]) + 1e-12
    assert {r["suspect"] for r in res["iid"]} == {"member", "nonmember"}
    assert (tmp_path / "shift.md").read_text().startswith("# Held-out shift suite")
    assert (tmp_path / "shift.png").stat().st_size > 0
