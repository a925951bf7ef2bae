"""A newcomer's first hour at 80 columns (issue 52): what the command prints when a model spec
names a folder that is not a model, when an audit says "trained on", and the smaller rough
edges. Each test runs the command as a user does (a process of its own, forked from the tests'
warm interpreter: tests/cli_process.py; or typer's runner where the audit's features are
constructed) and asserts the line the user sees."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from beacons import STAND_IN, STAND_IN_FILE
from cli_process import run_cli

NARROW = {"COLUMNS": "80", "TERMINAL_WIDTH": "80"}


def run(*args, artifacts: Path | None = None, env: dict | None = None):
    extra = NARROW | ({"TRAINSPOTTER_ARTIFACTS": str(artifacts)} if artifacts else {}) | (env or {})
    return run_cli(list(map(str, args)), env=os.environ | extra, timeout=600)


# ------------------------------------------------------------------ item 1: a folder that is not a model

def _not_models(root: Path, mini: Path) -> dict[str, tuple[Path, str]]:
    """Real folders a user may name by mistake, and what each lacks."""
    data = root / "data"
    data.mkdir()
    shutil.copy(mini / "member.jsonl", data)
    config_only = root / "config-only"
    config_only.mkdir()
    shutil.copy(mini / "target" / "config.json", config_only)
    no_tokenizer = root / "no-tokenizer"
    shutil.copytree(mini / "target", no_tokenizer, ignore=shutil.ignore_patterns("tokenizer*"))
    fake = root / "model.gguf"
    fake.write_text("not a gguf\n")
    weights = "no weights (*.safetensors or pytorch_model*.bin)"
    tokenizer = "no tokenizer (tokenizer.json, tokenizer.model or vocab.json)"
    return {"data": (data, f"has no config.json, {weights} and {tokenizer}"),
            "config-only": (config_only, f"has {weights} and {tokenizer}"),
            "no-tokenizer": (no_tokenizer, f"has {tokenizer}"),
            "gguf": (fake, "is not a GGUF file (it does not start with the GGUF header)")}


@pytest.mark.parametrize("case", ["data", "config-only", "no-tokenizer", "gguf"])
def test_a_folder_that_is_not_a_model_is_one_line_before_any_run(mini_testbed, tmp_path, case):
    """It was a 401-line Prefect and rich traceback after ~25 s, ending in advice to install
    sentencepiece, and a FAILED MLflow run per attempt."""
    path, problem = _not_models(tmp_path, mini_testbed)[case]
    artifacts = tmp_path / "artifacts"
    out = run("audit", "--suspect", mini_testbed / "member.jsonl", "--heldout", mini_testbed / "heldout.jsonl",
              "--model", f"hf:{mini_testbed / 'target'}", "--reference", f"hf:{path}", artifacts=artifacts)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.splitlines() == [f"error: model spec 'hf:{path}': {path} {problem}"], out.stderr
    # no MLflow store, no Prefect database or result: nothing ran
    assert out.stdout == "" and not [p for p in artifacts.rglob("*") if p.is_file()]


def test_serve_and_extract_check_the_folder_too(mini_testbed, tmp_path):
    path, problem = _not_models(tmp_path, mini_testbed)["config-only"]
    line = f"error: model spec 'hf:{path}': {path} {problem}"
    serve = run("serve", f"hf:{path}", "--port", "0", artifacts=tmp_path / "a")
    extract = run("extract", "--data", mini_testbed / "member.jsonl", "--model", f"hf:{path}",
                  "--out", tmp_path / "f.parquet", artifacts=tmp_path / "a")
    for out in (serve, extract):
        assert out.returncode == 2 and out.stderr.splitlines() == [line], out.stderr
    api = run("extract", "--data", mini_testbed / "member.jsonl", "--model",
              f"openai:m@http://127.0.0.1:9/v1?tokenizer={tmp_path / 'data'}", "--out", tmp_path / "f.parquet")
    assert api.returncode == 2 and api.stderr.splitlines() == [
        f"error: model spec 'openai:m@http://127.0.0.1:9/v1': the tokenizer {tmp_path / 'data'} has no tokenizer "
        f"(tokenizer.json, tokenizer.model or vocab.json)"], api.stderr


# ------------------------------------------------------------------ item 2: "trained on" explains itself

def invoke(*args, env=None):
    from typer.testing import CliRunner

    from trainspotter.flows.cli import app

    return CliRunner().invoke(app, list(map(str, args)), env=NARROW | (env or {}))


def constructed_features(mini: Path, shift: float):
    """An ``extract_fn`` in place of a model's: gray_ppl ~ N(0, 1) for held-out passages and
    N(-shift, 1) for members (member-like), drawn once per passage id; shift 0: no difference."""
    import numpy as np

    from trainspotter.data import load_passages

    rng = np.random.default_rng(7)
    table = {("suspect", p["id"]): float(rng.normal() - shift) for p in load_passages(mini / "member.jsonl")}
    table |= {("heldout", p["id"]): float(rng.normal()) for p in load_passages(mini / "heldout.jsonl")}

    def extract_fn(passages: list[dict], batch_no: int) -> list[dict]:
        half = len(passages) // 2  # each batch: its suspect passages, then its held-out ones
        return [{"gray_ppl": table["suspect" if i < half else "heldout", p["id"]]} for i, p in enumerate(passages)]

    return extract_fn


@pytest.fixture
def target_trained_on_members(monkeypatch, mini_testbed):
    """The target's features separate members from held-out passages (shift 3: rejects within a
    few pairs, far from the threshold); the placebo model's (the reference) do not."""
    import trainspotter.flows.audit as audit_flow

    def extract_fn(config, remote):
        return constructed_features(mini_testbed, 3.0 if config.model.text == "testbed:mini" else 0.0)

    monkeypatch.setattr(audit_flow, "_extract_fn", extract_fn)
    return mini_testbed


