"""Scale-out from the command line: `trainspotter extract --dask` (a local cluster) and
`extract` / `audit --dask-address` against a real Dask cluster (a `dask scheduler` and two
`dask worker` processes on localhost), run from a folder outside the repository, give the
local runner's features and the local audit's decision and e-value."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

BIN = Path(sys.executable).parent  # the venv's console scripts: trainspotter, dask


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args: str, cwd: Path, storage: Path) -> subprocess.CompletedProcess:
    """The installed `trainspotter` command, started in ``cwd`` (not the repository), with
    its Prefect task results in ``storage``."""
    env = os.environ | {"PREFECT_LOCAL_STORAGE_PATH": str(storage), "COLUMNS": "200"}
    return subprocess.run([str(BIN / "trainspotter"), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def _wait_for_workers(address: str, n: int, procs: list[subprocess.Popen], timeout: float = 120) -> None:
    from distributed import Client

    deadline = time.time() + timeout
    with Client(address, timeout=timeout, set_as_default=False) as client:
        while len(client.scheduler_info()["workers"]) < n:
            dead = [p.args for p in procs if p.poll() is not None]
            assert not dead and time.time() < deadline, f"dask cluster did not start: {dead}"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """``tcp://127.0.0.1:PORT`` of a scheduler with two single-threaded workers, each its own
    process started by the venv's `dask` command in a folder outside the repository;
    killed (with their children) at the end whatever happened."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    cwd = tmp_path_factory.mktemp("cluster")
    dask = str(BIN / "dask")
    common = dict(cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], **common)]
    try:
        procs += [subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--no-dashboard",
                                    "--name", f"w{i}"], **common) for i in range(2)]
        _wait_for_workers(address, 2, procs)
        yield address
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, 15)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()


def _extract(data: Path, out: Path, *runner: str, cwd: Path, storage: Path) -> dict:
    res = cli("extract", "--data", str(data), "--model", "testbed:mini", "--access", "gray",
              "--out", str(out), "--chunk-size", "8", "--json", *runner, cwd=cwd, storage=storage)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    return json.loads(res.stdout)


def _same_features(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a["id"]) == list(b["id"]) and list(a.columns) == list(b.columns)
    # other processes, other thread counts: equal up to float summation order
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-5, atol=1e-6)


def _passages(mini_testbed: Path, tmp_path: Path, n: int) -> Path:
    data = tmp_path / "passages.jsonl"
    data.write_text("".join((mini_testbed / "heldout.jsonl").read_text().splitlines(True)[:n]))
    return data


def _here(data: Path, chunk_size: int = 8) -> pd.DataFrame:
    """The default runner's table, computed in this process: its task function (the library
    extraction) on the same chunks, the CLI's default features, gray access."""
    from trainspotter.data import load_passages
    from trainspotter.features.features import FEATURE_SETS
    from trainspotter.tasks.extract import extract_chunk

    passages = load_passages(data)
    return pd.DataFrame([row for i in range(0, len(passages), chunk_size) for row in extract_chunk.fn(
        passages[i:i + chunk_size], "testbed:mini", None, "gray", FEATURE_SETS["lean"])])


def _workers_imported(address: str, module: str) -> dict:
    from distributed import Client

    with Client(address, timeout=30, set_as_default=False) as client:
        return client.run(lambda: module in sys.modules)


def _tracebacks(stderr: str) -> list[str]:
    """The line before each traceback in ``stderr``, leaving out distributed's own worker
    heartbeat failure while the local cluster shuts down (under load its scheduler can close
    first; a known race of distributed, not an error of the command)."""
    lines = stderr.splitlines()
    return [lines[i - 1] if i else "" for i, line in enumerate(lines)
            if line.strip().startswith("Traceback") and not (i and "heartbeat" in lines[i - 1])]


def test_cli_extract_dask_local_cluster_with_progress_bar(mini_testbed, tmp_path):
    """`extract --dask` from another folder, with the progress bar (not --json): every such
    run used to fail pickling the bar that the CLI handed to the flow."""
    data, elsewhere = _passages(mini_testbed, tmp_path, 24), tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = cli("extract", "--data", str(data), "--model", "testbed:mini", "--out", str(tmp_path / "d.parquet"),
              "--dask", "--chunk-size", "8", cwd=elsewhere, storage=tmp_path / "dask-results")
    assert res.returncode == 0, res.stderr[-3000:]
    assert _tracebacks(res.stderr) == [] and "24/24" in res.stderr  # the bar reached the end
    assert "| INFO    | distributed" not in res.stderr  # the cluster's own chatter stays off the console
    assert "24 passages" in res.stdout and "(0 of 3 chunks from the cache)" in res.stdout
    _same_features(pd.read_parquet(tmp_path / "d.parquet"), _here(data))


