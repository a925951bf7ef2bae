"""The matched audit on the shift suite's scenarios (``benchmarks/bench_shift_matched.py``; issue 36):
`audit --shift-check match` on the null shifts of shift.md, on alternatives (members of one kind
against unseen text of another: ``shift_matched.member_pools``) and on IID splits, beside the
default audit on the very same draws.

Per scenario and audit size, ``shift.scenario_trials`` draws the trials and runs the default audit;
where its blind check fired (``MatchedRuns.match_every``: on every draw), ``shift_matched.matched_trials``
matches the drawn texts (cross-fitted TF-IDF + surface propensity, optimal matching within 0.2 SD
of its logit; Rosenbaum & Rubin 1983, Austin 2011) and runs the guards and the test on the
matched pairs. On an alternative, ``same_kind`` runs the default audit with the same members
against unseen passages of their own kind at the mean matched pairs: the ceiling these members'
signal gives that many pairs with no shift at all. ``greedy_match`` is the baseline matching rule
(nearest-first within the caliper) that optimal matching replaced.
"""

from __future__ import annotations

import json
import os
import random
import time

import numpy as np
import pandas as pd
from pydantic import BaseModel

from trainspotter.auditing.matching import Encoded, match_pairs
from trainspotter.evaluation.shift_suite import (AUDITS, KINDS, ShiftConfig, _rate, guard_of, scenario_trials, suite_tests,
                                           verdicts)
from studies.shift_matched import matched_trials, member_pools, summarise_matched
from trainspotter.features.text import TextRows

__all__ = ["MatchedRuns", "greedy_match", "match_timings", "audit_tests", "scenarios", "same_kind", "add_ceilings",
           "run_scenarios", "OWN_KIND"]


class MatchedRuns(BaseModel):
    """What one run of the matched arm covers (``bench_shift_matched.py``'s options)."""

    testbed: str = "tiny-pretrain"
    sizes: list[int] = [20, 40, 80]  # passages per side; 0: the whole pools
    trials: int = 200
    whole_trials: int = 20  # trials at size 0
    size_trials: dict[int, int] = {}  # per-size overrides
    kinds: list[str] = list(KINDS)
    seed: int = 0
    audits: list[str] = list(AUDITS)
    parts: list[str] = ["null", "alternative", "iid"]  # which, in this order
    greedy: bool = False  # the header's record of ``greedy_match`` (the caller swaps the rule in)
    match_every: bool = False  # match every draw (the audit matches only where the blind check fired)
    timing_sizes: list[int] = [20, 80, 320, 0]

    def trials_at(self, n: int) -> int:
        return self.size_trials.get(n, self.whole_trials if n == 0 else self.trials)


def greedy_match(ls: np.ndarray, lh: np.ndarray, caliper: float, seed: int = 0) -> list[tuple[int, int]]:
    """The baseline matching (the library's rule until optimal matching replaced it): suspect
    rows in a seeded random order each take the free held-out row nearest in logit, if within
    ``caliper`` (Austin 2011); the pairs in a seeded random order."""
    free, pairs, order = np.ones(len(lh), dtype=bool), [], list(range(len(ls)))
    random.Random(f"{seed}:match").shuffle(order)
    for i in order:
        gaps = np.where(free, np.abs(lh - ls[i]), np.inf)
        j = int(np.argmin(gaps)) if len(lh) else 0
        if len(lh) and gaps[j] <= caliper:
            free[j] = False
            pairs.append((i, j))
    random.Random(f"{seed}:matched-order").shuffle(pairs)
    return pairs


def match_timings(pool_a: list[dict], pool_b: list[dict], sizes=(20, 80, 320, 0)) -> dict[str, float]:
    """Seconds of one ``match_pairs`` call (texts encoded in the call) at n per side (0: all)."""
    out = {}
    for n in sizes:
        k = n or min(len(pool_a), len(pool_b))
        s, h = [p["text"] for p in pool_a[:k]], [p["text"] for p in pool_b[:k]]
        t = time.perf_counter()
        match_pairs(s, h, seed=0)
        out[str(k)] = round(time.perf_counter() - t, 2)
    return out


