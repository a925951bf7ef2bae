"""A newcomer's first hour at 80 columns (issue 52): what the command prints when a model spec
names a folder that is not a model, when an audit says "trained on", and the smaller rough
edges. Each test runs the command as a user does (a subprocess, or typer's runner where the
audit's features are constructed) and asserts the line the user sees."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "trainspotter.flows.cli"]
NARROW = {"COLUMNS": "80", "TERMINAL_WIDTH": "80"}


def run(*args, artifacts: Path | None = None, env: dict | None = None):
    extra = NARROW | ({"TRAINSPOTTER_ARTIFACTS": str(artifacts)} if artifacts else {}) | (env or {})
    return subprocess.run(CLI + list(map(str, args)), capture_output=True, text=True, env=os.environ | extra,
                          timeout=600)


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
