"""Cost of the online scorer: the full sequential test vs retraining per round.

One run on `--pairs` pairs × `--features` features (default 2000 × 32), all timed in the same
process (studies.scorer_cost):

* online   — the sequential test with scorer="paper": trainspotter's vectorised numpy scorer
             (warm-started full-batch Adam, 30 epochs per round) + MMD + ONS;
* torch    — the same warm-started algorithm written the usual way with
             torch.nn.Linear + torch.optim.Adam (scorer only);
* scratch  — retraining the scorer from scratch each round: sklearn
             LogisticRegression fitted to convergence on pairs < t (scorer only).

    python benchmarks/bench_scoring.py [--pairs 2000] [--features 32]
    python benchmarks/bench_scoring.py --render   # scoring.md from scoring.json
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from studies.scorer_cost import render_scoring, time_online, time_scratch, time_torch

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--render", action="store_true", help="only rewrite scoring.md from scoring.json")
    args = ap.parse_args()
    if args.render:
        return (RESULTS / "scoring.md").write_text(render_scoring(json.loads((RESULTS / "scoring.json").read_text())) + "\n")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.pairs, args.features))
    X[:, :4] += 0.1
    Y = rng.normal(size=(args.pairs, args.features))
    t_online, res = time_online(X, Y)
    print(f"  online test: {t_online:.2f} s", flush=True)
    t_scratch = time_scratch(X, Y)
    print(f"  scratch (sklearn) scorer: {t_scratch:.2f} s", flush=True)
    t_torch = None if args.skip_torch else time_torch(X, Y)
    out = {"pairs": args.pairs, "features": args.features, "epochs": 30,
           "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "load_avg_1min": os.getloadavg()[0],
           "online_full_test_s": t_online, "scratch_sklearn_scorer_s": t_scratch, "torch_warm_scorer_s": t_torch,
           "ratio_online_over_scratch": t_online / t_scratch,
           "ratio_online_over_torch": None if t_torch is None else t_online / t_torch,
           "online_final_wealth": float(res.wealth[-1]), "online_stop_time": res.stop_time}
    table = render_scoring(out)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scoring.json").write_text(json.dumps(out, indent=1))
    (RESULTS / "scoring.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
