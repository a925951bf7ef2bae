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

    OMP_NUM_THREADS=2 python benchmarks/bench_online_scorer.py
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parent.parent


def _table(S, H):
    import pandas as pd
    df = pd.DataFrame(np.vstack([S, H]), columns=[f"f{i}" for i in range(S.shape[1])])
    df["set"] = ["suspect"] * len(S) + ["heldout"] * len(H)
    return df


def _null_table(pairs, p, seed=0):
    rng = np.random.default_rng(seed)
    return _table(rng.normal(size=(pairs, p)), rng.normal(size=(pairs, p)))


# -- (c) a measurement in a fresh process, so ru_maxrss is its own peak -------
def _child(kind: str, pairs: int, scorer: str, trials: int) -> None:
    from trainspotter.auditing.tables import run_test, simulate
    from trainspotter.stats.sequential import TestConfig
    cfg = TestConfig(scorer=scorer)
    t0 = time.perf_counter()
    if kind == "run_test":
        out = run_test(_null_table(pairs, 32), cfg)
        extra = {"pairs_used": out["pairs_used"], "reject": out["reject"]}
    else:
        rng = np.random.default_rng(1)
        df = _table(rng.normal(size=(10, 32)), rng.normal(size=(2 * pairs, 32)))
        out = simulate(df, cfg, trials=trials, n_max=pairs, null=True, seed=0, batch_size=trials,
                       alphas=(0.01, 0.05, 0.1))
        extra = {"fpr": out["fpr"], "by_alpha": {a: v["rejection_rate"] for a, v in out["by_alpha"].items()}}
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"kind": kind, "pairs": pairs, "scorer": scorer, "trials": trials, "seconds": wall,
                      "cpu_seconds": ru.ru_utime + ru.ru_stime, "peak_rss_mib": ru.ru_maxrss / 1024, **extra}))


def _in_child(kind, pairs, scorer="online", trials=0) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}")
    out = subprocess.run([sys.executable, __file__, "--child", kind, str(pairs), scorer, str(trials)],
                         capture_output=True, text=True, env=env, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  {kind} {pairs} pairs {scorer} trials={trials}: {res['seconds']:.2f} s, "
          f"peak RSS {res['peak_rss_mib']:.0f} MiB", flush=True)
    return res


# -- (a) ----------------------------------------------------------------------
def time_run_test(pairs=2000, p=32) -> dict:
    from trainspotter.auditing.tables import run_test
    from trainspotter.stats.sequential import TestConfig
    df = _null_table(pairs, p)
    out = {}
    for scorer in ("online", "paper"):
        t0 = time.perf_counter()
        res = run_test(df, TestConfig(scorer=scorer))
        out[scorer] = {"seconds": time.perf_counter() - t0, "pairs_used": res["pairs_used"]}
        print(f"  run_test {pairs}x{p} {scorer}: {out[scorer]['seconds']:.2f} s", flush=True)
    out["ratio_paper_over_online"] = out["paper"]["seconds"] / out["online"]["seconds"]
    return out


# -- (d) ----------------------------------------------------------------------
def _boot_ci(x, rng, b=2000):
    means = rng.choice(x, size=(b, len(x)), replace=True).mean(axis=1)
    return [float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))]


def weak_signal(trials, n, delta, p=32, shifted=2, seed=1) -> dict:
    """Same streams for every scorer: trials × n fresh pairs, suspects shifted by δ on `shifted` features."""
    from trainspotter.stats.sequential import TestConfig
    from trainspotter.stats.simulation import stream_stops
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(trials * n, p))
    S[:, :shifted] += delta
    H = rng.normal(size=(trials * n, p))
    idx = np.arange(trials * n).reshape(trials, n)
    out = {"trials": trials, "n_max": n, "delta": delta, "features": p, "shifted": shifted, "cells": []}
    for payoff, strategy in (("diff", "mixture"), ("mmd", "ons")):
        for scorer in ("online", "paper"):
            t0 = time.process_time()
            st = stream_stops(S, H, idx, idx, [TestConfig(scorer=scorer, payoff=payoff, strategy=strategy)],
                               [0.05])[0][0][0]
            cens = np.where(st > 0, st, n).astype(float)  # a non-rejection counts as N_max
            cell = {"payoff": payoff, "strategy": strategy, "scorer": scorer, "power": float((st > 0).mean()),
                    "mean_pairs": float(cens.mean()), "mean_pairs_ci95": _boot_ci(cens, np.random.default_rng(0)),
                    "cpu_seconds": time.process_time() - t0}
            out["cells"].append(cell)
            print(f"  weak signal {payoff}/{strategy} {scorer}: power {cell['power']:.3f}, mean pairs "
                  f"{cell['mean_pairs']:.1f} {cell['mean_pairs_ci95']}", flush=True)
    return out


# -- (e) ----------------------------------------------------------------------
def type1(trials=2000, n=200, p=32, alpha=0.05, seed=7) -> dict:
    from scipy.stats import binomtest

    from trainspotter.stats.sequential import TestConfig
    from trainspotter.stats.simulation import stream_stops
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(2 * trials * n, p))  # fresh rows for every pair of every trial
    idx = np.arange(2 * trials * n).reshape(trials, 2 * n)
    out = {"trials": trials, "n_max": n, "features": p, "alpha": alpha, "cells": []}
    for payoff, strategy in (("diff", "mixture"), ("mmd", "ons")):
        st = stream_stops(H, H, idx[:, :n], idx[:, n:], [TestConfig(payoff=payoff, strategy=strategy)], [alpha])[0][0][0]
        k = int((st > 0).sum())
        pv = binomtest(k, trials, alpha, alternative="greater").pvalue
        out["cells"].append({"payoff": payoff, "strategy": strategy, "rejections": k, "rate": k / trials,
                             "binom_p_greater": pv})
        print(f"  Type-I online {payoff}/{strategy}: {k}/{trials} = {k / trials:.4f}, binomial p = {pv:.3g}",
              flush=True)
    return out