def audit_tests(table: pd.DataFrame, test, audits: list[str]) -> dict:
    """The suite's tests of ``audits`` and the placebo checks that guard them: the other tests' streams
    would cost as much again and change nothing of these audits' rows."""
    keep = set(audits) | {guard_of(a) for a in audits}
    return {k: v for k, v in suite_tests(list(table.columns), test).items() if k in keep}


def scenarios(pools: dict, iid: dict, testbed: str, kinds: list[str], parts: list[str]) -> list[tuple]:
    """The (part, kind, suspect label, suspect, held-out label, held-out) asked for: parts, then
    kinds, in the order asked (IID last)."""
    out = []
    for kind, (la, a, lb, b) in pools.items():
        if kind in kinds:
            out += [("null", kind, la, a, lb, b), ("null", kind, lb, b, la, a)]
    for kind, (la, a, lb, b) in member_pools(testbed, pools).items():
        if kind.split("-")[0] in kinds:
            out.append(("alternative", kind, la, a, lb, b))
    out += [("iid", "iid", "member", iid["member"], "heldout", iid["heldout"]),
            ("iid", "iid", "nonmember", iid["nonmember"], "heldout", iid["heldout"])]
    out = [sc for sc in out if sc[0] in parts]  # (a part not asked for has no index)
    order = {k: i for i, k in enumerate(kinds)}
    return sorted(out, key=lambda sc: (parts.index(sc[0]), order.get(sc[1].split("-")[0], len(order))))


# the unseen pool of the members' own kind (shift_pools' side A or B; else the IID held-out split)
OWN_KIND = {"topic": ("topic", 1), "topic-r": ("topic", 3), "period": ("period", 1), "period-r": ("period", 3)}


def same_kind(kind, members, summary, pools, iid, rows, tests, test, trials, seed) -> dict:
    """The alternative's ceiling: the default audit, members against unseen passages of their own
    kind (``OWN_KIND``), at the mean matched pairs (at least 2), on ``trials`` draws."""
    own = pools[OWN_KIND[kind][0]][OWN_KIND[kind][1]] if kind in OWN_KIND else iid["heldout"]
    n = max(2, round(summary["matched_mean"]))
    same = scenario_trials(rows(members), rows(own), tests, test, trials, min(n, len(members), len(own)), seed)
    return {a: _rate(verdicts(same, a)["guarded"], test.alpha) for a in summary["tests"] if a in same["model"]}


def add_ceilings(summary: dict, pools: dict, iid: dict, frame: pd.DataFrame, testbed: str = "tiny-pretrain",
                 seed: int = 0) -> dict:
    """``same_kind`` for the alternative rows of a run's summary written before it existed."""
    test = ShiftConfig(testbed=testbed, seed=seed).test()
    tests = audit_tests(frame, test, ["gray"])
    rows = lambda ps: frame.loc[[p["id"] for p in ps]]  # noqa: E731
    members = {k: v[1] for k, v in member_pools(testbed, pools).items()}
    for s in summary["scenarios"]:
        if s["part"] == "alternative":
            s["same_kind"] = same_kind(s["kind"], members[s["kind"]], s, pools, iid, rows, tests, test, s["trials"], seed)
    return summary


def _header(runs: MatchedRuns, config: ShiftConfig, alpha: float, rows: int, start: float, timing: dict,
            commit: str, version: str) -> str:
    settings = {"sizes": runs.sizes, "trials": runs.trials, "size_trials": runs.size_trials,
                "whole_trials": runs.whole_trials, "seed": config.seed, "preset": config.preset, "alpha": alpha,
                "kinds": runs.kinds, "audits": runs.audits, "parts": runs.parts,
                "matching": "greedy" if runs.greedy else "optimal",
                "match": "every draw" if runs.match_every else "where the blind check fired"}
    return (f"testbed `{config.testbed}` · git {commit[:12]} · trainspotter {version} · "
            f"config {json.dumps(settings, separators=(',', ':'))}"
            f" · {rows} scenario rows · wall {(time.time() - start) / 60:.1f} min on "
            f"{os.cpu_count()} CPUs shared (1 thread, nice 10) · match_pairs s/call (texts encoded in "
            f"the call) at n per side: {timing}")


