"""Cost of the online scorer: the full sequential test vs retraining per round.

One run on `--pairs` pairs × `--features` features (default 2000 × 32), all
timed in the same process:

* online   — the sequential test with scorer="paper": trainspotter's vectorised numpy scorer
             (warm-started full-batch Adam, 30 epochs per round) + MMD + ONS;
* torch    — the same warm-started algorithm written the usual way with
             torch.nn.Linear + torch.optim.Adam (scorer only);
* scratch  — retraining the scorer from scratch each round: sklearn
             LogisticRegression fitted to convergence on pairs < t (scorer only).

    python benchmarks/bench_scoring.py [--pairs 2000] [--features 32]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"


def normalise(rows, new, trim=0.025):
    """A.7 pre-processing with statistics of `rows` (past only), applied to `new`."""
    mu, sd = rows.mean(axis=0), rows.std(axis=0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    lo = np.quantile(rows, trim, axis=0, method="lower")
    hi = np.quantile(rows, 1 - trim, axis=0, method="higher")
    z = (new - mu) / sd
    z[(new < lo) | (new > hi)] = 0.0
    return z


def time_online(X, Y):
    from trainspotter.stats.sequential import SequentialTest, TestConfig
    t0 = time.perf_counter()
    res = SequentialTest(X.shape[1], TestConfig(scorer="paper")).run(X, Y, stop_on_reject=False)
    return time.perf_counter() - t0, res


def time_torch(X, Y, epochs=30, lr=0.01):
    import torch
    torch.set_num_threads(1)
    p = X.shape[1]
    lin = torch.nn.Linear(p, 1).double()
    opt = torch.optim.Adam(lin.parameters(), lr=lr)
    rows = np.empty((0, p))
    t0 = time.perf_counter()
    for x, y in zip(X, Y):
        if len(rows):
            with torch.no_grad():
                lin(torch.tensor(normalise(rows, np.stack([x, y]))))
        rows = np.vstack([rows, x, y])
        z = torch.tensor(normalise(rows, rows))
        labels = torch.tensor(np.tile([1.0, 0.0], len(rows) // 2))
        for _ in range(epochs):
            opt.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(lin(z)[:, 0], labels).backward()
            opt.step()
    return time.perf_counter() - t0


def time_scratch(X, Y):
    from sklearn.linear_model import LogisticRegression
    rows = np.empty((0, X.shape[1]))
    t0 = time.perf_counter()
    for x, y in zip(X, Y):
        if len(rows) >= 2:
            model = LogisticRegression().fit(normalise(rows, rows), np.tile([1.0, 0.0], len(rows) // 2))
            model.decision_function(normalise(rows, np.stack([x, y])))
        rows = np.vstack([rows, x, y])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--skip-torch", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.pairs, args.features))
    X[:, :4] += 0.1
    Y = rng.normal(size=(args.pairs, args.features))

    t_online, res = time_online(X, Y)
    print(f"  online test: {t_online:.2f} s", flush=True)
    t_scratch = time_scratch(X, Y)
    print(f"  scratch (sklearn) scorer: {t_scratch:.2f} s", flush=True)
    t_torch = None if args.skip_torch else time_torch(X, Y)
    if t_torch is not None:
        print(f"  torch scorer: {t_torch:.2f} s", flush=True)

    out = {"pairs": args.pairs, "features": args.features, "epochs": 30,
           "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "load_avg_1min": os.getloadavg()[0],
           "online_full_test_s": t_online, "scratch_sklearn_scorer_s": t_scratch, "torch_warm_scorer_s": t_torch,
           "ratio_online_over_scratch": t_online / t_scratch,
           "ratio_online_over_torch": None if t_torch is None else t_online / t_torch,
           "online_final_wealth": float(res.wealth[-1]), "online_stop_time": res.stop_time}
    lines = ["# Online scorer cost\n",
             f"{args.pairs} pairs × {args.features} features, 30 epochs per round, one process "
             f"(OMP_NUM_THREADS={out['omp_num_threads']}, 1-min load avg at the end {out['load_avg_1min']:.2f}).\n",
             "| variant | seconds | online / variant |", "|---|---|---|",
             f"| online: full sequential test (numpy scorer + MMD + ONS) | {t_online:.2f} | 1.00 |",
             f"| scorer retrained from scratch each round (sklearn LogisticRegression) | {t_scratch:.2f} | "
             f"{t_online / t_scratch:.3f} |"]
    if t_torch is not None:
        lines.append(f"| same warm-started scorer in torch (nn.Linear + Adam) | {t_torch:.2f} | {t_online / t_torch:.3f} |")
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scoring.json").write_text(json.dumps(out, indent=1))
    (RESULTS / "scoring.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
