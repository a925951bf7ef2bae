"""The `trainspotter` command as a user runs it (subprocesses)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "flows.cli"]


def run(*args, **kw):
    return subprocess.run(CLI + list(args), capture_output=True, text=True, env=os.environ.copy(),
                          timeout=600, **kw)


def test_assets_json_lists_installed_assets():
    out = run("assets", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["wikipedia-leads-en"]["installed"] and rows["wikipedia-leads-en"]["path"].endswith(".json")
    assert rows["all-minilm-l6-v2"]["installed"]


@pytest.mark.parametrize("content,expected", [
    (None, "no such file"),
    (b"", "no passages"),
    (b'{"text": "fine"}\n{"txt": "oops"}\n', ":2: no `text` field"),
    (b'{"text": "fine"}\n{"text": "\xff\xfe"}\n', ":2: not valid UTF-8"),
])
def test_audit_bad_input_is_one_clear_line(tmp_path, mini_testbed, content, expected):
    suspect = tmp_path / "suspect.jsonl"
    if content is not None:
        suspect.write_bytes(content)
    out = run("audit", "--suspect", str(suspect), "--heldout", str(mini_testbed / "heldout.jsonl"),
              "--model", "testbed:mini")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"error: {suspect}") and expected in lines[0]
    assert "Traceback" not in out.stderr + out.stdout


def test_audit_bad_model_spec_and_option(tmp_path, mini_testbed):
    held = str(mini_testbed / "heldout.jsonl")
    out = run("audit", "--suspect", held, "--heldout", held, "--model", "testbed:absent")
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: model spec 'testbed:absent': testbed 'absent' is not built; "
        "run `trainspotter testbed build absent`")
    out = run("audit", "--suspect", held, "--heldout", held, "--model", "testbed:mini", "--alpha", "1.5")
    assert out.returncode == 2 and "alpha" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_audit_json_on_user_files(tmp_path, mini_testbed):
    """Members vs held-out given as the user's own CSV file, capped at 40 pairs."""
    import pandas as pd

    from trainspotter.data import load_passages

    csv = tmp_path / "members.csv"
    pd.DataFrame(load_passages(mini_testbed / "member.jsonl")).to_csv(csv, index=False)
    out = run("audit", "--suspect", str(csv), "--heldout", str(mini_testbed / "heldout.jsonl"),
              "--model", "testbed:mini", "--reference", "testbed:mini/reference",
              "--max-pairs", "40", "--name", "user-files", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["reject"] is True and result["pairs_used"] <= 40
    assert result["e_value"] >= 20 and os.path.exists(result["plot"])
    # the plot is the run's own artifact in the file store, not a temporary copy
    assert Path(result["plot"]).as_uri() == result["artifacts"] + "/wealth.png"


def test_serve_json_reports_where_it_listens(mini_testbed):
    """`serve --port 0 --json`: one JSON line on stdout once the socket listens."""
    import urllib.request

    proc = subprocess.Popen(CLI + ["serve", "testbed:mini", "--port", "0", "--model-name", "mini", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        info = json.loads(proc.stdout.readline())
        assert info["model"] == "mini" and info["port"] > 0 and info["url"] == f"http://127.0.0.1:{info['port']}/v1"
        with urllib.request.urlopen(info["url"] + "/models", timeout=30) as r:
            assert [m["id"] for m in json.load(r)["data"]] == ["mini"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
