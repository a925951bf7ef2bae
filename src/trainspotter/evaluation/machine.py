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

__all__ = ["git_commit", "src_changed", "median_seconds", "cli_command", "run_cli"]

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
    """Whether the checkout's ``src/`` has uncommitted changes (a measurement of code not committed)."""
    try:
        return bool(subprocess.run(["git", "status", "--porcelain", "--", "src"], capture_output=True, text=True,
                                   cwd=_HERE.parents[2], timeout=5).stdout.strip())
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


def cli_command(*args: str) -> list[str]:
    """The ``trainspotter`` command with ``args``, as a fresh process of this interpreter."""
    return [sys.executable, "-m", "trainspotter.flows.cli", *args]


def run_cli(args: list[str], ok=(0,), **kwargs) -> subprocess.CompletedProcess:
    """``trainspotter ARGS`` in a fresh process (output captured); SystemExit with the end of its
    stderr unless its exit code is in ``ok``."""
    out = subprocess.run(cli_command(*args), capture_output=True, text=True, **kwargs)
    if out.returncode not in ok:
        raise SystemExit(f"trainspotter {' '.join(args[:3])} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out


def load_average() -> float:
    """The 1-minute load average (how busy the shared cores were)."""
    return os.getloadavg()[0]
