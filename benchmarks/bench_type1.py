"""Type-I error of the sequential test on fresh null streams (BADI App. C.2).

Each trial draws new data with the same distribution on both sides (N(0, I) features), runs the
full online test (scorer → payoff → bets) and records whether the wealth ever reached 1/α. Under
H0 this must happen with probability ≤ α (Ville's inequality); a one-sided binomial test of
H: rate ≤ α flags a rate significantly above α — that would be a bug
(studies.synthetic.type1_rows).

    python benchmarks/bench_type1.py [--trials 5000] [--pairs 150] [--features 4]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from studies.synthetic import render_type1, type1_rows
from trainspotter.stats.payoffs import PAYOFFS

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5000)
    ap.add_argument("--pairs", type=int, default=150)
    ap.add_argument("--features", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--lambda-max", type=float, default=0.8)
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--payoffs", default=",".join(PAYOFFS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = type1_rows(args.trials, args.pairs, args.features, args.alpha, args.lambda_max, args.batch,
                      args.payoffs.split(","), args.seed)
    table = render_type1(vars(args), rows, time.perf_counter() - t0)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "type1.json").write_text(json.dumps({"setup": vars(args), "rows": rows}, indent=1))
    (RESULTS / "type1.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
