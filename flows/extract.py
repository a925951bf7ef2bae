"""The extract flow: passages in chunks, each chunk a cached task, so a crashed or
killed extraction resumes where it stopped; optionally on a Dask cluster."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import NamedTuple

import pandas as pd
from prefect import flow, get_run_logger
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import BaseModel, Field

import trainspotter.tasks  # noqa: F401  (configures Prefect/MLflow environment first)
from trainspotter.auditing.auditor import UsageMeter
from trainspotter.backends.spec import ModelSpec, References, Spec
from trainspotter.data import Passage, load_labeled
from trainspotter.errors import InputError
from trainspotter.features.features import FeatureConfig
from trainspotter.tasks.extract import extract_chunk


class Caller(NamedTuple):
    """What the caller's process hands the flow besides its parameters: Prefect stores a flow
    run's parameters and ships them to every Dask worker with each task, and a progress bar
    (locks, a console) cannot be pickled, nor should the whole dataset travel with each chunk."""

    progress: Callable[[int, int], None] | None = None  # (passages done, total), as chunks finish
    passages: list[Passage] | None = None  # the config's files, already read (load_labeled)


CALLER: ContextVar[Caller] = ContextVar("extract_caller", default=Caller())


def current_caller() -> Caller:
    """The flow reads the caller's context through this function, never the variable itself:
    a flow with other options is pickled by value with the globals it names (prefect-dask
    sends it to the workers), and a ContextVar cannot be pickled."""
    return CALLER.get()


class ExtractConfig(BaseModel):
    data: str | None = None  # passages (with an optional `set` each), or:
    suspect: str | None = None  # suspect and held-out files: the table's `set` column
    heldout: str | None = None
    model: Spec  # parsed once, here (backends.spec)
    reference: References = ()
    access: str = "gray"
    out: str
    chunk_size: int = Field(64, ge=1)  # passages per task: Dask costs ~150 ms per task
    features: FeatureConfig = FeatureConfig()


# One chunk at a time by default: torch already uses every core within a chunk, and
# the CPU gains nothing from interleaving chunks; Dask is for real clusters.
@flow(name="extract", task_runner=ThreadPoolTaskRunner(max_workers=1))
def extract_flow(config: ExtractConfig) -> dict:
    """Submit every chunk (run concurrently by the flow's task runner), gather in order,
    write one Parquet table. Chunks whose result is cached are not recomputed. Reads the
    passages unless the caller has (``Caller``), and reports to its progress callback."""
    logger = get_run_logger()
    progress, passages = current_caller()
    start = time.time()
    if passages is None:
        passages = load_labeled(config.data, config.suspect, config.heldout)
    # The labels are the user's, not features: set here, never in the cached chunks
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
    if "set" in passages[0]:  # rows come back in passage order
        df.insert(1, "set", [p["set"] for p in passages])
    df.to_parquet(out, index=False)
    logger.info("%d passages in %d chunks (%d cached) -> %s", len(df), len(chunks), cached, out)
    result = {"out": str(out), "rows": len(df), "sets": df["set"].value_counts().to_dict() if "set" in df else None,
              "chunks": len(chunks), "chunks_cached": cached,
              "chunks_computed": len(chunks) - cached, "seconds": round(time.time() - start, 2),
              "features": [c for c in df.columns if c not in ("id", "set")]}
    api = UsageMeter([config.model, *config.reference]).modes()  # how each API was queried
    return result | ({"api": api} if api else {})


def dask_runner(address: str | None = None, workers: int = 2):
    """A prefect-dask task runner on the scheduler at ``address`` (its callers check it first,
    ``check_scheduler``), or on a local cluster of ``workers`` single-threaded processes."""
    from prefect_dask import DaskTaskRunner

    # distributed logs each connection and shutdown step at INFO (with a traceback when a
    # worker's stream closes first under load): the console gets its warnings and errors only
    logging.getLogger("distributed").setLevel(logging.WARNING)
    if address is None:
        return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1,
                                              "processes": True, "dashboard_address": None})
    return DaskTaskRunner(address=address)


def check_scheduler(address: str, timeout: float = 5) -> None:
    """Raise InputError unless a Dask scheduler answers at ``address`` with at least one
    worker (tasks sent to a scheduler without workers would wait forever)."""
    import socket

    from distributed import Client
    from distributed.comm import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        if scheme == "tcp":  # nothing listening is known at once; the Client would retry until its timeout
            socket.create_connection(parse_host_port(location), timeout=timeout).close()
        with Client(address, timeout=timeout, set_as_default=False) as client:
            workers = len(client.scheduler_info().get("workers", {}))
    except (OSError, TimeoutError, ValueError, TypeError) as e:
        raise InputError(f"option --dask-address {address}: no Dask scheduler answers there "
                         f"({type(e).__name__}: {' '.join(str(e).split()) or 'no reply'})") from None
    if not workers:
        raise InputError(f"option --dask-address {address}: the Dask scheduler has no workers; "
                         f"start some with `dask worker {address}`")


def check_local_models(option: str, *specs: ModelSpec | None) -> None:
    """InputError if a spec is an API model (openai:): its query budget and usage meter are
    kept by the process that queries it, and each Dask worker would start a full budget."""
    api = [spec for spec in specs if spec and spec.remote]
    if api:
        raise InputError(f"option {option}: {api[0].scheme}:{api[0].model} is an API model; its query budget "
                         f"is kept by the process that queries it, so run it without a Dask cluster")


def extract_runner(config: ExtractConfig, dask: bool = False, dask_address: str | None = None):
    """The extract flow with its task runner: this process's, or with ``dask`` a local Dask cluster's
    (the one at ``dask_address`` when given) through prefect-dask, after the one check of the
    cluster options: no API model on a cluster, a scheduler that answers at ``dask_address``."""
    if not (dask or dask_address):
        return extract_flow
    check_local_models("--dask-address" if dask_address else "--dask", config.model, *config.reference)
    if dask_address:
        check_scheduler(dask_address)
    return extract_flow.with_options(task_runner=dask_runner(dask_address))


def run_extract(config: ExtractConfig, dask: bool = False, dask_address: str | None = None,
                progress: Callable[[int, int], None] | None = None,
                passages: list[Passage] | None = None) -> dict:
    """The extract flow on its runner (``extract_runner``: the default works through the chunks in
    this process). ``progress(passages done, total)`` is called in this process as chunks finish.
    ``passages``: what ``load_labeled`` gave for the config's files, when the caller has read
    them already (the flow then reads nothing)."""
    return run_on(extract_runner(config, dask, dask_address), config, progress, passages)


def run_on(flow_, config: ExtractConfig, progress: Callable[[int, int], None] | None = None,
           passages: list[Passage] | None = None) -> dict:
    """``run_extract`` on a runner made (and its options checked) already: the CLI checks before its
    progress bar starts."""
    token = CALLER.set(Caller(progress, passages))
    try:
        return flow_(config)
    finally:
        CALLER.reset(token)
