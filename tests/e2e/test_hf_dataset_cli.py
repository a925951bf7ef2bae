"""`trainspotter audit` on a suspect set saved with Hugging Face `datasets`' `save_to_disk`
(README: accepted inputs), as a user runs it (a subprocess)."""

import json
import os

import pytest
from cli_process import run_cli



def test_audit_reads_a_saved_hf_dataset(tmp_path, mini_testbed):
    datasets = pytest.importorskip("datasets")  # in the `dev` extra (pyproject.toml)
    datasets.disable_progress_bars()
    from trainspotter.data import load_passages

    members = load_passages(mini_testbed / "member.jsonl")
    folder = tmp_path / "suspect-members"
    datasets.Dataset.from_dict({"id": [p["id"] for p in members], "text": [p["text"] for p in members]}
                               ).save_to_disk(str(folder), num_shards=2)
    out = run_cli(["audit", "--suspect", str(folder), "--heldout", str(mini_testbed / "heldout.jsonl"),
                   "--model", "testbed:mini", "--features", "lean", "--max-pairs", "40",
                   "--name", "hf-saved", "--assume-exchangeable", "--json"],  # a random split
                  env=os.environ.copy(), timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert 0 < result["pairs_used"] <= 40
    assert result["pairs_available"] == min(len(members), len(load_passages(mini_testbed / "heldout.jsonl")), 40)
    assert result["reject"] is True  # the testbed's members were trained on
