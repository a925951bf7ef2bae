"""What the online scorer costs (``benchmarks/bench_scoring.py``, ``bench_online_scorer.py``): the
sequential test's scorer refit round by round (BADI App. A.4: a logistic layer on the A.7
normalised, trimmed features of pairs < t) against the same warm-started algorithm in torch and a
scorer retrained from scratch each round (scikit-learn), and the online scorer ("online",
``stats.newton_scorer``) against the paper's ("paper", ``stats.adam_scorer``): seconds of
``run_test`` and ``simulate`` on null tables, and each one's peak memory in a fresh process
(``ru_maxrss``). Power and Type-I on the same streams: ``studies.synthetic``.
"""

from __future__ import annotations

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

__all__ = ["normalise", "time_online", "time_torch", "time_scratch", "render_scoring", "null_table", "measure",
           "in_child", "time_run_test", "hardware", "render_online"]


# -- the scorer's refit, three ways (bench_scoring.py) ------------------------------------------
def normalise(rows, new, trim=0.025):
    """A.7 pre-processing with statistics of ``rows`` (past only), applied to ``new``: z-scores,
    and 0 outside the [trim, 1 − trim] quantiles of each column."""
    mu, sd = rows.mean(axis=0), rows.std(axis=0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    lo = np.quantile(rows, trim, axis=0, method="lower")
    hi = np.quantile(rows, 1 - trim, axis=0, method="higher")
    z = (new - mu) / sd
    z[(new < lo) | (new > hi)] = 0.0
    return z


def time_online(X, Y):
    """Seconds of the whole sequential test with the paper's scorer (numpy, warm-started Adam),
    MMD and ONS, and its result."""
    from trainspotter.stats.sequential import SequentialTest, TestConfig

    t0 = time.perf_counter()
    res = SequentialTest(X.shape[1], TestConfig(scorer="paper")).run(X, Y, stop_on_reject=False)
    return time.perf_counter() - t0, res


def time_torch(X, Y, epochs=30, lr=0.01):
    """Seconds of the same warm-started scorer written with torch.nn.Linear + torch.optim.Adam."""
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
    """Seconds of a scorer retrained from scratch each round: LogisticRegression fitted to
    convergence on pairs < t."""
    from sklearn.linear_model import LogisticRegression

    rows = np.empty((0, X.shape[1]))
    t0 = time.perf_counter()
    for x, y in zip(X, Y):
        if len(rows) >= 2:
            model = LogisticRegression().fit(normalise(rows, rows), np.tile([1.0, 0.0], len(rows) // 2))
            model.decision_function(normalise(rows, np.stack([x, y])))
        rows = np.vstack([rows, x, y])
    return time.perf_counter() - t0


def render_scoring(out: dict) -> str:
    """scoring.md from scoring.json's ``out``."""
    t_online, t_scratch, t_torch = out["online_full_test_s"], out["scratch_sklearn_scorer_s"], out["torch_warm_scorer_s"]
    lines = ["# Online scorer cost\n",
             f"{out['pairs']} pairs × {out['features']} features, 30 epochs per round, one process "
             f"(OMP_NUM_THREADS={out['omp_num_threads']}, 1-min load avg at the end {out['load_avg_1min']:.2f}).\n",
             "| variant | seconds | online / variant |", "|---|---|---|",
             f"| online: full sequential test (numpy scorer + MMD + ONS) | {t_online:.2f} | 1.00 |",
             f"| scorer retrained from scratch each round (sklearn LogisticRegression) | {t_scratch:.2f} | "
             f"{t_online / t_scratch:.3f} |"]
    if t_torch is not None:
        lines.append(f"| same warm-started scorer in torch (nn.Linear + Adam) | {t_torch:.2f} | {t_online / t_torch:.3f} |")
    return "\n".join(lines)


# -- online against paper (bench_online_scorer.py) ----------------------------------------------
def _table(S, H):
    import pandas as pd

    df = pd.DataFrame(np.vstack([S, H]), columns=[f"f{i}" for i in range(S.shape[1])])
    df["set"] = ["suspect"] * len(S) + ["heldout"] * len(H)
    return df


def null_table(pairs, p, seed=0):
    """A features table of ``pairs`` N(0, I) suspect and held-out rows of ``p`` columns."""
    rng = np.random.default_rng(seed)
    return _table(rng.normal(size=(pairs, p)), rng.normal(size=(pairs, p)))


def measure(kind: str, pairs: int, scorer: str, trials: int) -> dict:
    """One measurement in this process: ``run_test`` on a null table of ``pairs`` × 32, or
    ``simulate`` of ``trials`` × ``pairs`` null trials; its seconds, CPU seconds and peak RSS."""
    from trainspotter.auditing.tables import run_test, simulate
    from trainspotter.stats.sequential import TestConfig

    cfg = TestConfig(scorer=scorer)
    t0 = time.perf_counter()
    if kind == "run_test":
        out = run_test(null_table(pairs, 32), cfg)
        extra = {"pairs_used": out["pairs_used"], "reject": out["reject"]}
    else:
        rng = np.random.default_rng(1)
        df = _table(rng.normal(size=(10, 32)), rng.normal(size=(2 * pairs, 32)))
        out = simulate(df, cfg, trials=trials, n_max=pairs, null=True, seed=0, batch_size=trials,
                       alphas=(0.01, 0.05, 0.1))
        extra = {"fpr": out["fpr"], "by_alpha": {a: v["rejection_rate"] for a, v in out["by_alpha"].items()}}
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"kind": kind, "pairs": pairs, "scorer": scorer, "trials": trials, "seconds": wall,
            "cpu_seconds": ru.ru_utime + ru.ru_stime, "peak_rss_mib": ru.ru_maxrss / 1024, **extra}


def in_child(kind, pairs, scorer="online", trials=0) -> dict:
    """``measure`` in a fresh process, so that ru_maxrss is its own peak."""
    code = ("import json; from studies.scorer_cost import measure; "
            f"print(json.dumps(measure({kind!r}, {int(pairs)}, {scorer!r}, {int(trials)})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  {kind} {pairs} pairs {scorer} trials={trials}: {res['seconds']:.2f} s, "
          f"peak RSS {res['peak_rss_mib']:.0f} MiB", flush=True)
    return res


def time_run_test(pairs=2000, p=32) -> dict:
    """Seconds of ``run_test`` on a null table (all pairs used), online and paper, and their ratio."""
    from trainspotter.auditing.tables import run_test
    from trainspotter.stats.sequential import TestConfig

    df = null_table(pairs, p)
    out = {}
    for scorer in ("online", "paper"):
        t0 = time.perf_counter()
        res = run_test(df, TestConfig(scorer=scorer))
        out[scorer] = {"seconds": time.perf_counter() - t0, "pairs_used": res["pairs_used"]}
        print(f"  run_test {pairs}x{p} {scorer}: {out[scorer]['seconds']:.2f} s", flush=True)
    out["ratio_paper_over_online"] = out["paper"]["seconds"] / out["online"]["seconds"]
    return out


def hardware() -> dict:
    """When, on what CPU, at which commit, with which numpy and OMP threads."""
    from harness.machine import git_commit

    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "nproc": os.cpu_count(), "cpu": cpu,
            "commit": git_commit(short=True), "python": platform.python_version(), "numpy": np.__version__,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}


def _power_lines(o: dict) -> list[str]:
    ws, t1 = o["weak_signal"], o["type1"]
    lines = ["", f"## Power on weak signal: 32 N(0,1) features, {ws['shifted']} shifted by δ = {ws['delta']} "
                 f"for suspects; {ws['trials']} trials, N_max = {ws['n_max']}; same streams for both scorers\n",
             "Mean pairs-to-decision counts a non-rejection as N_max (censored); CI: bootstrap 95% over trials.\n",
             "| payoff / strategy | scorer | power at N_max | mean pairs to decision [95% CI] |", "|---|---|---|---|"]
    lines += [f"| {c['payoff']} / {c['strategy']} | {c['scorer']} | {c['power']:.3f} | "
              f"{c['mean_pairs']:.1f} [{c['mean_pairs_ci95'][0]:.1f}, {c['mean_pairs_ci95'][1]:.1f}] |"
              for c in ws["cells"]]
    lines += ["", f"## Type-I of the online scorer: fresh N(0, I) streams, {t1['trials']} trials × {t1['n_max']} "
                  f"pairs × {t1['features']} features, α = {t1['alpha']}\n",
              "| payoff / strategy | rejections | rate | one-sided binomial p (H: rate ≤ α) |", "|---|---|---|---|"]
    return lines + [f"| {c['payoff']} / {c['strategy']} | {c['rejections']}/{t1['trials']} | {c['rate']:.4f} | "
                    f"{c['binom_p_greater']:.3g} |" for c in t1["cells"]]


def render_online(o: dict) -> str:
    """online_scorer.md from online_scorer.json's ``o``."""
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
    sims = o["simulate"]["by_alpha"]
    lines += [*_power_lines(o), "", "Null `simulate` of (b), every level from one pass of wealth paths: " +
              ", ".join(f"α = {a}: FPR {v:.4f}" for a, v in sims.items()) + "."]
    return "\n".join(lines) + "\n"
