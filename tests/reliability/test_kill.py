"""kill -9 at every stage of a recurring audit (`audit --ledger`), then run it again.

One audit is run as a user runs it (a subprocess of the CLI, through tests/reliability/
_killer.py, which SIGKILLs the process at a chosen point), killed at each stage in turn:

1. first run, inside the final MLflow logging (after the ledger save);
2. second run (a continued e-process, so a non-empty ledger is at stake), inside a model query;
3. the same, between two batches;
4. the same, inside the ledger save (temp file written, not yet renamed);
5. the same, not killed.

After every step the ledger parses and equals what uninterrupted runs (the library audit, in a
separate artifacts folder) stored at that point; across all attempts no model query that
finished is ever made again; the rerun leaves no temp file behind; and `ledger show` works.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from isolated_env import env_for
from cli_process import run_cli

KILLER = Path(__file__).with_name("_killer.py")
PAIRS, BATCH = 12, 4  # pairs per run, pairs per batch: 3 batches per run


def killer(args: list[str], root: Path, log: Path, kill_at: str | None = None):
    """Run the CLI through the killer; returns (exit status, stdout, stderr)."""
    env = env_for(root, QUERY_LOG=str(log))
    env.pop("KILL_AT", None)
    if kill_at:
        env["KILL_AT"] = kill_at
    out, err = root / "stdout.txt", root / "stderr.txt"
    with open(out, "w") as o, open(err, "w") as e:
        proc = subprocess.Popen([sys.executable, str(KILLER), *args], stdout=o, stderr=e, env=env,
                                start_new_session=True)
        try:
            status = proc.wait(timeout=600)
            # nothing of the killed audit lives on (the shared local Prefect API is not in its group)
            assert group_gone(proc.pid, timeout=20), "a process of the killed audit outlived it"
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return status, out.read_text(), err.read_text()


def group_gone(pgid: int, timeout: float) -> bool:
    """Whether every process of the group has exited within ``timeout`` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def leaves(obj, path=()):
    """(path, value) of every scalar in a nested dict/list."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from leaves(v, path + (i,))
    else:
        yield path, obj


def assert_same_ledger(got: dict, want: dict) -> None:
    """Same e-process state (every number), same pairs used, same run rows (but run ids/times)."""
    drop = {"run_id", "finished"}
    strip = lambda ledger: {k: v for k, v in ledger.items() if k not in ("created",)} | {  # noqa: E731
        "runs": [{k: v for k, v in r.items() if k not in drop} for r in ledger["runs"]]}
    got_leaves, want_leaves = dict(leaves(strip(got))), dict(leaves(strip(want)))
    assert got_leaves.keys() == want_leaves.keys()
    for key, value in want_leaves.items():
        if isinstance(value, float):
            assert got_leaves[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
        else:
            assert got_leaves[key] == value, key


@pytest.mark.slow
def test_kill_at_every_stage_then_rerun(tmp_path, mini_testbed, monkeypatch):
    from trainspotter import audit
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.loop.ledger import load_ledger
    from trainspotter.stats.sequential import TestConfig

    model = f"hf:{mini_testbed / 'target'}"
    suspect, heldout = mini_testbed / "nonmember.jsonl", mini_testbed / "heldout.jsonl"
    args = ["audit", "--suspect", str(suspect), "--heldout", str(heldout), "--model", model,
            "--max-pairs", str(PAIRS), "--batch-pairs", str(BATCH), "--name", "chain", "--ledger", "--json"]

    # The uninterrupted runs: the library audit, twice, in an artifacts folder of its own.
    monkeypatch.setenv("TRAINSPOTTER_ARTIFACTS", str(tmp_path / "reference"))
    config = AuditConfig(name="chain", suspect=str(suspect), heldout=str(heldout), model=model,
                         max_pairs=PAIRS, batch_pairs=BATCH, ledger=True, test=TestConfig(alpha=0.05))
    audit(config)
    want_first = load_ledger("chain")
    want = audit(config)
    want_second = load_ledger("chain")
    monkeypatch.undo()

    root, log = tmp_path / "artifacts", tmp_path / "queries.jsonl"
    root.mkdir()
    ledger_file = root / "ledger" / "chain.json"
    ledger = lambda: load_ledger("chain", root)  # noqa: E731
    queries = lambda: [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []  # noqa: E731

    # 1. First run, killed in MLflow logging: the ledger save before it stands.
    status, _, err = killer(args, root, log, "mlflow:1")
    assert status == -signal.SIGKILL, err[-3000:]
    assert_same_ledger(ledger(), want_first)
    assert len(queries()) == 3  # its 3 batches

    # 2.-4. Second run, killed in its 2nd model query, between its 2nd and 3rd batch, in the save.
    for kill_at, done in (("query:2", 4), ("batch:2", 5), ("save:1", 6)):
        status, _, err = killer(args, root, log, kill_at)
        assert status == -signal.SIGKILL, (kill_at, err[-3000:])
        assert_same_ledger(ledger(), want_first)  # parses, and the first run is all it holds
        assert len(queries()) == done, kill_at  # each attempt queried only what was not done
    stale = [p.name for p in ledger_file.parent.iterdir() if p.name.startswith("chain.tmp")]
    assert len(stale) == 1  # the killed save's temp file (a complete ledger, never renamed)

    # 5. The rerun: every batch of run 2 comes from the cache; the result is the uninterrupted one.
    status, out, err = killer(args, root, log)
    assert status == 0, err[-3000:]
    assert len(queries()) == 6
    result = json.loads(out)
    assert_same_ledger(ledger(), want_second)
    assert result["run_id"] == ledger()["runs"][-1]["run_id"]
    assert result["reject"] == want.reject and result["pairs_used"] == 2 * PAIRS
    assert result["e_value"] == pytest.approx(want.e_value, rel=1e-9)
    assert result["wealth_start"] == pytest.approx(want.wealth_start, rel=1e-9)
    # No finished query was made twice: every passage was scored exactly once over 5 attempts.
    ids = [i for batch in queries() for i in batch]
    assert len(ids) == len(set(ids)) == 4 * PAIRS
    assert sorted(os.listdir(ledger_file.parent)) == ["chain.json", "chain.json.lock"]  # temp swept

    env = env_for(root)
    show = run_cli(["ledger", "show", "chain", "--json"], env=env, timeout=300)
    assert show.returncode == 0, show.stderr
    info = json.loads(show.stdout)
    assert info["pairs_used"] == {"suspect": 2 * PAIRS, "heldout": 2 * PAIRS} and len(info["runs"]) == 2

    # MLflow: each killed attempt was ended KILLED by the attempt after it; the last one FINISHED.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("audit/chain").experiment_id],
                              order_by=["attributes.start_time ASC"])
    assert [r.info.status for r in runs] == ["KILLED"] * 4 + ["FINISHED"]
    assert runs[-1].info.run_id == result["run_id"] and runs[0].data.tags["trainspotter.pid"].isdigit()


def test_stale_save_temps_are_swept_under_the_lock(tmp_path, mini_testbed, monkeypatch):
    """A save killed before its rename leaves NAME.tmpPID; the next run of that audit removes
    it (holding the ledger lock), and touches no other audit's files."""
    from trainspotter import audit
    from trainspotter.loop.ledger import ledger_path, sweep_temps

    folder = ledger_path("a", tmp_path).parent
    folder.mkdir(parents=True)
    names = ["a.tmp123", "a.tmp9", "a.tmp5.json", "a.tmpx", "b.tmp123", "ab.tmp1"]
    for name in names:
        (folder / name).write_text("{}")
    assert sorted(p.name for p in sweep_temps("a", tmp_path)) == ["a.tmp123", "a.tmp9"]
    assert sorted(os.listdir(folder)) == sorted(set(names) - {"a.tmp123", "a.tmp9"})

    # audit() sweeps before it loads the ledger.
    monkeypatch.setenv("TRAINSPOTTER_ARTIFACTS", str(tmp_path))
    audit(name="b", suspect=str(mini_testbed / "nonmember.jsonl"), heldout=str(mini_testbed / "heldout.jsonl"),
          model=f"hf:{mini_testbed / 'target'}", max_pairs=2, ledger=True)
    assert sorted(os.listdir(folder)) == sorted(["a.tmp5.json", "a.tmpx", "ab.tmp1", "b.json", "b.json.lock"])
