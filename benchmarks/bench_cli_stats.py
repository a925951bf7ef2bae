"""Wall time of the statistics verbs as a user runs them (issue 11 item 6, issue 13):

- `trainspotter simulate F --trials 2000 --n-max 1000 --null` on a 100k-row null table
  (32 N(0, 1) features; goal ≤ 3 min on 2 CPU cores),
- `trainspotter test F --alpha 1e-9` on 2000 pairs × 32 features (all 2000 rounds: the
  tiny α keeps it from stopping early), beyond the import (goal ≤ 2 s), for the online
  scorer (default) and the paper's scorer,

each the median of ``--repeats`` runs, with the bare import (`trainspotter --help`) timed in
the same run so the difference is the work. Writes benchmarks/results/cli_stats.{md,json}.

    python benchmarks/bench_cli_stats.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CLI = [sys.executable, "-m", "trainspotter.flows.cli"]


def _table(rows: int, p: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.normal(size=(rows, p)), columns=[f"f{i}" for i in range(p)])
    df.insert(0, "set", np.where(np.arange(rows) < rows // 2, "suspect", "heldout"))
    return df


def _time(args: list[str], repeats: int, pairs: int | None = None) -> float:
    """Median wall seconds of running the CLI with ``args`` (each run must succeed and,
    for `test`, use all ``pairs``: a run that stops early would time less work)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = subprocess.run(CLI + args, capture_output=True, text=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed: {out.stderr[-2000:]}")
        if pairs is not None and json.loads(out.stdout)["pairs_used"] != pairs:
            raise SystemExit(f"{' '.join(args)} stopped before {pairs} pairs")
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        null_table, test_table = Path(tmp) / "null.parquet", Path(tmp) / "test.parquet"
        _table(100_000, 32, seed=0).to_parquet(null_table, index=False)
        _table(4000, 32, seed=1).to_parquet(test_table, index=False)  # 2000 pairs
        load0 = os.getloadavg()[0]
        bare = _time(["--help"], args.repeats)
        # α = 1e-9: no run stops early, so all 2000 rounds are timed (on this null table the
        # paper scorer's run otherwise happens to cross 1/0.05 at pair 13, a 5%-level event)
        full = ["--alpha", "1e-9", "--json"]
        test_online = _time(["test", str(test_table), *full], args.repeats, pairs=2000)
        test_paper = _time(["test", str(test_table), "--scorer", "paper", *full], args.repeats, pairs=2000)
        simulate = _time(["simulate", str(null_table), "--trials", "2000", "--n-max", "1000", "--null", "--json"], 1)
        load1 = os.getloadavg()[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    res = {"date": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}", "cpus": os.cpu_count(),
           "cpu": platform.processor() or platform.machine(), "commit": commit, "repeats": args.repeats,
           "load_avg_1min": [load0, load1], "import_s": bare, "test_online_s": test_online,
           "test_paper_s": test_paper, "simulate_s": simulate}
    (RESULTS / "cli_stats.json").write_text(json.dumps(res, indent=1))
    (RESULTS / "cli_stats.md").write_text("\n".join([
        "# Statistics verbs, wall time as run from the shell", "",
        f"{res['date']} · {res['cpus']} CPU cores · git {commit} · 1-min load average {load0:.1f} → {load1:.1f} "
        f"(other jobs were running: these are upper bounds) · `python benchmarks/bench_cli_stats.py`", "",
        "| command | seconds (median) | beyond the import | goal |", "|---|---|---|---|",
        f"| `trainspotter --help` (import only) | {bare:.2f} | — | — |",
        f"| `test` 2000 pairs × 32 features, online scorer | {test_online:.2f} | {test_online - bare:.2f} | ≤ 2 s |",
        f"| `test` same table, `--scorer paper` | {test_paper:.2f} | {test_paper - bare:.2f} | — |",
        f"| `simulate` 100k-row null table, 2000 trials × 1000 pairs × 32 features | {simulate:.1f} | "
        f"{simulate - bare:.1f} | ≤ 180 s |", "",
        f"Online vs paper scorer on `test`, beyond the import: {(test_online - bare) / (test_paper - bare):.2f}.", ""]))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