def test_trained_on_says_what_it_rests_on_and_the_next_step(target_trained_on_members, tmp_path, monkeypatch):
    """"Trained on" printed only the fixed-n p-value note; its explanation (blind check quiet,
    placebo e-value, so the difference is the target's own) and the next step (keep and sign the
    record, verify it) were only in --json and the report. The verify hint is pasted as printed:
    `trainspotter` is not on PATH after `bash scripts/demo.sh`."""
    mini = target_trained_on_members
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # the venv's bin folder is not on it
    args = ["audit", "--suspect", mini / "member.jsonl", "--heldout", mini / "heldout.jsonl", "--model",
            "testbed:mini", "--reference", "testbed:mini/reference", "--name", "explained"]
    out = invoke(*args, "--record", "r.json")
    assert out.exit_code == 0, out.output[-3000:]
    r = invoke(*args, "--json").stdout
    import json

    r = json.loads(r)
    assert r["verdict"] == "trained on" and r["placebo"]["ran"] and not r["placebo"]["fired"]
    text = " ".join(out.stdout.split())  # rich wraps the paragraph at 80 columns
    placebo, blind = r["placebo"], r["blind"]
    assert (f"explained: The model's e-value ({r['e_value']:.3g} after {r['pairs_used']} pairs) reached 1/α = 20: "
            f"evidence that the suspect set was used to train the model. The blind check, which sees only the "
            f"texts, could not tell the sets apart (blind e-value {blind['e_value']:.3g} after "
            f"{blind['pairs_used']} pairs)") in text
    assert (f"(testbed:mini/reference, in the target's place) could not tell them apart either (placebo e-value "
            f"{placebo['e_value']:.3g} after {placebo['pairs_used']} pairs), so the difference is the target's "
            f"own. Next: keep this audit's sealed record") in text
    assert "--sign KEY.pem signs it" in text and "`trainspotter verify FILE`" in text
    assert max(len(line) for line in out.stdout.splitlines() if not line.startswith("  plot: ")) <= 80
    # the hint, pasted as printed, runs and verifies the record
    hint = out.stdout.splitlines()[-1]
    assert hint == f"  {Path(sys.executable).parent / 'trainspotter'} verify r.json", out.stdout
    pasted = subprocess.run(hint, shell=True, capture_output=True, text=True, cwd=tmp_path, timeout=300,
                            env=os.environ | NARROW)
    assert pasted.returncode == 0 and "verified: record" in pasted.stdout, pasted.stdout + pasted.stderr