def _one_scenario(scenario: tuple, n: int, trials: int, runs: MatchedRuns, setup: dict) -> dict:
    """One row: the default audit and the matched one on the same ``trials`` draws of n a side."""
    part, kind, ls, s, lh, h = scenario
    t0, rows, test, seed = time.time(), setup["rows"], setup["test"], runs.seed
    S, H = rows(s), rows(h)
    encoded = setup["everything"].rows([setup["at"][p["id"]] for p in s + h])
    both = setup["text_rows"](s), setup["text_rows"](h)
    default = scenario_trials(S, H, setup["tests"], test, trials, n or None, seed, text_rows=both)
    # as the audit does: matching only the draws on which the blind check fired
    fired = default["blind_stop"] > 0 if not runs.match_every else None
    res = matched_trials(S, H, setup["tests"], test, trials, n or None, seed, encoded, both, only=fired)
    summary = summarise_matched(res, test.alpha, h0=part == "null" or ls == "nonmember", default=default)
    if part == "alternative":
        summary["same_kind"] = same_kind(kind, s, summary, setup["pools"], setup["iid"], rows, setup["tests"], test,
                                         trials, seed)
    g = summary["tests"]["gray"]
    print(f"{part} {kind} {ls} vs {lh} n {summary['pairs']}: matched {summary['matched_trials']['rate']:.3f} "
          f"of trials, {summary['matched_mean']:.1f} pairs, overlap {g['arm']['overlap']:.3f}, blind "
          f"{summary['blind_before']['rate']:.3f}->{summary['blind']['rate']:.3f}, trained on default "
          f"{g['default']['rate']:.3f} match {g['trained_on']['rate']:.3f} ({time.time() - t0:.0f}s)", flush=True)
    return {"part": part, "kind": kind, "suspect": ls, "heldout": lh, "size": n, "pool_sizes": [len(s), len(h)],
            "seconds": round(time.time() - t0, 1), **summary}


def run_scenarios(pools: dict, iid: dict, table: pd.DataFrame, runs: MatchedRuns, commit: str, version: str,
                  on_rows) -> dict:
    """Every scenario at every size (sizes outermost, so a run stopped early leaves complete
    smaller sizes); after each row, ``on_rows`` is given the summary so far ({"header",
    "scenarios", "match_seconds"}) to write. ``table``: the suite's features (id-indexed)."""
    start = time.time()
    config = ShiftConfig(testbed=runs.testbed, trials=runs.trials, seed=runs.seed)
    test = config.test()
    every = [p for _, a, _, b in pools.values() for p in a + b] + [p for ps in iid.values() for p in ps]
    timing = match_timings(pools["source"][1], pools["source"][3], runs.timing_sizes)
    print("match_pairs seconds per call:", timing, flush=True)
    texts = {p["id"]: p["text"] for p in every}
    blind_rows = {}  # a pool's blind inputs (TextRows), built once: pools recur across scenarios

    def text_rows(ps):
        key = tuple(p["id"] for p in ps)
        if key not in blind_rows:
            blind_rows[key] = TextRows([p["text"] for p in ps])
        return blind_rows[key]

    setup = {"pools": pools, "iid": iid, "test": test, "tests": audit_tests(table, test, runs.audits),
             "rows": lambda ps: table.loc[[p["id"] for p in ps]], "at": {pid: k for k, pid in enumerate(texts)},
             "everything": Encoded(list(texts.values())), "text_rows": text_rows}  # each text encoded once
    results = []
    for n in runs.sizes:
        for scenario in scenarios(pools, iid, config.testbed, runs.kinds, runs.parts):
            if n and n >= min(len(scenario[3]), len(scenario[5])):
                continue
            results.append(_one_scenario(scenario, n, runs.trials_at(n), runs, setup))
            header = _header(runs, config, test.alpha, len(results), start, timing, commit, version)
            on_rows({"header": header, "scenarios": results, "match_seconds": timing})
    return {"rows": len(results), "minutes": (time.time() - start) / 60}
