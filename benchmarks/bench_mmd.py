"""Why the kernel-MMD payoff decided slowly on scalar scores, and the fix (issue 11 item 3).

One run measures, with fresh random draws (seeded):

A. Diagnosis on scalar score streams X = s·N(δ, 1), Y = s·N(0, 1) at score
   scales s: size of the edge v_t = g_t(X_t) − g_t(Y_t), tanh saturation,
   projection activity and the x² share of the witness, for the paper's
   witness on raw scores ("mmd") and on past-standardised scores
   ("mmd-std", the fix), plus their power.
B. Power on scalar score streams: TPR and mean pairs to decision (censored at
   N_max, bootstrap 95% CI) of mmd, mmd-std, diff and ks with ONS and the
   mixture strategy.
C. The full online test on synthetic weak-signal features (p N(0, I)
   features, the first `--shifted` shifted by δ for suspects): scores come
   from the online scorer exactly as in SequentialTest (score X_t, Y_t with
   the fit on pairs < t, then update); the scorer does not depend on the
   payoff, so one scorer run per trial serves every payoff (checked against
   SequentialTest on a small batch). ``--epochs`` (default 10, paper 30) keeps
   the O(n²) refits within the time budget.
D. Type-I error of the fixed payoff on fresh null streams (scalar streams of
   very different scales / tails, and the full pipeline with suspect = held-out
   distribution): one-sided binomial test of the rejection rate vs α.

The computation: studies.mmd_payoff.

    python benchmarks/bench_mmd.py   # → benchmarks/results/mmd_payoff.{md,json} (md: text above the marker is kept)
    python benchmarks/bench_mmd.py --render   # the measured part of mmd_payoff.md from mmd_payoff.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from studies.mmd_payoff import (MARKER, diagnosis, null_rows, pipeline_power, provenance,
                                                render_mmd, scalar_power)

RESULTS = Path(__file__).parent / "results"


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--diag-trials", type=int, default=400)
    ap.add_argument("--scalar-trials", type=int, default=400)
    ap.add_argument("--scalar-n", type=int, default=500)
    ap.add_argument("--scalar-delta", type=float, default=0.3)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--n-max", type=int, default=1000)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--shifted", type=int, default=2)
    ap.add_argument("--delta", type=float, default=0.2)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--null-trials", type=int, default=2000)
    ap.add_argument("--null-n", type=int, default=1000)
    ap.add_argument("--null-pipeline-n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--render", action="store_true", help="only rewrite mmd_payoff.md from mmd_payoff.json")
    return ap.parse_args()


def main() -> None:
    args = parse()
    if args.render:
        return write(json.loads((RESULTS / "mmd_payoff.json").read_text()), json_too=False)
    setup = {k: v for k, v in vars(args).items() if k != "render"}
    t0, rng = time.perf_counter(), np.random.default_rng(args.seed)
    out = {"setup": setup, **provenance(), "diagnosis": diagnosis(rng, args.diag_trials, args.alpha)}
    print(f"A done {time.perf_counter() - t0:.0f} s", flush=True)
    power = scalar_power(rng, args.scalar_trials, args.scalar_n, args.scalar_delta, args.alpha)
    print(f"B done {time.perf_counter() - t0:.0f} s", flush=True)
    rows, out["pipeline_scores"] = pipeline_power(rng, setup)
    out["power"] = power + rows
    print(f"C done {time.perf_counter() - t0:.0f} s", flush=True)
    out["type1"] = null_rows(rng, setup)
    out["wall_s"] = time.perf_counter() - t0
    write(out)


def write(out: dict, json_too: bool = True) -> None:
    """mmd_payoff.json and the measured part of mmd_payoff.md: hand-written text above ``MARKER`` is kept."""
    RESULTS.mkdir(exist_ok=True)
    if json_too:
        (RESULTS / "mmd_payoff.json").write_text(json.dumps(out, indent=1))
    md, text = RESULTS / "mmd_payoff.md", render_mmd(out)
    head = md.read_text().split(MARKER)[0] if md.exists() and MARKER in md.read_text() else ""
    md.write_text(head + MARKER + "\n" + text)
    print(text)


if __name__ == "__main__":
    main()