def test_the_verify_hint_is_the_plain_name_where_it_is_on_path(monkeypatch, tmp_path):
    from trainspotter.flows.cli.common import own_command

    venv_bin = Path(sys.executable).parent
    monkeypatch.setenv("PATH", f"{venv_bin}:/usr/bin:/bin")
    assert own_command() == "trainspotter"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(venv_bin.parent.parent)  # the repository: the path a user types from there
    assert own_command() == os.path.join(venv_bin.parent.name, "bin", "trainspotter")


# ------------------------------------------------------------------ item 6: verify names the cause

def test_verify_names_the_cause_and_an_unsigned_record_is_not_ok(target_trained_on_members, tmp_path, monkeypatch):
    """After `alpha` was edited, the last line named the symptom ("pair 10: recorded, but the
    replayed test rejected at pair 9") and the cause only in a table row; an unsigned record showed
    "signature │ ok"; "160 passage texts" stood beside "every feature of 178 passages"."""
    import json

    mini = target_trained_on_members
    monkeypatch.chdir(tmp_path)
    out = invoke("audit", "--suspect", mini / "member.jsonl", "--heldout", mini / "heldout.jsonl", "--model",
                 "testbed:mini", "--name", "sealed", "--assume-exchangeable", "--record", "r.json")
    assert out.exit_code == 0, out.output[-3000:]
    record = json.loads(Path("r.json").read_text())
    ok = invoke("verify", "r.json")
    assert ok.exit_code == 0, ok.output
    assert re.search(r"^verifying .* 6/6 done ", ok.stderr, re.M), ok.stderr  # its stages, as they run
    rows = {m[0]: (m[1], m[2]) for m in re.findall(r"^│ (\w[\w ]*?) +│ (\w+) +│ (.*?) *│$", ok.stdout, re.M)}
    assert rows["signature"][0] == "none" and rows["signature"][1].startswith("unsigned record: nothing shows who")
    n = {side: len(record["passages"][side]) for side in ("suspect", "heldout")}
    checks = {c["name"]: c for c in json.loads(invoke("verify", "r.json", "--json").stdout)["checks"]}
    assert checks["passages"]["detail"] == (f"the texts of {n['suspect'] + n['heldout']} passages ({n['suspect']} "
                                            f"suspect, {n['heldout']} held-out) match their sha256")
    assert checks["signature"]["ok"] and not checks["signature"]["done"]
    record["config"]["test"]["alpha"] = 0.2
    Path("edited.json").write_text(json.dumps(record))
    edited = invoke("verify", "edited.json")
    first = json.loads(invoke("verify", "edited.json", "--json").stdout)["first_failure"]
    assert edited.exit_code == 1 and first["name"] != "digest", first  # a replay fails first: the symptom
    last = " ".join(edited.stdout.split()).rpartition("does not verify: ")[2]
    assert last == ("section 'config' does not match its sha256 (changed after sealing), and so "
                    + " ".join(first["detail"].split())), edited.stdout


def test_a_truncated_record_says_where_in_plain_words(tmp_path):
    path = tmp_path / "r.json"
    text = '{"format": "trainspotter-audit-record", "digest": "ab'
    path.write_text(text)
    out = run("verify", path)
    column = text.index('"ab') + 1  # the unterminated string's opening quote, counted from 1
    assert out.returncode == 2 and out.stderr.splitlines() == [
        f"error: {path}: not a complete JSON document (Unterminated string starting at line 1 column {column}): "
        f"truncated, or not an audit record"], out.stderr


# ------------------------------------------------------------------ item 5: tables at 80 columns

def _cells(stdout: str, first: str) -> list[str]:
    """The cells of the table row that starts with ``first`` (one line: no value wraps)."""
    row = next(line for line in stdout.splitlines() if line.startswith(f"│ {first} "))
    return [c.strip() for c in row.strip("│").split("│")]