@pytest.mark.slow
def test_cli_extract_and_audit_on_an_existing_dask_cluster(mini_testbed, tmp_path, dask_cluster):
    """Both verbs with --dask-address, from a folder outside the repository: the workers
    (started elsewhere too) import the task module by name and compute every chunk and
    batch; the features are the default runner's, the audit's decision and e-value the
    local audit's, and what the workers computed is stored where a rerun finds it."""
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.loop.run import audit

    here, storage = tmp_path / "elsewhere", tmp_path / "results"
    here.mkdir()
    data = _passages(mini_testbed, tmp_path, 32)
    remote = _extract(data, tmp_path / "remote.parquet", "--dask-address", dask_cluster, cwd=here,
                      storage=storage)
    assert remote["chunks_computed"] == 4
    assert any(_workers_imported(dask_cluster, "trainspotter.tasks.extract").values())
    _same_features(pd.read_parquet(tmp_path / "remote.parquet"), _here(data))

    suspect, heldout = mini_testbed / "member.jsonl", mini_testbed / "heldout.jsonl"
    on_cluster = cli("audit", "--suspect", str(suspect), "--heldout", str(heldout), "--model", "testbed:mini",
                     "--max-pairs", "32", "--batch-pairs", "8", "--name", "on-cluster", "--json",
                     "--assume-exchangeable",  # a random split, no reference: 32 pairs may say "trained on"
                     "--dask-address", dask_cluster, cwd=here, storage=storage)
    assert on_cluster.returncode == 0, on_cluster.stderr[-3000:]
    a = json.loads(on_cluster.stdout)
    b = audit(AuditConfig(name="here", suspect=str(suspect), heldout=str(heldout), model="testbed:mini",
                          max_pairs=32, batch_pairs=8, assume_exchangeable=True)).model_dump()
    assert (a["verdict"], a["reject"], a["pairs_used"]) == (b["verdict"], b["reject"], b["pairs_used"])
    assert a["e_value"] == pytest.approx(b["e_value"], rel=1e-4)
    # every chunk and every batch the workers finished is stored in this process's result
    # storage, under the key a rerun (on the cluster or not) looks up first
    batches = -(-a["pairs_queried"] // 8)
    assert len(list(storage.glob("chunk-*"))) == 4 + batches


@pytest.mark.slow
def test_audit_on_dask_flow_for_deployments(mini_testbed, dask_cluster):
    """The flow a deployment runs (it cannot choose its task runner): the audit as its
    subflow on the cluster, same result as the library audit in this process."""
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.flows.audit import audit_on_dask
    from trainspotter.loop.run import audit
    from trainspotter.tasks.server import use_local_api

    use_local_api()
    config = AuditConfig(name="deployed", suspect=str(mini_testbed / "member.jsonl"),
                         heldout=str(mini_testbed / "heldout.jsonl"), model="testbed:mini",
                         max_pairs=16, batch_pairs=8)
    deployed, here = audit_on_dask(config, dask_cluster), audit(config)
    assert (deployed["verdict"], deployed["pairs_used"]) == (here.verdict, here.pairs_used)
    assert deployed["e_value"] == pytest.approx(here.e_value, rel=1e-4)
    assert deployed["run_id"]  # the audit flow's MLflow run, opened on this side


def test_dask_address_without_a_scheduler_is_one_clear_line(mini_testbed, tmp_path):
    address = f"127.0.0.1:{_free_port()}"  # nothing listens there
    data = _passages(mini_testbed, tmp_path, 4)
    for args in (["extract", "--data", str(data), "--model", "testbed:mini", "--out", str(tmp_path / "x.parquet")],
                 ["audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout",
                  str(mini_testbed / "heldout.jsonl"), "--model", "testbed:mini"]):
        res = cli(*args, "--dask-address", address, cwd=tmp_path, storage=tmp_path / "results")
        assert res.returncode == 2, res.stderr[-2000:]
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: option --dask-address {address}: "
                                                       "no Dask scheduler answers there"), res.stderr
    res = cli("extract", "--data", str(data), "--model", "testbed:mini", "--out", str(tmp_path / "x.parquet"),
              "--dask", "--dask-address", address, cwd=tmp_path, storage=tmp_path / "results")
    assert res.returncode == 2 and res.stderr.startswith("error: --dask starts a local Dask cluster, "
                                                         "--dask-address uses an existing one"), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_an_api_model_is_refused_on_a_cluster(tmp_path):
    """An API model's query budget is counted in the process that queries it: workers would
    each start from a full budget, so audits and extractions on Dask refuse it before any
    connection or flow."""
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.errors import InputError
    from trainspotter.flows.audit import check_dask_audit
    from trainspotter.flows.extract import ExtractConfig, run_extract

    api = "openai:gpt-x@http://127.0.0.1:9/v1?tokenizer=hf:/tok&max_cost=1"
    config = AuditConfig(suspect="s.jsonl", heldout="h.jsonl", model=api)
    with pytest.raises(InputError, match=r"--dask-address: openai:gpt-x is an API model"):
        check_dask_audit(config, f"127.0.0.1:{_free_port()}")
    extraction = ExtractConfig(data="d.jsonl", model="testbed:mini", reference=api, out="x.parquet")
    with pytest.raises(InputError, match=r"--dask: openai:gpt-x is an API model"):
        run_extract(extraction, dask=True)
