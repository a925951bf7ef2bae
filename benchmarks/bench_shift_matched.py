"""The shift suite's matched arm (issue 36): `audit --shift-check match` on the null shifts of
benchmarks/results/shift.md, on alternatives (members of one kind against unseen text of
another) and on IID splits, beside the default audit on the very same draws.

    TRAINSPOTTER_ARTIFACTS=/work/main/artifacts nice -n 10 .venv/bin/python benchmarks/bench_shift_matched.py \\
        --out benchmarks/results/shift-matched --sizes 20 40 80 --trials 200

Features come from the shift suite's cached extraction (flows/shift.py ``_features``); the
Monte Carlo is trainspotter.evaluation.shift_matched. Sizes run outermost (every scenario at
20, then 40, ...), and the tables are rewritten after every scenario, so a run stopped early
leaves complete smaller sizes. Size 0: the whole pools (``--whole-trials`` trials).

Runs 3-6 of shift-matched.md (gray + reference, the form the CLI allows), e.g. the whole pools'
alternatives and IID splits, and the merge into the committed table:

    ... bench_shift_matched.py --out OUT --sizes 0 --whole-trials 100 --audits gray --parts alternative iid \
        --table artifacts/shift-table.pkl
    ... bench_shift_matched.py --merge benchmarks/results/shift-matched NOTE OLD.json "run 3=RUN3.json" ...
    ... bench_shift_matched.py --shift-md benchmarks/results/shift.md benchmarks/results/shift-matched/shift-matched.json

The text-only models' features side by side (issue 36 item 4: n-grams vs n-grams + MiniLM
embeddings, for the blind check and matching's propensity, on the very same draws), gray
features extracted by the library directly (no Prefect, so no server), into text-features.md:

    ... bench_shift_matched.py --out OUT --table artifacts/gray.pkl --text-features ngrams ngrams+minilm \
        --audits gray [--no-match] --sizes 20 40 80 0 --trials 200 --whole-trials 100 --name blind-check

(the runs of shift-matched/text-features.md: A as above with --no-match; B --sizes 40 --trials 100;
C --sizes 0 --whole-trials 30 --kinds period topic --parts alternative null; D --sizes 0
--whole-trials 20 --parts iid; their tables joined into text-features.md with a short preamble)

Per trial the cost is ``match_pairs``: five cross-fitted logistic fits (about 75% of it; L-BFGS on
~50,000 TF-IDF columns) and their designs, about 2-6 s at 1000-2000 passages a side on one
shared core; the streams of all trials run as one batch.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
from prefect import flow

import trainspotter.tasks  # noqa: F401  (configures Prefect/MLflow environment first)
from trainspotter import __version__
from trainspotter.auditing.matching import Encoded, match_pairs
from trainspotter.evaluation.shift import (AUDITS, ShiftConfig, _rate, guard_of, scenario_trials, shift_pools,
                                           suite_tests, verdicts)
from trainspotter.evaluation.shift_matched import matched_trials, member_pools, summarise_matched
from trainspotter.features.text import TextRows
from trainspotter.flows.shift import _difficulty, _features, _split
from trainspotter.flows.tracking import git_commit


def greedy_match(ls: np.ndarray, lh: np.ndarray, caliper: float, seed: int = 0) -> list[tuple[int, int]]:
    """The baseline of ``--greedy`` (the library's rule until optimal matching replaced it): suspect
    rows in a seeded random order each take the free held-out row nearest in logit, if within
    ``caliper`` (Austin 2011); the pairs in a seeded random order."""
    import random

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


def _timings(table, pool_a, pool_b, sizes=(20, 80, 320, 0)) -> dict[str, float]:
    """Seconds of one ``match_pairs`` call (texts encoded in the call) at n per side."""
    out = {}
    for n in sizes:
        k = n or min(len(pool_a), len(pool_b))
        s, h = [p["text"] for p in pool_a[:k]], [p["text"] for p in pool_b[:k]]
        t = time.perf_counter()
        match_pairs(s, h, seed=0)
        out[str(k)] = round(time.perf_counter() - t, 2)
    return out


def _cell(r: dict) -> str:
    return f"**{r['rate']:.3f}** (p {r['binom_p']:.2g})" if r["binom_p"] < 0.05 else f"{r['rate']:.3f} (p {r['binom_p']:.2g})"


INTRO = ("Per trial: n passages per side drawn as in shift.md (the same generators, so the default audit runs "
         "on the very same draws); the default audit's blind check on the draw; where it fired, as the audit "
         "does, `match_pairs` on the drawn texts (cross-fitted TF-IDF + surface propensity, optimal matching "
         "within 0.2 SD of its logit; Rosenbaum & Rubin 1983, Rosenbaum 1989, Austin 2011) and on the matched "
         "pairs only the blind check, the placebo check and the model's test, and the matched verdict (`decide`, "
         "then `matched_verdict`: fewer matched pairs than the test needs to reach 1/α is *overlap*); where it "
         "did not fire, the default audit's verdict on every pair. *matched trials*: share of trials matched "
         "(the blind check fired on the draw); *pairs*: mean matched pairs in those trials; *overlap*: share of "
         "them inconclusive for too few pairs; *default*: \"trained on\" of `--shift-check stop` on the same "
         "draws; *match*: of `--shift-check match`, with the one-sided binomial p of rate ≤ α (α = {alpha:g}; "
         "**bold**: p < 0.05); *inconclusive*: share of all trials without a verdict; *to decision*: censored "
         "mean pairs (no rejection counts the pairs it had); *no shift, same pairs*: alternatives only, \"trained "
         "on\" of the default audit with the same members against unseen passages of their own kind (unseen "
         "modern leads for modern members, unseen Wikipedia leads for members against Python docs, ...) at "
         "the mean matched pairs, on as many trials: what these members' signal gives that many pairs with "
         "no shift at all.")
SECTIONS = (("null", "Null shifts: neither model saw either set (every \"trained on\" is false)"),
            ("alternative", "Alternatives: members of one kind vs unseen text of another (\"trained on\" is right)"),
            ("iid", "IID splits (members: H1; non-members: H0)"))


def audit_tests(table: pd.DataFrame, test, audits: list[str]) -> dict:
    """The suite's tests of ``audits`` and the placebo checks that guard them: the other tests' streams
    would cost as much again and change nothing of these audits' rows."""
    keep = set(audits) | {guard_of(a) for a in audits}
    return {k: v for k, v in suite_tests(list(table.columns), test).items() if k in keep}


# the unseen pool of the members' own kind (shift_pools' side A or B; else the IID held-out split)
OWN_KIND = {"topic": ("topic", 1), "topic-r": ("topic", 3), "period": ("period", 1), "period-r": ("period", 3)}


def same_kind(kind, members, summary, pools, iid, rows, tests, test, trials, seed) -> dict:
    """The alternative's ceiling: the default audit, members against unseen passages of their own
    kind (``OWN_KIND``), at the mean matched pairs (at least 2), on ``trials`` draws."""
    own = pools[OWN_KIND[kind][0]][OWN_KIND[kind][1]] if kind in OWN_KIND else iid["heldout"]
    n = max(2, round(summary["matched_mean"]))
    same = scenario_trials(rows(members), rows(own), tests, test, trials, min(n, len(members), len(own)), seed)
    return {a: _rate(verdicts(same, a)["guarded"], test.alpha) for a in summary["tests"] if a in same["model"]}


def add_ceilings(path: str, table: str, testbed: str = "tiny-pretrain", seed: int = 0) -> None:
    """``same_kind`` for the alternative rows of a run's JSON written before it existed."""
    pools, iid, frame = pd.read_pickle(table)
    test = ShiftConfig(testbed=testbed, seed=seed).test()
    tests = audit_tests(frame, test, ["gray"])
    rows = lambda ps: frame.loc[[p["id"] for p in ps]]  # noqa: E731
    members = {k: v[1] for k, v in member_pools(testbed, pools).items()}
    summary = json.loads(Path(path).read_text())
    for s in summary["scenarios"]:
        if s["part"] == "alternative":
            s["same_kind"] = same_kind(s["kind"], members[s["kind"]], s, pools, iid, rows, tests, test, s["trials"], seed)
    Path(path).write_text(json.dumps(summary, indent=1))
    Path(path).with_suffix(".md").write_text(render(summary, test.alpha))


def _most_trials(summary: dict, part: str, audit: str, key, suspect: str | None = None) -> dict:
    """{key(row): the row of ``part`` with ``audit`` (and ``suspect``) that has the most trials}: a
    merged table keeps a rerun with more trials beside the shorter run it supersedes."""
    best = {}
    for s in summary["scenarios"]:
        if (s["part"] == part and audit in s["tests"] and suspect in (None, s["suspect"])
                and s["trials"] > best.get(key(s), {"trials": 0})["trials"]):
            best[key(s)] = s
    return best


def _rows(summary: dict, part: str, audit: str) -> list[str]:
    """The table of one part: per scenario and size, the row with the most trials."""
    rows = sorted(_most_trials(summary, part, audit, lambda s: (s["kind"], s["suspect"], s["size"])).values(),
                  key=lambda s: (s["kind"], s["suspect"], s["size"] or 10**9))
    if not rows:
        return []
    extra = part == "alternative"
    lines = ["| scenario | suspect | held-out | n | trials | matched trials | pairs | overlap | inconclusive | default "
             "| match | to decision |" + (" no shift, same pairs |" if extra else ""), "|---" * (12 + extra) + "|"]
    for s in rows:
        t = s["tests"][audit]
        same = s.get("same_kind", {}).get(audit)
        lines.append(f"| {s['kind']} | {s['suspect']} | {s['heldout']} | {s['pairs']}{' (all)' if s['size'] == 0 else ''} "
                     f"| {s['trials']} | {s['matched_trials']['rate']:.3f} | {s['matched_mean']:.1f} "
                     f"| {t['arm']['overlap']:.3f} | {t['inconclusive']:.3f} | {t['default']['rate']:.3f} "
                     f"| {_cell(t['trained_on'])} | {t['censored_pairs']:.1f} |"
                     + (f" {same['rate']:.3f} |" if extra and same else " — |" if extra else ""))
    return lines + [""]


def _iid_cost(summary: dict, audit: str) -> list[str]:
    iid = _most_trials(summary, "iid", audit, lambda s: s["size"], suspect="member")
    iid = [iid[k] for k in sorted(iid, key=lambda n: n or 10**9)]
    if not iid:
        return []
    return ["IID cost: share of the default audit's true \"trained on\" (members) that `--shift-check match` does "
            "not give on the same draws, and share of trials it adds: " + "; ".join(
                f"n {s['pairs']}: lost {s['tests'][audit]['lost']:.3f}, added {s['tests'][audit]['gained']:.3f} "
                f"({s['trials']} trials)" for s in iid) + ".", ""]


def render(summary: dict, alpha: float, audit: str = "gray") -> str:
    lines = ["# Held-out shift suite: the matched audit (`--shift-check match`, gray + reference)", "",
             summary["header"], "", INTRO.format(alpha=alpha), ""]
    for part, title in SECTIONS:
        rows = _rows(summary, part, audit)
        lines += [f"## {title}", "", *rows] if rows else []
    return "\n".join(lines + _iid_cost(summary, audit)) + "\n"


@flow(name="shift-matched")
def run(args) -> dict:
    start = time.time()
    config = ShiftConfig(testbed=args.testbed, trials=args.trials, seed=args.seed)
    test = config.test()
    cached = Path(args.table) if args.table else None
    if cached and cached.exists():  # this script's own earlier setup (pools, features), same testbed and seed
        pools, iid, table = pd.read_pickle(cached)
    else:
        difficulty = _difficulty(config.testbed)
        pools = shift_pools(config.testbed, config.seed, None, difficulty=difficulty)
        iid = {s: _split(config.testbed, s) for s in ("member", "nonmember", "heldout")}
        every = [p for _, a, _, b in pools.values() for p in a + b] + [p for ps in iid.values() for p in ps]
        table = _features(every, config.testbed)  # the suite's own extraction, cached
        if cached:
            pd.to_pickle((pools, iid, table), cached)
    every = [p for _, a, _, b in pools.values() for p in a + b] + [p for ps in iid.values() for p in ps]
    tests = audit_tests(table, test, args.audits)
    rows = lambda ps: table.loc[[p["id"] for p in ps]]  # noqa: E731
    timing = _timings(table, pools["source"][1], pools["source"][3], args.timing_sizes)
    print("match_pairs seconds per call:", timing, flush=True)
    scenarios = []
    for kind, (la, a, lb, b) in pools.items():
        if kind in args.kinds:
            scenarios += [("null", kind, la, a, lb, b), ("null", kind, lb, b, la, a)]
    for kind, (la, a, lb, b) in member_pools(config.testbed, pools).items():
        if kind.split("-")[0] in args.kinds:
            scenarios.append(("alternative", kind, la, a, lb, b))
    scenarios += [("iid", "iid", "member", iid["member"], "heldout", iid["heldout"]),
                  ("iid", "iid", "nonmember", iid["nonmember"], "heldout", iid["heldout"])]
    scenarios = [sc for sc in scenarios if sc[0] in args.parts]  # (a part not asked for has no index)
    order = {k: i for i, k in enumerate(args.kinds)}  # parts, then kinds, in the order asked (iid last)
    scenarios.sort(key=lambda sc: (args.parts.index(sc[0]), order.get(sc[1].split("-")[0], len(order))))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    texts = {p["id"]: p["text"] for p in every}
    at = {pid: k for k, pid in enumerate(texts)}
    everything = Encoded(list(texts.values()))  # each text once; a scenario takes its rows
    blind_rows = {}  # a pool's blind inputs (TextRows), built once: pools recur across scenarios

    def text_rows(ps):
        key = tuple(p["id"] for p in ps)
        if key not in blind_rows:
            blind_rows[key] = TextRows([p["text"] for p in ps])
        return blind_rows[key]

    per_size = {int(k): int(v) for k, v in (x.split(":") for x in args.size_trials)}
    results = []
    for n in args.sizes:
        trials = per_size.get(n, args.whole_trials if n == 0 else args.trials)
        for part, kind, ls, s, lh, h in scenarios:
            if n and n >= min(len(s), len(h)):
                continue
            t0 = time.time()
            S, H = rows(s), rows(h)
            encoded = everything.rows([at[p["id"]] for p in s + h])
            both = text_rows(s), text_rows(h)
            default = scenario_trials(S, H, tests, test, trials, n or None, config.seed, text_rows=both)
            # as the audit does: matching only the draws on which the blind check fired
            fired = default["blind_stop"] > 0 if not args.match_every else None
            res = matched_trials(S, H, tests, test, trials, n or None, config.seed, encoded, both, only=fired)
            summary = summarise_matched(res, test.alpha, h0=part == "null" or ls == "nonmember", default=default)
            if part == "alternative":
                summary["same_kind"] = same_kind(kind, s, summary, pools, iid, rows, tests, test, trials, config.seed)
            results.append({"part": part, "kind": kind, "suspect": ls, "heldout": lh, "size": n,
                            "pool_sizes": [len(s), len(h)], "seconds": round(time.time() - t0, 1), **summary})
            g = summary["tests"]["gray"]
            print(f"{part} {kind} {ls} vs {lh} n {summary['pairs']}: matched {summary['matched_trials']['rate']:.3f} "
                  f"of trials, {summary['matched_mean']:.1f} pairs, overlap {g['arm']['overlap']:.3f}, blind "
                  f"{summary['blind_before']['rate']:.3f}->{summary['blind']['rate']:.3f}, trained on default "
                  f"{g['default']['rate']:.3f} match {g['trained_on']['rate']:.3f} ({time.time() - t0:.0f}s)", flush=True)
            header = (f"testbed `{config.testbed}` · git {git_commit()[:12]} · trainspotter {__version__} · "
                      f"config {json.dumps({'sizes': args.sizes, 'trials': args.trials, 'size_trials': per_size, 'whole_trials': args.whole_trials, 'seed': config.seed, 'preset': config.preset, 'alpha': test.alpha, 'kinds': args.kinds, 'audits': args.audits, 'parts': args.parts, 'matching': 'greedy' if args.greedy else 'optimal', 'match': 'every draw' if args.match_every else 'where the blind check fired'}, separators=(',', ':'))}"
                      f" · {len(results)} scenario rows · wall {(time.time() - start) / 60:.1f} min on "
                      f"{os.cpu_count()} CPUs shared (1 thread, nice 10) · match_pairs s/call (texts encoded in "
                      f"the call) at n per side: {timing}")
            summary_all = {"header": header, "scenarios": results, "match_seconds": timing}
            (out / "shift-matched.json").write_text(json.dumps(summary_all, indent=1))
            (out / "shift-matched.md").write_text(render(summary_all, test.alpha))
    return {"rows": len(results), "minutes": (time.time() - start) / 60}


def merge(paths: list[str], out: str, note: str) -> None:
    """One table from several runs' JSON (e.g. the small sizes and the whole pools run side by
    side): their scenarios, sizes in order, and each run's header. A path may be given as
    ``LABEL=PATH`` (e.g. ``run 3=...``): its rows are labelled so (rows labelled already keep
    theirs). A row of a later path replaces the row of an earlier one for the same scenario,
    size and audits (a rerun with more trials), so the table keeps earlier rows where not re-run
    (e.g. the other audits' rows when a rerun ran only ``--audits gray``)."""
    labelled = [p.split("=", 1) if "=" in p else (None, p) for p in paths]
    runs = [(label, json.loads(Path(p).read_text())) for label, p in labelled]
    rows = {}
    for label, r in runs:
        for s in r["scenarios"]:
            key = (s["part"], s["kind"], s["suspect"], s["heldout"], s["size"], tuple(sorted(s["tests"])))
            rows[key] = {**s, **({"run": label} if label and "run" not in s else {})}
    scenarios = sorted(rows.values(), key=lambda s: s["size"] or 10**9)
    header = " ".join((f"{label[:1].upper() + label[1:]}: " if label else "") + r["header"].rstrip(".") + "."
                      for label, r in runs) + (f" {note}" if note else "")
    summary = {"header": header, "scenarios": scenarios, "match_seconds": runs[-1][1]["match_seconds"]}
    Path(out, "shift-matched.json").write_text(json.dumps(summary, indent=1))
    Path(out, "shift-matched.md").write_text(render(summary, 0.05))


def gray_setup(testbed: str, seed: int, table: str | None, embed: bool):
    """Pools, IID splits and a gray-only feature table (target + reference, and the reference
    in the target's place: ``placebo_gray:``), extracted by the library directly (no Prefect);
    the ``difficulty`` shift's judge (``DIFFICULTY_JUDGE``) likewise. With ``embed``, also every
    text's MiniLM embedding, put into ``features.text``'s process cache (the same rows as
    computed there: one text per forward pass). Pickled at ``table`` and read from it when there."""
    import math

    from trainspotter.backends import load_backend
    from trainspotter.evaluation.shift import DIFFICULTY_JUDGE, PLACEBO_PREFIX, unseen_passages
    from trainspotter.features import text as text_module
    from trainspotter.features.extract import extract
    from trainspotter.features.features import FEATURE_SETS

    cached = Path(table) if table else None
    if cached and cached.exists():
        pools, iid, frame, embeddings = pd.read_pickle(cached)
    else:
        lean, t0 = FEATURE_SETS["lean"], time.time()
        unseen = unseen_passages(testbed)
        ppl = extract(unseen, load_backend(f"testbed:{DIFFICULTY_JUDGE[testbed]}/reference"), None, "gray", lean)
        difficulty = {p["id"]: -math.log(x) for p, x in zip(unseen, ppl["gray_ppl"])}
        pools = shift_pools(testbed, seed, None, difficulty=difficulty)
        iid = {s: _split(testbed, s) for s in ("member", "nonmember", "heldout")}
        every = [p for _, a, _, b in pools.values() for p in a + b] + [p for ps in iid.values() for p in ps]
        unique = list({p["id"]: p for p in every}.values())
        target, reference = load_backend(f"testbed:{testbed}"), load_backend(f"testbed:{testbed}/reference")
        drop = lambda df: df.drop(columns=["id", "set"], errors="ignore")  # noqa: E731
        frame = pd.concat([pd.DataFrame(unique)[["id", "text"]], drop(extract(unique, target, reference, "gray", lean)),
                           drop(extract(unique, reference, None, "gray", lean)).add_prefix(PLACEBO_PREFIX.format("gray"))],
                          axis=1).set_index("id", drop=False)
        print(f"gray features of {len(unique)} passages: {time.time() - t0:.0f} s", flush=True)
        embeddings = {}
        if cached:
            pd.to_pickle((pools, iid, frame, embeddings), cached)
    if embed and not embeddings:
        t0 = time.time()
        texts = list(dict.fromkeys(frame["text"]))
        embeddings = dict(zip(texts, text_module.sentence_embeddings(texts)))
        print(f"MiniLM embeddings of {len(texts)} texts: {time.time() - t0:.0f} s", flush=True)
        if cached:
            pd.to_pickle((pools, iid, frame, embeddings), cached)
    text_module._EMBEDDINGS.update(embeddings)
    return pools, iid, frame


def _blind_delay(stops: np.ndarray, n: int) -> float:
    """Mean pairs to the blind check's first crossing, censored at n (no crossing counts n)."""
    return float(np.where(stops > 0, stops, n).mean())


def _unmatched(default: dict, alpha: float, h1: bool) -> dict:
    """``summarise_matched``'s fields that need no matching: the blind check's rate and each
    audit's "trained on" on the draws as they are (and, on IID members, the share of the test's
    rejections the guards keep)."""
    from trainspotter.evaluation.shift import _rate, verdicts

    out = {"pairs": default["pairs"], "trials": len(default["blind_stop"]), "blind_before": _rate(default["blind_stop"] > 0, alpha),
           "tests": {}}
    for name in default["model"]:
        if name in AUDITS:
            v = verdicts(default, name)
            out["tests"][name] = {"default": _rate(v["guarded"], alpha), "model": _rate(v["model"], alpha)}
            if h1:
                out["tests"][name]["blind_kept"] = float(v["blind_only"].sum() / max(v["model"].sum(), 1))
    return out


def compare_text_features(args) -> dict:
    """Every scenario at every size with each of ``args.text_features`` on the very same draws:
    the blind check as the default audit runs it (before matching), matching, and the verdicts."""
    start, load = time.time(), os.getloadavg()[0]
    config = ShiftConfig(testbed=args.testbed, trials=args.trials, seed=args.seed)
    test = config.test()
    pools, iid, table = gray_setup(config.testbed, config.seed, args.table, "ngrams+minilm" in args.text_features)
    tests = audit_tests(table, test, args.audits)
    scenarios = _scenarios(args, pools, iid, config.testbed)
    texts = list(dict.fromkeys(table["text"]))
    at = {t: k for k, t in enumerate(texts)}
    encoded = {} if args.no_match else {tf: Encoded(texts, tf) for tf in args.text_features}
    cache = {}

    def text_rows(ps, tf):
        key = (tuple(p["id"] for p in ps), tf)
        if key not in cache:
            cache[key] = TextRows([p["text"] for p in ps], text_features=tf)
        return cache[key]

    out, results = Path(args.out), []
    out.mkdir(parents=True, exist_ok=True)
    per_size = {int(k): int(v) for k, v in (x.split(":") for x in args.size_trials)}
    for n in args.sizes:
        trials = per_size.get(n, args.whole_trials if n == 0 else args.trials)
        for part, kind, ls, s, lh, h in scenarios:
            if n and n >= min(len(s), len(h)):
                continue
            row = {"part": part, "kind": kind, "suspect": ls, "heldout": lh, "size": n, "pool_sizes": [len(s), len(h)],
                   "features": {}}
            S, H = table.loc[[p["id"] for p in s]], table.loc[[p["id"] for p in h]]
            for tf in args.text_features:
                t0 = time.time()
                both = text_rows(s, tf), text_rows(h, tf)
                default = scenario_trials(S, H, tests, test, trials, n or None, config.seed, text_rows=both)
                if args.no_match:  # the blind check and the default audit only (cheap: no propensity fits)
                    summary = _unmatched(default, test.alpha, part == "iid" and ls == "member")
                else:
                    rows = encoded[tf].rows([at[p["text"]] for p in s + h])
                    res = matched_trials(S, H, tests, test, trials, n or None, config.seed, rows, both)
                    summary = summarise_matched(res, test.alpha, h0=part == "null" or ls == "nonmember", default=default)
                summary["blind_pairs"] = _blind_delay(default["blind_stop"], default["pairs"])
                summary["seconds"] = round(time.time() - t0, 1)
                row["features"][tf] = summary
                g = summary["tests"]["gray"]
                print(f"{tf:14s} {part} {kind} {ls} vs {lh} n {summary['pairs']}: blind {summary['blind_before']['rate']:.3f} "
                      f"({summary['blind_pairs']:.1f} pairs), auroc {summary.get('auroc', float('nan')):.3f}, matched "
                      f"{summary.get('matched_mean', float('nan')):.1f}, trained on default {g['default']['rate']:.3f} "
                      f"matched {g.get('trained_on', {'rate': float('nan')})['rate']:.3f} ({time.time() - t0:.0f}s)", flush=True)
            results.append(row)
            header = (f"testbed `{config.testbed}` · git {git_commit()[:12]} · trainspotter {__version__} · config "
                      f"{json.dumps({'sizes': args.sizes, 'trials': args.trials, 'size_trials': per_size, 'whole_trials': args.whole_trials, 'seed': config.seed, 'alpha': test.alpha, 'kinds': args.kinds, 'audits': args.audits, 'parts': args.parts, 'text_features': args.text_features}, separators=(',', ':'))}"
                      f" · {len(results)} scenario rows · wall {(time.time() - start) / 60:.1f} min on {os.cpu_count()} "
                      f"CPUs shared (1 thread, nice 15; load average {load:.1f} at the start, "
                      f"{os.getloadavg()[0]:.1f} now)")
            summary_all = {"header": header, "scenarios": results}
            (out / f"{args.name}.json").write_text(json.dumps(summary_all, indent=1))
            (out / f"{args.name}.md").write_text(render_text_features(summary_all, test.alpha))
    return {"rows": len(results), "minutes": (time.time() - start) / 60}


def render_text_features(summary: dict, alpha: float, audit: str = "gray") -> str:
    """The side-by-side table of ``compare_text_features``: per scenario and size, each cell
    "n-grams | n-grams + MiniLM"."""
    def pair(row, get):
        return " \\| ".join(get(row["features"][tf]) for tf in row["features"])

    lines = ["# Text features of the blind check and matching: n-grams vs n-grams + MiniLM", "", summary["header"], "",
             "Per trial: the draw of shift.md (n per side), the same draw for both text features. Each cell: "
             "**n-grams \\| n-grams + MiniLM** (`--text-features ngrams` \\| `ngrams+minilm`). *blind*: the "
             "blind check fires on the draw as the default audit runs it (before matching), with its one-sided "
             f"binomial p against α = {alpha:g} where that is a false alarm (IID splits, **bold**: p < 0.05); "
             "*blind pairs*: mean pairs to its first crossing, censored at n; *AUROC*: the cross-fitted "
             "propensity between the sets; *matched*: mean matched pairs; *trained on*: the default audit "
             "(`--shift-check stop`) and the matched audit (`--shift-check match`), gray + reference, with the "
             "binomial p of rate ≤ α.", ""]
    sections = (("null", "## Null shifts: neither model saw either set (every \"trained on\" is false)"),
                ("alternative", "## Alternatives: members of one kind vs unseen text of another (\"trained on\" is right)"),
                ("iid", "## IID splits (members: H1, non-members: H0; every blind-check firing is a false alarm)"))
    for part, title in sections:
        rows = [r for r in summary["scenarios"] if r["part"] == part]
        if not rows:
            continue
        lines += [title, "", "| scenario | suspect | held-out | n | trials | blind | blind pairs | AUROC | matched "
                  "| trained on (default) | trained on (matched) |", "|---" * 11 + "|"]
        for r in rows:
            first = next(iter(r["features"].values()))
            lines.append(f"| {r['kind']} | {r['suspect']} | {r['heldout']} | {first['pairs']}{' (all)' if r['size'] == 0 else ''} "
                         f"| {first['trials']} | {pair(r, lambda f: _cell(f['blind_before']) if part == 'iid' else format(f['blind_before']['rate'], '.3f'))} "
                         f"| {pair(r, lambda f: format(f['blind_pairs'], '.1f'))} "
                         f"| {pair(r, lambda f: format(f['auroc'], '.3f') if 'auroc' in f else '—')} "
                         f"| {pair(r, lambda f: format(f['matched_mean'], '.1f') if 'matched_mean' in f else '—')} "
                         f"| {pair(r, lambda f: _cell(f['tests'][audit]['default']))} "
                         f"| {pair(r, lambda f: _cell(f['tests'][audit]['trained_on']) if 'trained_on' in f['tests'][audit] else '—')} |")
        lines.append("")
    iid = [r for r in summary["scenarios"] if r["part"] == "iid" and r["suspect"] == "member"]
    guard = [r for r in iid if "blind_kept" in next(iter(r["features"].values()))["tests"][audit]]
    if guard:
        lines += ["IID cost of the blind check (members, no matching): share of the model test's rejections that "
                  "the blind check leaves standing, n-grams \\| n-grams + MiniLM: "
                  + "; ".join(f"n {next(iter(r['features'].values()))['pairs']}: "
                              + pair(r, lambda f: format(f['tests'][audit]['blind_kept'], '.3f')) for r in guard) + ".", ""]
    iid = [r for r in iid if "lost" in next(iter(r["features"].values()))["tests"][audit]]
    if iid:
        lines += ["IID cost of matching (members): share of the default audit's true \"trained on\" that the matched "
                  "audit keeps on the same draws, n-grams \\| n-grams + MiniLM: "
                  + "; ".join(f"n {next(iter(r['features'].values()))['pairs']}: "
                              + pair(r, lambda f: format(1 - f['tests'][audit]['lost'], '.3f')) for r in iid) + ".", ""]
    return "\n".join(lines) + "\n"


def _scenarios(args, pools, iid, testbed):
    """The (part, kind, suspect label, suspect, held-out label, held-out) asked for, in order."""
    scenarios = []
    for kind, (la, a, lb, b) in pools.items():
        if kind in args.kinds:
            scenarios += [("null", kind, la, a, lb, b), ("null", kind, lb, b, la, a)]
    for kind, (la, a, lb, b) in member_pools(testbed, pools).items():
        if kind.split("-")[0] in args.kinds:
            scenarios.append(("alternative", kind, la, a, lb, b))
    scenarios += [("iid", "iid", "member", iid["member"], "heldout", iid["heldout"]),
                  ("iid", "iid", "nonmember", iid["nonmember"], "heldout", iid["heldout"])]
    scenarios = [sc for sc in scenarios if sc[0] in args.parts]
    order = {k: i for i, k in enumerate(args.kinds)}
    scenarios.sort(key=lambda sc: (args.parts.index(sc[0]), order.get(sc[1].split("-")[0], len(order))))
    return scenarios


START, END = "<!-- shift-matched: start -->", "<!-- shift-matched: end -->"


def shift_section(summary: dict, alpha: float = 0.05, audit: str = "gray") -> str:
    """shift.md's section on the matched audit (the one form the CLI allows, gray + reference):
    the tables of shift-matched.md and the IID cost."""
    lines = [START, "## The matched audit (`--shift-check match`, gray + reference): both sides", "",
             "From `benchmarks/results/shift-matched/shift-matched.md` (made by `benchmarks/bench_shift_matched.py`; "
             "its header has each run's config and commit). " + INTRO.format(alpha=alpha), ""]
    for part, title in SECTIONS:
        rows = _rows(summary, part, audit)
        lines += [f"**{title}**", "", *rows] if rows else []
    return "\n".join(lines + _iid_cost(summary, audit) + [END]) + "\n"


def write_shift_md(shift_md: str, matched_json: str) -> None:
    """Put (or replace) the matched audit's section at the end of shift.md."""
    path, summary = Path(shift_md), json.loads(Path(matched_json).read_text())
    text = path.read_text()
    if START in text:
        text = text[:text.index(START)] + text[text.index(END) + len(END) + 1:]
    path.write_text(text.rstrip("\n") + "\n\n" + shift_section(summary))


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--merge"]:  # --merge OUT NOTE [LABEL=]RUN.json...
        merge(sys.argv[4:], sys.argv[2], sys.argv[3])
        sys.exit()
    if sys.argv[1:2] == ["--ceilings"]:  # --ceilings RUN.json TABLE.pkl [TESTBED]
        add_ceilings(*sys.argv[2:5])
        sys.exit()
    if sys.argv[1:2] == ["--shift-md"]:  # --shift-md SHIFT.md SHIFT-MATCHED.json
        write_shift_md(sys.argv[2], sys.argv[3])
        sys.exit()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--testbed", default="tiny-pretrain")
    ap.add_argument("--out", default="benchmarks/results/shift-matched")
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 40, 80])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--whole-trials", type=int, default=20)
    ap.add_argument("--size-trials", nargs="*", default=[], help="SIZE:TRIALS overrides, e.g. 80:100 0:10")
    ap.add_argument("--kinds", nargs="+", default=["length", "topic", "period", "source", "position", "difficulty"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--audits", nargs="+", default=list(AUDITS), choices=list(AUDITS),
                    help="audits to run (the CLI's --shift-check match allows gray only: gray + reference)")
    ap.add_argument("--timing-sizes", type=int, nargs="*", default=[20, 80, 320, 0],
                    help="n per side of the match_pairs timings in the header (none: skip them)")
    ap.add_argument("--table", default=None, help="pickle of the pools and features: read if present, else written")
    ap.add_argument("--greedy", action="store_true", help="greedy nearest-first matching (the baseline) instead of optimal")
    ap.add_argument("--match-every", action="store_true",
                    help="match every draw (the audit matches only where the blind check fired on the draw)")
    ap.add_argument("--parts", nargs="+", default=["null", "alternative", "iid"], help="which, in this order")
    ap.add_argument("--text-features", nargs="+", default=None, choices=["ngrams", "ngrams+minilm"],
                    help="compare these text features of the blind check and matching on the same draws "
                         "(gray features extracted by the library, no Prefect; tables NAME.md/json)")
    ap.add_argument("--name", default="text-features", help="file stem of the --text-features tables")
    ap.add_argument("--no-match", action="store_true", help="(with --text-features) the blind check and the "
                    "default audit only, no matching")
    args = ap.parse_args()
    if args.greedy:
        import trainspotter.auditing.matching

        trainspotter.auditing.matching.optimal_match = greedy_match
    if args.text_features:
        print(compare_text_features(args))
        sys.exit()
    # with the pools and features already pickled (--table) no task runs: skip Prefect's server
    print((run.fn if args.table and Path(args.table).exists() else run)(args))
