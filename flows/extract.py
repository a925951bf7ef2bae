"""The extract flow: passages in chunks, each chunk a cached task, so a crashed or
killed extraction resumes where it stopped; optionally on a Dask cluster."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from prefect import flow, get_run_logger
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import BaseModel, Field

import tasks  # noqa: F401  (configures Prefect/MLflow environment first)
from tasks.extract import extract_chunk
from trainspotter.audit import UsageMeter
from trainspotter.data import load_passages
from trainspotter.features.features import FeatureConfig


class ExtractConfig(BaseModel):
    data: str
    model: str
    reference: str | None = None
    access: str = "gray"
    out: str
    chunk_size: int = Field(64, ge=1)  # passages per task: Dask costs ~150 ms per task
    features: FeatureConfig = FeatureConfig()


# One chunk at a time by default: torch already uses every core within a chunk, and
# the CPU gains nothing from interleaving chunks; Dask is for real clusters.
@flow(name="extract", task_runner=ThreadPoolTaskRunner(max_workers=1))
def extract_flow(config: ExtractConfig, progress: Callable[[int, int], None] | None = None) -> dict:
    """Submit every chunk (run concurrently by the flow's task runner), gather in order,
    write one Parquet table. Chunks whose result is cached are not recomputed.
    ``progress(passages done, total)`` as chunks finish."""
    logger = get_run_logger()
    start = time.time()
    passages = load_passages(config.data)
    chunks = [passages[i:i + config.chunk_size] for i in range(0, len(passages), config.chunk_size)]
    futures = [extract_chunk.submit(chunk, config.model, config.reference, config.access,
                                    config.features, chunk=k) for k, chunk in enumerate(chunks)]
    size = {f.task_run_id: len(chunk) for f, chunk in zip(futures, chunks)}
    done = 0
    for future in as_completed(futures):
        done += size[future.task_run_id]
        if progress is not None:
            progress(done, len(passages))
    rows = [row for f in futures for row in f.result()]
    for f in futures:  # as_completed can yield a future whose state still reads Running
        f.wait()
    states = [f.state for f in futures]
    cached = sum(s.name == "Cached" for s in states)
    out = Path(config.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(rows)
    df.to_parquet(out, index=False)
    logger.info("%d passages in %d chunks (%d cached) -> %s", len(df), len(chunks), cached, out)
    result = {"out": str(out), "rows": len(df), "chunks": len(chunks), "chunks_cached": cached,
              "chunks_computed": len(chunks) - cached, "seconds": round(time.time() - start, 2),
              "features": [c for c in df.columns if c not in ("id", "set")]}
    api = UsageMeter([config.model, config.reference]).modes()  # how each API was queried
    return result | ({"api": api} if api else {})


def run_extract(config: ExtractConfig, dask: bool = False, dask_address: str | None = None,
                progress: Callable[[int, int], None] | None = None) -> dict:
    """The default runner works through the chunks in this process; ``dask`` runs them on a
    local Dask cluster (or the one at ``dask_address``) through prefect-dask."""
    if not (dask or dask_address):
        return extract_flow(config, progress)
    from prefect_dask import DaskTaskRunner

    runner = (DaskTaskRunner(address=dask_address) if dask_address else
              DaskTaskRunner(cluster_kwargs={"n_workers": 2, "threads_per_worker": 1,
                                             "processes": True, "dashboard_address": None}))
    return extract_flow.with_options(task_runner=runner)(config, progress)