def _hardware() -> dict:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "nproc": os.cpu_count(), "cpu": cpu,
            "commit": commit, "python": platform.python_version(), "numpy": np.__version__,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--sim-trials", type=int, default=2000)
    ap.add_argument("--sim-pairs", type=int, default=1000)
    ap.add_argument("--weak-trials", type=int, default=200)
    ap.add_argument("--weak-pairs", type=int, default=500)
    ap.add_argument("--delta", type=float, default=0.3)
    ap.add_argument("--t1-trials", type=int, default=2000)
    args = ap.parse_args()
    if args.child:
        kind, pairs, scorer, trials = args.child
        return _child(kind, int(pairs), scorer, int(trials))
    out = {"hardware": _hardware(), "load_avg_start": os.getloadavg()}
    print("(a) run_test 2000 x 32, null table", flush=True)
    out["run_test"] = time_run_test()
    print("(b, c) simulate and peak RSS, each in a fresh process", flush=True)
    out["simulate"] = _in_child("simulate", args.sim_pairs, "online", args.sim_trials)
    out["rss"] = [_in_child("run_test", 1000), _in_child("run_test", 10000), _in_child("run_test", 1000, "paper"),
                  _in_child("simulate", args.sim_pairs // 10, "online", args.sim_trials)]
    print("(d) weak signal, same streams for both scorers", flush=True)
    out["weak_signal"] = weak_signal(args.weak_trials, args.weak_pairs, args.delta)
    print("(e) Type-I of the online scorer", flush=True)
    out["type1"] = type1(args.t1_trials)
    out["load_avg_end"] = os.getloadavg()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "online_scorer.json").write_text(json.dumps(out, indent=1))
    (RESULTS / "online_scorer.md").write_text(_markdown(out))
    print(_markdown(out))


def _markdown(o: dict) -> str:
    h, rt, sim = o["hardware"], o["run_test"], o["simulate"]
    la = lambda v: "/".join(f"{x:.2f}" for x in v)  # noqa: E731
    lines = [
        "# Online scorer vs the paper's scorer\n",
        f"{h['date']}, commit {h['commit']}, {h['nproc']} CPUs ({h['cpu']}), OMP_NUM_THREADS={h['omp_num_threads']}, "
        f"numpy {h['numpy']}. Load average (1/5/15 min) at start {la(o['load_avg_start'])}, "
        f"at end {la(o['load_avg_end'])} — the machine was shared, so wall times are upper bounds.\n",
        "Command: `OMP_NUM_THREADS=2 python benchmarks/bench_online_scorer.py` (one run).\n",
        "## Speed (online = NewtonScorer, paper = A.4 30-epoch Adam refit)\n",
        "| measurement | online | paper | paper / online |", "|---|---|---|---|",
        f"| `run_test`, 2000 pairs × 32 features, null (all pairs used) | {rt['online']['seconds']:.2f} s | "
        f"{rt['paper']['seconds']:.2f} s | {rt['ratio_paper_over_online']:.1f} |",
        f"| `simulate`, {sim['trials']} trials × {sim['pairs']} pairs × 32 features, null | {sim['seconds']:.1f} s "
        f"(CPU {sim['cpu_seconds']:.1f} s) | not run (did not finish in 15 min before) | |\n",
        "## Peak memory (ru_maxrss of a fresh process per line)\n",
        "| run | scorer | seconds | peak RSS MiB |", "|---|---|---|---|"]
    for r in [sim] + o["rss"]:
        what = f"run_test {r['pairs']} pairs" if r["kind"] == "run_test" else \
            f"simulate {r['trials']} trials × {r['pairs']} pairs"
        lines.append(f"| {what} | {r['scorer']} | {r['seconds']:.2f} | {r['peak_rss_mib']:.0f} |")
    ws = o["weak_signal"]
    lines += ["", f"## Power on weak signal: 32 N(0,1) features, {ws['shifted']} shifted by δ = {ws['delta']} "
                  f"for suspects; {ws['trials']} trials, N_max = {ws['n_max']}; same streams for both scorers\n",
              "Mean pairs-to-decision counts a non-rejection as N_max (censored); CI: bootstrap 95% over trials.\n",
              "| payoff / strategy | scorer | power at N_max | mean pairs to decision [95% CI] |",
              "|---|---|---|---|"]
    for c in ws["cells"]:
        lo, hi = c["mean_pairs_ci95"]
        lines.append(f"| {c['payoff']} / {c['strategy']} | {c['scorer']} | {c['power']:.3f} | "
                     f"{c['mean_pairs']:.1f} [{lo:.1f}, {hi:.1f}] |")
    t1 = o["type1"]
    lines += ["", f"## Type-I of the online scorer: fresh N(0, I) streams, {t1['trials']} trials × {t1['n_max']} "
                  f"pairs × {t1['features']} features, α = {t1['alpha']}\n",
              "| payoff / strategy | rejections | rate | one-sided binomial p (H: rate ≤ α) |", "|---|---|---|---|"]
    for c in t1["cells"]:
        lines.append(f"| {c['payoff']} / {c['strategy']} | {c['rejections']}/{t1['trials']} | {c['rate']:.4f} | "
                     f"{c['binom_p_greater']:.3g} |")
    sims = o["simulate"]["by_alpha"]
    lines += ["", "Null `simulate` of (b), every level from one pass of wealth paths: " +
              ", ".join(f"α = {a}: FPR {v:.4f}" for a, v in sims.items()) + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