def test_the_audit_table_keeps_every_value_whole_and_names_model_and_access(target_trained_on_members):
    """At 80 columns the decision cell wrapped "reject / H0: / trained / on" over four lines while
    other columns had room, and the table named neither the model nor the access mode."""
    mini = target_trained_on_members
    out = invoke("audit", "--suspect", mini / "member.jsonl", "--heldout", mini / "heldout.jsonl", "--model",
                 "testbed:mini", "--name", "whole", "--assume-exchangeable")
    assert out.exit_code == 0, out.output[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].strip() == "Audit 'whole' of testbed:mini, gray-box (α = 0.05)"
    cells = _cells(out.stdout, "whole")
    assert cells[0] == "whole" and cells[-1] == "trained on" and len(cells) == 7  # one line: nothing wrapped
    # the plot's path and the verify command have lines of their own, never broken
    assert max(len(line) for line in lines if not (line.startswith("  plot: ") or " verify " in line)) <= 80


def test_a_row_that_does_not_fit_goes_vertical_with_each_value_on_its_line():
    from rich.console import Console

    from trainspotter.flows.cli.audit import _results_table

    r = {"set": "negative-control", "pairs_used": 80, "pairs_available": 80, "e_value": 3.2, "alpha": 0.05,
         "p_value": 0.31, "baseline_p_value": 0.4, "blind": {"e_value": 25.0}, "verdict": "inconclusive",
         "guard": "blind", "usage": {"requests": 12.0, "total_tokens": 3400.0, "cost": 0.0017, "served_from": "cache"}}
    console = Console(width=80, record=True, color_system=None)
    console.print(_results_table([r], "T"))
    text = [line.rstrip() for line in console.export_text().splitlines()]
    assert "  decision:             inconclusive: held-out differs from suspect" in text
    assert "  API usage:            12 requests, 3400 tokens, cost 0.0017 (from the cache)" in text
    assert max(map(len, text)) <= 80


def test_assets_at_80_columns_break_no_path():
    from trainspotter.assets import assets_as_dicts

    out = run("assets")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for a in assets_as_dicts():
        where = a["path"] if a["installed"] else a["install"]
        assert f"{a['name']}: {where}" in lines  # whole, on a line of its own
    assert max(len(line) for line in lines if not line.startswith(tuple(a["name"] + ":"
                                                                          for a in assets_as_dicts()))) <= 80


# ------------------------------------------------------------------ item 8: smaller rough edges

def test_test_says_it_is_the_models_test_alone(tmp_path):
    """`test` printed "reject H0 (suspect set used in training)" with none of the audit's guards."""
    import numpy as np

    rng = np.random.default_rng(1)
    rows = [f"{s},{v:.6f}" for s, shift in (("suspect", -3.0), ("heldout", 0.0)) for v in rng.normal(shift, 1, 40)]
    table = tmp_path / "features.csv"
    table.write_text("set,gray_ppl\n" + "\n".join(rows) + "\n")
    out = invoke("test", table)
    assert out.exit_code == 0, out.output
    assert _cells(out.stdout, "decision") == ["decision", "reject H0: the features separate the sets"]
    text = " ".join(out.stdout.split())
    assert ("This is the model's test alone, on the table's features: none of the audit's guards ran") in text
    assert "not that the suspect set was trained on. `trainspotter audit` runs the guards." in text


def test_simulate_refuses_null_with_pollution_and_version_prints(tmp_path):
    out = run("simulate", tmp_path / "missing.parquet", "--null", "--pollution", "0,0.1")
    assert out.returncode == 2 and out.stderr.splitlines() == [
        "error: option --null: does not apply with --pollution, which replaces part of the held-out stream of "
        "suspect-vs-held-out trials; give one or the other"], out.stderr
    from trainspotter import __version__

    version = run("--version")
    assert version.returncode == 0 and version.stdout == f"trainspotter {__version__}\n"


def test_mlflow_names_the_run_and_the_files_wherever_it_started(target_trained_on_members, monkeypatch):
    """MLflow params kept relative paths and every default run was named `audit`."""
    import json

    import mlflow

    mini = target_trained_on_members
    monkeypatch.chdir(mini)  # the user's files named relative to here
    out = invoke("audit", "--suspect", "member.jsonl", "--heldout", "heldout.jsonl", "--model", "testbed:mini",
                 "--assume-exchangeable", "--json")
    assert out.exit_code == 0, out.output[-3000:]
    r = json.loads(out.stdout)
    from trainspotter.flows.tracking import tracking_uri

    run = mlflow.tracking.MlflowClient(tracking_uri()).get_run(r["run_id"])
    assert run.info.run_name == "audit: member vs heldout on testbed:mini"
    here = os.getcwd()
    assert run.data.params["suspect"] == os.path.join(here, "member.jsonl")
    assert run.data.params["heldout"] == os.path.join(here, "heldout.jsonl") and run.data.params["model"] == "testbed:mini"


