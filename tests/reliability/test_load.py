"""Load: audits started together on one fresh artifacts folder (one Prefect database, one
MLflow store, one ledger folder), as users run them (CLI subprocesses).

Two runs of one recurring audit (`--ledger`, same name) and four different audits, all six
started at once: every one exits 0 with no "database is locked" (nor any other error), the
shared ledger holds both runs (the second continued the first: its wealth starts where the
first ended, on pairs the first did not use), and every MLflow run is FINISHED.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from isolated_env import env_for

CLI = [sys.executable, "-m", "trainspotter.flows.cli"]
PAIRS = 8


@pytest.mark.slow
def test_parallel_audits_on_one_artifacts_folder(tmp_path, mini_testbed):
    from mlflow.tracking import MlflowClient

    from trainspotter.loop.ledger import load_ledger

    root = tmp_path / "artifacts"
    env = env_for(root)
    base = ["audit", "--suspect", str(mini_testbed / "nonmember.jsonl"), "--heldout",
            str(mini_testbed / "heldout.jsonl"), "--model", f"hf:{mini_testbed / 'target'}",
            "--max-pairs", str(PAIRS), "--batch-pairs", "4", "--ledger", "--json"]
    jobs = {f"shared-{i}": base + ["--name", "shared"] for i in (1, 2)}
    jobs |= {f"solo-{i}": base + ["--name", f"solo-{i}", "--seed", str(i)] for i in (1, 2, 3, 4)}
    procs = {}
    for key, args in jobs.items():
        out, err = open(tmp_path / f"{key}.out", "w"), open(tmp_path / f"{key}.err", "w")
        procs[key] = subprocess.Popen(CLI + args, stdout=out, stderr=err, env=env)
    status = {key: proc.wait(timeout=900) for key, proc in procs.items()}
    err = {key: (tmp_path / f"{key}.err").read_text() for key in jobs}
    for key in jobs:
        assert status[key] == 0, (key, err[key][-3000:])
        assert "database is locked" not in err[key] and "Traceback" not in err[key], (key, err[key][-3000:])
    result = {key: json.loads((tmp_path / f"{key}.out").read_text()) for key in jobs}

    shared = load_ledger("shared", root)
    runs = shared["runs"]
    assert len(runs) == 2 and {r["run_id"] for r in runs} == {result[k]["run_id"] for k in ("shared-1", "shared-2")}
    assert runs[0]["wealth_start"] == 1.0 and runs[1]["wealth_start"] == pytest.approx(runs[0]["wealth_end"])
    assert [r["pairs_total"] for r in runs] == [PAIRS, 2 * PAIRS]
    for side in ("suspect", "heldout"):
        assert len(shared["used"][side]) == len(set(shared["used"][side])) == 2 * PAIRS  # no pair reused
    first, second = sorted((result["shared-1"], result["shared-2"]), key=lambda r: r["pairs_used"])
    assert (first["pairs_used"], second["pairs_used"]) == (PAIRS, 2 * PAIRS)
    assert second["wealth_start"] == pytest.approx(first["wealth"])
    for i in (1, 2, 3, 4):
        solo = load_ledger(f"solo-{i}", root)
        assert [r["run_id"] for r in solo["runs"]] == [result[f"solo-{i}"]["run_id"]]

    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    statuses = {key: client.get_run(r["run_id"]).info.status for key, r in result.items()}
    assert statuses == {key: "FINISHED" for key in jobs}
