"""Type-I error of the sequential test on fresh null streams (BADI App. C.2).

Each trial draws new data with the same distribution on both sides
(N(0, I) features), runs the full online test (scorer → payoff → bets) and
records whether the wealth ever reached 1/α. Under H0 this must happen with
probability ≤ α (Ville's inequality). A one-sided binomial test of
H: rate ≤ α flags a rate significantly above α — that would be a bug.

The stakes never feed back into the payoffs, so one pass of the scorer and
witness per payoff serves every strategy (the strategies see the same fresh
streams).

    python benchmarks/bench_type1.py [--trials 5000] [--pairs 150] [--features 4]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from trainspotter.stats.payoffs import PAYOFFS
from trainspotter.stats.strategies import STRATEGIES
from trainspotter.stats.simulation import run_batch, stop_times
from trainspotter.stats.sequential import TestConfig

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

    rng = np.random.default_rng(args.seed)
    rows, t0 = [], time.perf_counter()
    for payoff in args.payoffs.split(","):
        cfg = TestConfig(payoff=payoff, alpha=args.alpha, lambda_max=args.lambda_max)
        rejections = {s: 0 for s in STRATEGIES}
        for start in range(0, args.trials, args.batch):
            b = min(args.batch, args.trials - start)
            X, Y = rng.normal(size=(2, b, args.pairs, args.features))  # fresh null data
            cfg = cfg.model_copy(update={"seed": int(rng.integers(2**31))})
            u = run_batch(X, Y, cfg)["u"]
            for s in STRATEGIES:
                rejections[s] += int((stop_times(u, s, args.lambda_max, args.alpha) > 0).sum())
        for s in STRATEGIES:
            k = rejections[s]
            test = binomtest(k, args.trials, args.alpha, alternative="greater")
            ci = binomtest(k, args.trials).proportion_ci(0.95)
            rows.append({"payoff": payoff, "strategy": s, "trials": args.trials, "rejections": k,
                         "rate": k / args.trials, "ci95": [ci.low, ci.high], "binom_p": test.pvalue,
                         "significantly_above_alpha": bool(test.pvalue < 1e-3)})
        print(f"  {payoff}: done after {time.perf_counter() - t0:.0f} s", flush=True)

    setup = {k: v for k, v in vars(args).items()}
    lines = [f"# Type-I error on fresh null streams\n",
             f"{args.trials} trials per strategy, {args.pairs} pairs × {args.features} N(0, I) features per trial, "
             f"α = {args.alpha}, λmax = {args.lambda_max}. Binomial test of H: rate ≤ α (one-sided); "
             f"flag at p < 1e-3. Wall time {time.perf_counter() - t0:.0f} s.\n",
             "| payoff | strategy | rejections | rate | 95% CI | binomial p | above α? |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['payoff']} | {r['strategy']} | {r['rejections']}/{r['trials']} | {r['rate']:.4f} | "
                     f"[{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}] | {r['binom_p']:.3g} | "
                     f"{'YES — bug' if r['significantly_above_alpha'] else 'no'} |")
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "type1.json").write_text(json.dumps({"setup": setup, "rows": rows}, indent=1))
    (RESULTS / "type1.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
