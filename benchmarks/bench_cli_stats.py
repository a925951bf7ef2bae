"""Wall time of the statistics verbs as a user runs them (issue 11 item 6, issue 13):

- `trainspotter simulate F --trials 2000 --n-max 1000 --null` on a 100k-row null table
  (32 N(0, 1) features; goal ≤ 3 min on 2 CPU cores),
- `trainspotter test F --alpha 1e-9` on 2000 pairs × 32 features (all 2000 rounds: the
  tiny α keeps it from stopping early), beyond the import (goal ≤ 2 s), for the online
  scorer (default) and the paper's scorer,

each the median of ``--repeats`` runs, with the bare import (`trainspotter --help`) timed in
the same run so the difference is the work. Writes benchmarks/results/cli_stats.{md,json}.

The measurement: studies.cli_cost.cli_stats.

    python benchmarks/bench_cli_stats.py [--repeats 3] [--before OTHER_CHECKOUT/.venv/bin/python]
    python benchmarks/bench_cli_stats.py --render   # cli_stats.md from cli_stats.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from studies.cli_cost import cli_stats, render_cli_stats

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--render", action="store_true", help="only rewrite cli_stats.md from cli_stats.json")
    ap.add_argument("--before", metavar="PYTHON", help="another checkout's interpreter: its `test` timed in the same run")
    args = ap.parse_args()
    if args.render:
        res = json.loads((RESULTS / "cli_stats.json").read_text())
    else:
        res = cli_stats(args.repeats, args.before)
        (RESULTS / "cli_stats.json").write_text(json.dumps(res, indent=1))
        print(json.dumps(res, indent=1))
    (RESULTS / "cli_stats.md").write_text(render_cli_stats(res))


if __name__ == "__main__":
    main()