def test_a_twins_no_evidence_suggests_the_twins_features(mini_testbed, tmp_path):
    """It suggested `--features full`, never `--features twins` (the set made for twins)."""
    import json

    folder, data = tmp_path / "twins", tmp_path / "unreleased.jsonl"
    data.write_text("".join((mini_testbed / "heldout.jsonl").read_text().splitlines(keepends=True)[:24]))
    made = run("twins", "make", data, "--out", folder, "-k", "2", "--no-similarity", "--beacon-round", STAND_IN.round)
    assert made.returncode == 0, made.stderr
    assert re.search(r"^passages rewritten .* 24/24 ", made.stderr, re.M), made.stderr  # a lexical run too
    assert run("twins", "release", folder, "--beacon", STAND_IN_FILE).returncode == 0
    out = run("audit", "--twins", folder, "--model", "testbed:mini", "--alpha", "0.01", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout)
    assert r["verdict"] == "no evidence", r["explanation"]  # nobody trained on any version (false failure ≤ α)
    assert "the twins feature set (--features twins: the log-probs where each passage differs" in r["explanation"]
    assert "--features full" not in r["explanation"]


# ------------------------------------------------------------------ item 3: progress where a user waits

def test_the_demo_says_what_it_does_at_once_then_each_stage(mini_testbed):
    """The demo printed nothing for ~4 minutes on its first run. Its first line comes before
    Prefect and MLflow start; then a line per stage: the testbed (its training steps when it is
    built), then each audit's pairs and e-value."""
    out = run("demo", "--testbed", "mini", "--max-pairs", "8")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stderr.splitlines()
    assert lines[0].startswith("demo: two audits of testbed 'mini' (members: must say trained on;"), lines
    assert re.search(r"^testbed mini +━+ 1/1 ", out.stderr, re.M), out.stderr
    for label in ("members", "negative-control"):
        line = re.search(rf"^auditing {label}: pairs queried +━+ (\d+)/8 e-value ([\d.]+) ", out.stderr, re.M)
        assert line and int(line[1]) <= 8, out.stderr


def test_testbed_build_shows_each_models_training(mini_testbed, monkeypatch):
    """`testbed build` trained for minutes without a line; the builder's progress(stage, step,
    steps) is each model's line (a stand-in builder here: the real one trains for minutes)."""
    import trainspotter.tasks.testbed as tasks

    def build(config, force=False, progress=None):
        for stage, steps in (("reference", 3), ("target", 5)):
            for i in range(1, steps + 1):
                progress(stage, i, steps)
        return mini_testbed

    monkeypatch.setattr(tasks, "build_testbed", build)
    out = invoke("testbed", "build", "mini")
    assert out.exit_code == 0, out.output
    for label, steps in (("testbed mini: training the reference", 3), ("testbed mini: training the target", 5)):
        assert re.search(rf"^{label} +━+ {steps}/{steps} ", out.stderr, re.M), out.stderr


def test_benchmark_shows_its_stages(mini_testbed):
    out = run("benchmark", "--testbed", "mini", "--methods", "loss,min_k", "--limit", "8", "--trials", "4",
              "--n-max", "8", "--strategies", "ons", "--payoffs", "diff", "--null-trials", "4", "--alphas", "0.05",
              "--cost-samples", "0", "--n-boot", "0", "--perturbation-kinds", "none", "--di-access", "gray")
    assert out.returncode == 0, out.stderr[-3000:]
    for stage in (r"features: testbed:mini \(gray\) +━+ \d+/\d+", r"per-sample methods +━+ 2/2",
                  r"dataset inference trials +━+ 1/1"):
        assert re.search(rf"^{stage} ", out.stderr, re.M), (stage, out.stderr)
