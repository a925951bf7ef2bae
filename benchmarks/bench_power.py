"""Stopping times of the betting strategies on shifted synthetic features.

Suspect rows ~ N(δ on the first `--shifted` features, I), held-out rows ~ N(0, I); every trial
is a fresh draw run through the full online test. The paper's default (ONS, MMD payoff, λmax 0.8)
is compared with Kelly (Eq. 14), the mixture strategy, the KS and diff payoffs, and λmax 0.9. All
configurations are valid at the same α (the null rejection rate is measured too). Stopping times
of non-rejecting trials are censored at N_max, so the mean over all trials ("mean stop,
censored") compares configurations with different TPRs fairly; the mean over rejecting trials
(the paper's figure) is reported as well (studies.synthetic.power_rows).

    python benchmarks/bench_power.py [--trials 200] [--null-trials 400] [--n-max 800]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from studies.synthetic import best_saving, power_rows, render_power

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--null-trials", type=int, default=400)
    ap.add_argument("--n-max", type=int, default=800)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--shifted", type=int, default=2)
    ap.add_argument("--delta", type=float, default=0.25)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows, censored = power_rows(args.trials, args.null_trials, args.n_max, args.features, args.shifted, args.delta,
                                args.alpha, args.batch, args.seed)
    verdict = best_saving(rows, censored)
    table = render_power(vars(args), rows, verdict, time.perf_counter() - t0)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "power.json").write_text(json.dumps({"setup": vars(args), "rows": rows, "verdict": verdict}, indent=1))
    (RESULTS / "power.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
