"""A model worker: a CLI audit's local models load in a second process while this one imports
Prefect and MLflow, opens the MLflow run and runs the blind check (issue 38 item 7).

On the 2 cores the CLI is made for, an audit's process works on one core at a time (the GIL):
the imports of prefect and mlflow, MLflow's store, the blind check, then torch, transformers
and the weights. ``serving(specs)`` forks, before any of those, a worker that imports the
backend modules and loads the audit's models; the audit's cached task (``extract_chunk``)
then asks it for each batch's feature rows (``rows``) instead of computing them here. The
rows are the library's ``extract`` of the same inputs with the same code (a fork of this
process), so the e-values, cache keys and records are those of an audit without a worker.
A thread would not help: the imports and the model load hold the GIL
(benchmarks/results/cli_overhead.md).

A worker is only forked where forking is safe and useful: in the `trainspotter` command's own
process (``allow_fork``), for local models only (an API model's budget and usage meter live in
the process that queries it), when this process has no other thread and has not imported torch
(OpenMP is not fork-safe), and ``TRAINSPOTTER_MODEL_WORKER`` is not ``0``. Otherwise, or once the worker is gone, the rows are computed here as before. The
worker ends when the audit ends, and by itself when this process dies (its end of the pipe
closes); an error in it is raised here, as the same exception where it can be pickled.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

_active: dict = {}  # "process", "conn", "lock" of the worker serving this process, if any
_allowed: list[bool] = []  # set by allow_fork(): this process is the `trainspotter` command's own


def allow_fork() -> None:
    """Let ``serving`` fork in this process: only the `trainspotter` command's ``main`` calls it,
    never a process that hosts the CLI (a notebook, a test runner's in-process invocation)."""
    _allowed.append(True)


def extract_rows(passages: list[dict], model, reference, access: str, features, answers: bool) -> list[dict]:
    """One chunk's feature rows (library ``extract``), computed in this process."""
    from trainspotter.backends import load_backend
    from trainspotter.backends.spec import parse_references
    from trainspotter.features.extract import extract

    references = [load_backend(r) for r in parse_references(reference)]
    return extract(passages, load_backend(model), references, access, features, answers=answers).to_dict("records")


def active() -> bool:
    """Whether a worker serves this process's local models now."""
    return bool(_active)


def can_fork(specs: Iterable) -> bool:
    """Whether ``serving`` forks a worker for these model specs (module docstring)."""
    return (bool(_allowed) and os.environ.get("TRAINSPOTTER_MODEL_WORKER", "1") != "0" and "torch" not in sys.modules
            and threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
            and all(not spec.remote for spec in specs))


@contextmanager
def serving(specs: Iterable) -> Iterator[bool]:
    """Within the block, ``rows`` asks a worker that loaded ``specs`` (local model specs, the
    audit's) when one could be forked (``can_fork``); yields whether one was."""
    specs = [s for s in specs if s is not None]
    if _active or not specs or not can_fork(specs):
        yield False
        return
    ours, theirs = multiprocessing.Pipe()
    process = multiprocessing.get_context("fork").Process(target=_serve, args=(theirs, ours, specs), daemon=True,
                                                           name="trainspotter-model-worker")
    process.start()
    theirs.close()
    _active.update(process=process, conn=ours, lock=threading.Lock())
    try:
        yield True
    finally:
        _active.clear()
        ours.close()  # the worker's recv ends: it exits
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()


def rows(passages: list[dict], model, reference, access: str, features, answers: bool) -> list[dict]:
    """``extract_rows`` of these inputs: from the worker when one serves, else computed here."""
    args = (passages, model, reference, access, features, answers)
    if not _active or _remote(model, reference):  # an API model's meter lives here: never in the worker
        return extract_rows(*args)
    with _active["lock"]:
        try:
            _active["conn"].send(args)
            status, value = _active["conn"].recv()
        except (EOFError, OSError):  # the worker is gone (killed, out of memory): compute here
            code = _active["process"].exitcode
            print(f"warning: the model worker process exited ({code}); computing features in this process",
                  file=sys.stderr)
            _active.clear()
            return extract_rows(*args)
    if status == "error":
        raise value
    return value


def _remote(model, reference) -> bool:
    from trainspotter.backends.spec import parse_references, parse_spec

    return any(parse_spec(s).remote for s in (model, *parse_references(reference)))


def _serve(conn, parent_end, specs: list) -> None:
    """The worker: load the models, then answer each request until the pipe closes."""
    parent_end.close()  # else the parent's death would not close the pipe for us
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes the pipe
    from trainspotter.backends import load_backend

    for spec in specs:
        try:
            load_backend(spec)
        except Exception:  # noqa: BLE001 - the same error is raised (and sent) by the request that needs it
            pass
    while True:
        try:
            args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer = ("ok", extract_rows(*args))
        except Exception as e:  # noqa: BLE001 - sent to the parent, raised there
            answer = ("error", _picklable(e))
        try:
            conn.send(answer)
        except OSError:  # the parent is gone (Ctrl-C, killed): nobody waits for the rows
            return


def _picklable(e: Exception) -> Exception:
    """``e`` if it survives pickling, else a RuntimeError with its type, message and traceback."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001
        return RuntimeError(f"in the model worker: {type(e).__name__}: {e}\n{traceback.format_exc()}")
