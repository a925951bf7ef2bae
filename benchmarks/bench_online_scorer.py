"""Online scorer vs the paper's scorer: speed, memory, power and Type-I in one run.

Measures (all in this one invocation, results with date/hardware/commit):

a) seconds of ``run_test`` on a 2000-pair × 32-feature null table (no early
   stop), scorer "online" vs "paper", and their ratio;
b) ``simulate`` of 2000 trials × 1000 pairs × 32 features of the null (online);
c) peak RSS (ru_maxrss of a fresh subprocess each) of run_test on 1k and 10k
   pairs (online; paper on 1k) and of the simulate of (b);
d) weak signal — 32 N(0,1) features, 2 of them shifted by δ for suspects —
   mean pairs-to-decision (censored at N_max) with a bootstrap 95% CI and
   power, online vs paper, for diff/mixture and mmd/ons, on the same streams;
e) Type-I of the online scorer on fresh null streams (2000 trials), one-sided
   binomial test vs α = 0.05 (scipy.stats.binomtest).

The measurements: studies.scorer_cost (a-c) and synthetic (d, e).

    OMP_NUM_THREADS=2 python benchmarks/bench_online_scorer.py
    python benchmarks/bench_online_scorer.py --render   # online_scorer.md from online_scorer.json (notes below kept)
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from studies.scorer_cost import hardware, in_child, render_online, time_run_test
from studies.synthetic import null_streams, weak_signal

RESULTS = Path(__file__).parent / "results"
NOTES = "\nNotes."  # hand-written notes appended to online_scorer.md after a run: kept by --render


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim-trials", type=int, default=2000)
    ap.add_argument("--sim-pairs", type=int, default=1000)
    ap.add_argument("--weak-trials", type=int, default=200)
    ap.add_argument("--weak-pairs", type=int, default=500)
    ap.add_argument("--delta", type=float, default=0.3)
    ap.add_argument("--t1-trials", type=int, default=2000)
    ap.add_argument("--render", action="store_true", help="only rewrite online_scorer.md from online_scorer.json")
    args = ap.parse_args()
    md = RESULTS / "online_scorer.md"
    if args.render:
        notes = md.read_text()[md.read_text().index(NOTES):] if md.exists() and NOTES in md.read_text() else ""
        return md.write_text(render_online(json.loads((RESULTS / "online_scorer.json").read_text())) + notes)
    out = {"hardware": hardware(), "load_avg_start": os.getloadavg()}
    print("(a) run_test 2000 x 32, null table", flush=True)
    out["run_test"] = time_run_test()
    print("(b, c) simulate and peak RSS, each in a fresh process", flush=True)
    out["simulate"] = in_child("simulate", args.sim_pairs, "online", args.sim_trials)
    out["rss"] = [in_child("run_test", 1000), in_child("run_test", 10000), in_child("run_test", 1000, "paper"),
                  in_child("simulate", args.sim_pairs // 10, "online", args.sim_trials)]
    print("(d) weak signal, same streams for both scorers", flush=True)
    out["weak_signal"] = weak_signal(args.weak_trials, args.weak_pairs, args.delta)
    print("(e) Type-I of the online scorer", flush=True)
    out["type1"] = null_streams(args.t1_trials)
    out["load_avg_end"] = os.getloadavg()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "online_scorer.json").write_text(json.dumps(out, indent=1))
    md.write_text(render_online(out))
    print(render_online(out))


if __name__ == "__main__":
    main()
