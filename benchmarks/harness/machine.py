"""Where and how a benchmark measured: the commit it ran at, the machine's load, wall times as
medians of repeats, and the commands a user types run in fresh processes. The benchmarks' own
numbers (``benchmarks/``) carry these beside them, since the 2 cores are shared and a wall time
alone says little (docs/architecture.md: ratios measured in one run)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["git_commit", "src_changed", "median_seconds", "cli_command", "run_cli", "load_average", "PhaseClock"]

_HERE = Path(__file__).resolve().parent


def git_commit(short: bool = False) -> str:
    """The checkout's HEAD (``short``: as ``git rev-parse --short``), or "unknown"."""
    try:
        out = subprocess.run(["git", "rev-parse", *(["--short"] if short else []), "HEAD"], capture_output=True,
                             text=True, cwd=_HERE, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out or "unknown"


def src_changed() -> bool:
    """Whether the library (``src/``) or the studies that measure it (``benchmarks/harness``,
    ``benchmarks/studies``) have uncommitted changes (a measurement of code not committed)."""
    try:
        return bool(subprocess.run(["git", "status", "--porcelain", "--", "src", "benchmarks/harness",
                                    "benchmarks/studies"], capture_output=True, text=True,
                                   cwd=_HERE.parents[1], timeout=5).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return False


def median_seconds(fn, repeats: int) -> float:
    """Median wall seconds of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def cli_command(*args: str, python: str | None = None) -> list[str]:
    """The ``trainspotter`` command with ``args``, as a fresh process of this interpreter (or of
    ``python``: another checkout's, to time it in the same run)."""
    return [python or sys.executable, "-m", "trainspotter.flows.cli", *args]


def run_cli(args: list[str], ok=(0,), python: str | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``trainspotter ARGS`` in a fresh process (output captured); SystemExit with the end of its
    stderr unless its exit code is in ``ok``."""
    out = subprocess.run(cli_command(*args, python=python), capture_output=True, text=True, **kwargs)
    if out.returncode not in ok:
        raise SystemExit(f"trainspotter {' '.join(args[:3])} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out


def load_average() -> float:
    """The 1-minute load average (how busy the shared cores were)."""
    return os.getloadavg()[0]


class PhaseClock:
    """Seconds per phase of one process (``benchmarks/bench_cli_overhead.py --child``): callables
    wrapped in place by module and attribute name (a label met twice adds up), imports timed,
    the cyclic garbage collector's own time; with ``path``, everything written there as JSON at exit."""

    def __init__(self, path: str | None = None):
        import atexit
        import gc
        import json

        self.start, self.seconds, self._gc = time.perf_counter(), {}, [0.0, 0.0]
        gc.callbacks.append(self._on_gc)
        if path is not None:
            atexit.register(lambda: Path(path).write_text(json.dumps(self.totals())))

    def totals(self) -> dict[str, float]:
        """The phases, the garbage collector's time and the process's time so far."""
        return self.seconds | {"garbage collection (within the above)": self._gc[0],
                               "in process": time.perf_counter() - self.start}

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc[1] = time.perf_counter()
        else:
            self._gc[0] += time.perf_counter() - self._gc[1]

    def wrap(self, label: str, module: str, attr: str) -> None:
        """Time every call of ``module``.``attr`` (``attr`` may be dotted: a method) under ``label``."""
        import functools
        import importlib

        owner = importlib.import_module(module)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def timed_call(*a, **k):
            t = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - t

        setattr(owner, name, timed_call)

    def timed(self, label: str):
        """A context whose wall time is ``label``'s (kept when the body raises or exits)."""
        import contextlib

        @contextlib.contextmanager
        def clock():
            t = time.perf_counter()
            try:
                yield
            finally:
                self.seconds[label] = time.perf_counter() - t
        return clock()

    def imported(self, label: str, module: str) -> None:
        """Import ``module``, timed under ``label``."""
        import importlib

        t = time.perf_counter()
        importlib.import_module(module)
        self.seconds[label] = time.perf_counter() - t
