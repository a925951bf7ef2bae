"""The extract flow survives SIGKILL (a rerun recomputes no finished chunk) and gives the
same features on Dask as on the default runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from trainspotter.testbeds.build import split_path

# As `trainspotter extract` does: the artifacts folder's shared local Prefect API (started
# detached, so it outlives a killed run), not a temporary server per process (~15 s each).
RUN = """
import json, sys
from trainspotter.flows.extract import ExtractConfig, run_extract
from trainspotter.features.features import FeatureConfig
from trainspotter.tasks.server import use_local_api
use_local_api()
data, out, runner, chunk = sys.argv[1:5]
config = ExtractConfig(data=data, model="testbed:mini", reference="testbed:mini/reference",
                       access="both", out=out, chunk_size=int(chunk),
                       features=FeatureConfig(min_k=(0.2,), strip_k=(), batch_size=8))
print(json.dumps(run_extract(config, dask=runner == "dask")))
"""


def _start(data: Path, out: Path, storage: Path, runner: str = "default", chunk: int = 8) -> subprocess.Popen:
    """The extract flow in a fresh process whose task results live in ``storage``."""
    env = os.environ | {"PREFECT_LOCAL_STORAGE_PATH": str(storage)}
    # a session of its own, so SIGKILL takes any process it started with it
    return subprocess.Popen([sys.executable, "-c", RUN, str(data), str(out), runner, str(chunk)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)


def _finish(proc: subprocess.Popen) -> dict:
    import json

    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0
    return json.loads(out.strip().splitlines()[-1])


def _chunks_stored(storage: Path) -> int:
    return len(list(storage.glob("chunk-*"))) if storage.exists() else 0


@pytest.mark.slow
def test_sigkill_midway_then_rerun_recomputes_no_finished_chunk(mini_testbed, tmp_path):
    import json

    data = tmp_path / "passages.jsonl"
    rows = [json.loads(line) for line in split_path("mini", "member").read_text().splitlines()[:12]]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))  # 12 passages = 6 chunks of 2
    storage = tmp_path / "results"

    proc = _start(data, tmp_path / "killed.parquet", storage, chunk=2)
    deadline = time.time() + 300
    while _chunks_stored(storage) < 2 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = _chunks_stored(storage)
    assert 2 <= finished < 6, "the kill must land midway"

    resumed = _finish(_start(data, tmp_path / "resumed.parquet", storage, chunk=2))
    assert resumed["chunks"] == 6
    assert resumed["chunks_cached"] == finished and resumed["chunks_computed"] == 6 - finished

    clean = _finish(_start(data, tmp_path / "clean.parquet", tmp_path / "other-results", chunk=2))
    assert clean["chunks_computed"] == 6
    pd.testing.assert_frame_equal(pd.read_parquet(resumed["out"]), pd.read_parquet(clean["out"]))


@pytest.mark.slow
def test_dask_runner_gives_the_same_features(mini_testbed, tmp_path):
    data = tmp_path / "passages.jsonl"  # 16 passages = 4 chunks, spread over the cluster's workers
    data.write_text("".join(line + "\n" for line in split_path("mini", "heldout").read_text().splitlines()[:16]))
    local = _finish(_start(data, tmp_path / "local.parquet", tmp_path / "local-results", chunk=4))
    dask = _finish(_start(data, tmp_path / "dask.parquet", tmp_path / "dask-results", "dask", chunk=4))
    assert local["chunks_computed"] == dask["chunks_computed"] == 4
    a, b = pd.read_parquet(local["out"]), pd.read_parquet(dask["out"])
    assert list(a["id"]) == list(b["id"]) and list(a.columns) == list(b.columns)
    # other processes, other thread counts: equal up to float summation order
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-5, atol=1e-6)


def test_rerun_reads_every_chunk_from_the_cache_and_refresh_recomputes(mini_testbed, tmp_path):
    import json

    from trainspotter.flows.extract import ExtractConfig, extract_flow
    from trainspotter.tasks.cache import refreshing
    from trainspotter.features.features import FeatureConfig

    data = tmp_path / "four.jsonl"
    rows = [json.loads(line) for line in split_path("mini", "member").read_text().splitlines()[:4]]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = ExtractConfig(data=str(data), model="testbed:mini", access="gray", out=str(tmp_path / "f.parquet"),
                           chunk_size=2, features=FeatureConfig(min_k=(0.2,), strip_k=(), perturbations=False,
                                                                sequence=False))
    first = extract_flow(config)
    assert (first["chunks"], first["chunks_computed"]) == (2, 2)
    table = pd.read_parquet(first["out"])
    again = extract_flow(config)
    assert again["chunks_cached"] == 2
    with refreshing(True):
        fresh = extract_flow(config)
    assert fresh["chunks_computed"] == 2 and fresh["chunks_cached"] == 0
    pd.testing.assert_frame_equal(pd.read_parquet(fresh["out"]), table)
    assert extract_flow(config)["chunks_cached"] == 2  # the refreshed results are stored again


def test_passages_the_caller_read_are_not_read_again(mini_testbed, tmp_path):
    """`trainspotter extract` reads (and checks) its input before the flow starts and hands the
    passages over: the flow reads no file again (here the files are gone by then), and the
    labels of the passages it was given are the table's `set` column."""
    from trainspotter.data import load_labeled
    from trainspotter.features.features import FeatureConfig
    from trainspotter.flows.extract import ExtractConfig, run_extract

    files = {}
    for side, split in (("suspect", "member"), ("heldout", "heldout")):
        lines = split_path("mini", split).read_text().splitlines()[4:6]
        files[side] = tmp_path / f"{side}.jsonl"
        files[side].write_text("".join(line + "\n" for line in lines))
    passages = load_labeled(None, files["suspect"], files["heldout"])
    for path in files.values():
        path.unlink()
    config = ExtractConfig(suspect=str(files["suspect"]), heldout=str(files["heldout"]), model="testbed:mini",
                           access="gray", out=str(tmp_path / "f.parquet"), chunk_size=2,
                           features=FeatureConfig(min_k=(0.2,), strip_k=(), perturbations=False, sequence=False))
    seen = []
    result = run_extract(config, progress=lambda done, total: seen.append((done, total)), passages=passages)
    table = pd.read_parquet(result["out"])
    assert len(passages) == 4 and list(table["id"]) == [p["id"] for p in passages]
    assert list(table["set"]) == ["suspect", "suspect", "heldout", "heldout"] and seen[-1] == (4, 4)
