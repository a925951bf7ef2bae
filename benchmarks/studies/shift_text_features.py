"""The text-only models' features side by side (issue 36 item 4; ``benchmarks/bench_shift_matched.py
--text-features``): n-grams against n-grams + MiniLM embeddings, for the blind check and for
matching's propensity, on the very same draws of the shift suite's scenarios, with gray features
extracted by the library directly (no Prefect). Each row: the blind check as the default audit
runs it (before matching; its mean pairs to the first crossing, censored at n), matching
(``shift_matched.matched_trials``: AUROC of the cross-fitted propensity, matched pairs) and both
audits' "trained on" with the one-sided binomial p of rate ≤ α."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from trainspotter.auditing.matching import Encoded
from trainspotter.evaluation.shift_suite import AUDITS, ShiftConfig, _rate, scenario_trials, shift_pools, verdicts
from studies.shift_matched import matched_trials, summarise_matched
from studies.shift_matched_runs import MatchedRuns, audit_tests, scenarios
from studies.shift_matched_tables import cell
from trainspotter.features.text import TextRows

__all__ = ["TextFeatureRuns", "gray_setup", "compare_text_features", "render_text_features"]


def _split(testbed: str, split: str) -> list[dict]:
    from trainspotter.testbeds.build import split_path

    return [json.loads(line) for line in split_path(testbed, split).read_text(encoding="utf-8").splitlines()]


def gray_setup(testbed: str, seed: int, table: str | None, embed: bool):
    """Pools, IID splits and a gray-only feature table (target + reference, and the reference
    in the target's place: ``placebo_gray:``), extracted by the library directly (no Prefect);
    the ``difficulty`` shift's judge (``DIFFICULTY_JUDGE``) likewise. With ``embed``, also every
    text's MiniLM embedding, put into ``features.text``'s process cache (the same rows as
    computed there: one text per forward pass). Pickled at ``table`` and read from it when there."""
    from trainspotter.backends import load_backend
    from trainspotter.evaluation.shift_suite import DIFFICULTY_JUDGE, PLACEBO_PREFIX, unseen_passages
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
    out = {"pairs": default["pairs"], "trials": len(default["blind_stop"]), "blind_before": _rate(default["blind_stop"] > 0, alpha),
           "tests": {}}
    for name in default["model"]:
        if name in AUDITS:
            v = verdicts(default, name)
            out["tests"][name] = {"default": _rate(v["guarded"], alpha), "model": _rate(v["model"], alpha)}
            if h1:
                out["tests"][name]["blind_kept"] = float(v["blind_only"].sum() / max(v["model"].sum(), 1))
    return out


class TextFeatureRuns(MatchedRuns):
    """``MatchedRuns`` with the text features compared and whether to match at all."""

    text_features: list[str] = ["ngrams", "ngrams+minilm"]
    no_match: bool = False  # the blind check and the default audit only (cheap: no propensity fits)


def _features_row(tf: str, scenario: tuple, n: int, trials: int, runs: TextFeatureRuns, setup: dict) -> dict:
    """One text feature's cell of a row: the default audit's blind check and verdicts on the
    draws, and (unless ``no_match``) the matched audit on the same draws."""
    part, kind, ls, s, lh, h = scenario
    t0, test = time.time(), setup["test"]
    S, H = setup["rows"](s), setup["rows"](h)
    both = setup["text_rows"](s, tf), setup["text_rows"](h, tf)
    default = scenario_trials(S, H, setup["tests"], test, trials, n or None, runs.seed, text_rows=both)
    if runs.no_match:
        summary = _unmatched(default, test.alpha, part == "iid" and ls == "member")
    else:
        rows = setup["encoded"][tf].rows([setup["at"][p["text"]] for p in s + h])
        res = matched_trials(S, H, setup["tests"], test, trials, n or None, runs.seed, rows, both)
        summary = summarise_matched(res, test.alpha, h0=part == "null" or ls == "nonmember", default=default)
    summary["blind_pairs"] = _blind_delay(default["blind_stop"], default["pairs"])
    summary["seconds"] = round(time.time() - t0, 1)
    g = summary["tests"]["gray"]
    print(f"{tf:14s} {part} {kind} {ls} vs {lh} n {summary['pairs']}: blind {summary['blind_before']['rate']:.3f} "
          f"({summary['blind_pairs']:.1f} pairs), auroc {summary.get('auroc', float('nan')):.3f}, matched "
          f"{summary.get('matched_mean', float('nan')):.1f}, trained on default {g['default']['rate']:.3f} "
          f"matched {g.get('trained_on', {'rate': float('nan')})['rate']:.3f} ({time.time() - t0:.0f}s)", flush=True)
    return summary


def _header(runs: TextFeatureRuns, alpha: float, rows: int, start: float, load: float, commit: str,
            version: str) -> str:
    settings = {"sizes": runs.sizes, "trials": runs.trials, "size_trials": runs.size_trials,
                "whole_trials": runs.whole_trials, "seed": runs.seed, "alpha": alpha, "kinds": runs.kinds,
                "audits": runs.audits, "parts": runs.parts, "text_features": runs.text_features}
    return (f"testbed `{runs.testbed}` · git {commit[:12]} · trainspotter {version} · config "
            f"{json.dumps(settings, separators=(',', ':'))}"
            f" · {rows} scenario rows · wall {(time.time() - start) / 60:.1f} min on {os.cpu_count()} "
            f"CPUs shared (1 thread, nice 15; load average {load:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} now)")


def compare_text_features(runs: TextFeatureRuns, table: str | None, commit: str, version: str, on_rows) -> dict:
    """Every scenario at every size with each of ``runs.text_features`` on the very same draws
    (module docstring); after each row, ``on_rows`` is given the summary so far ({"header",
    "scenarios"}) to write. ``table``: the pickle of ``gray_setup``, read if there, else written."""
    start, load = time.time(), os.getloadavg()[0]
    config = ShiftConfig(testbed=runs.testbed, trials=runs.trials, seed=runs.seed)
    test = config.test()
    pools, iid, frame = gray_setup(config.testbed, config.seed, table, "ngrams+minilm" in runs.text_features)
    texts = list(dict.fromkeys(frame["text"]))
    cache = {}

    def text_rows(ps, tf):
        key = (tuple(p["id"] for p in ps), tf)
        if key not in cache:
            cache[key] = TextRows([p["text"] for p in ps], text_features=tf)
        return cache[key]

    setup = {"test": test, "tests": audit_tests(frame, test, runs.audits), "text_rows": text_rows,
             "rows": lambda ps: frame.loc[[p["id"] for p in ps]], "at": {t: k for k, t in enumerate(texts)},
             "encoded": {} if runs.no_match else {tf: Encoded(texts, tf) for tf in runs.text_features}}
    results = []
    for n in runs.sizes:
        for scenario in scenarios(pools, iid, config.testbed, runs.kinds, runs.parts):
            part, kind, ls, s, lh, h = scenario
            if n and n >= min(len(s), len(h)):
                continue
            row = {"part": part, "kind": kind, "suspect": ls, "heldout": lh, "size": n, "pool_sizes": [len(s), len(h)],
                   "features": {tf: _features_row(tf, scenario, n, runs.trials_at(n), runs, setup)
                                for tf in runs.text_features}}
            results.append(row)
            on_rows({"header": _header(runs, test.alpha, len(results), start, load, commit, version),
                     "scenarios": results})
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
                         f"| {first['trials']} | {pair(r, lambda f: cell(f['blind_before']) if part == 'iid' else format(f['blind_before']['rate'], '.3f'))} "
                         f"| {pair(r, lambda f: format(f['blind_pairs'], '.1f'))} "
                         f"| {pair(r, lambda f: format(f['auroc'], '.3f') if 'auroc' in f else '—')} "
                         f"| {pair(r, lambda f: format(f['matched_mean'], '.1f') if 'matched_mean' in f else '—')} "
                         f"| {pair(r, lambda f: cell(f['tests'][audit]['default']))} "
                         f"| {pair(r, lambda f: cell(f['tests'][audit]['trained_on']) if 'trained_on' in f['tests'][audit] else '—')} |")
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
