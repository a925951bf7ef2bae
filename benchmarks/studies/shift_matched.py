"""The shift suite's matched arm (issue 36): what ``audit --shift-check match`` says on the
suite's shifts, on alternatives where the model did train on the suspect set, and what it
costs on IID splits.

Per Monte Carlo trial, the draw of ``scenario_trials`` (the same generators, so the default
audit runs on the very same passages): n passages per side; then, on the trials where the
audit would match (its blind check fired on the draw: ``only``), ``match_pairs`` on the drawn
texts, seeded per trial: cross-fitted text-only propensity, optimal matching within a caliper
of 0.2 SD of its logit (Rosenbaum & Rubin 1983; Rosenbaum 1989; Austin 2011); then, on the matched pairs only
and in their order, the blind check, the placebo checks (the reference model's own features,
the suite's ``placebo_*`` columns) and every audit's test, and the verdict the audit gives
(``trainspotter.auditing.verdict.decide`` on the matched pairs, then ``trainspotter.auditing.verdict.matched_verdict``:
too few matched pairs to ever reach 1/α is "inconclusive" ("overlap")).

The streams of a batch of trials have different lengths (the matched pairs); each is padded
to the longest with arbitrary rows and a crossing after a trial's own last matched pair is
dropped. The e-processes are predictable (round t uses pairs < t and pair t only), so the
padding never changes a crossing at or before it.

The alternatives (``member_pools``): members of the testbed's target model of one kind against
passages neither model saw of another kind (the suite's unseen pools), so H1 holds and
"trained on" is right, but the held-out set also differs in one property.

The audit pairs the matched passages in an order drawn with its seed (``make_pairs``); here
they keep ``match_pairs``' seeded order: another random order, the same distribution.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from trainspotter.auditing.matching import Encoded, match_pairs
from trainspotter.auditing.verdict import PlaceboResult, decide, matched_verdict
from trainspotter.data import Passage
from trainspotter.evaluation.shift_suite import _YEAR, AUDITS, SCIENCES, _rate, guard_of, trial_draws
from trainspotter.features.orientation import directions
from trainspotter.features.text import DEFAULT_TEXT_FEATURES, TextRows
from trainspotter.presets import UNGUARDED_MIN_PAIRS
from trainspotter.stats.blind import BlindResult, blind_stops
from trainspotter.stats.sequential import TestConfig, min_pairs_to_reject
from trainspotter.stats.simulation import stream_stops

__all__ = ["matched_trials", "matched_verdicts", "member_pools", "summarise_matched"]


def matched_trials(suspect: pd.DataFrame, heldout: pd.DataFrame, tests: dict[str, tuple[list[str], TestConfig]],
                   config: TestConfig, trials: int, n_max: int | None = None, seed: int = 0,
                   encoded: Encoded | None = None, text_rows: tuple[TextRows, TextRows] | None = None,
                   text_features: str = DEFAULT_TEXT_FEATURES, only: np.ndarray | None = None) -> dict:
    """Monte Carlo of the matched audit on one (suspect pool, held-out pool), ``scenario_trials``'
    draws: per trial (of ``only``, a mask over trials: those the audit would match, where the blind
    check fired on the draw as it is; default every trial; the others match nothing),
    ``match_pairs`` on the drawn texts (seed ``seed * 1_000_003 + trial``), then
    each test of ``tests`` and the blind check on the matched pairs. ``encoded``: the texts of
    both pools, suspect rows first (``Encoded``; default: encoded here); ``text_rows``: their
    blind inputs (``TextRows`` per pool; default: built here); both default to ``text_features``
    (given ``encoded`` and ``text_rows`` carry their own). Returns the draw size,
    each trial's matched pairs and propensity AUROC, each test's first crossing (0 = none) and
    the blind check's, on the matched pairs, and the pairs' rows (``rows``: suspect, held-out;
    trial b's first ``matched[b]`` columns, the rest padding)."""
    n = int(min(len(suspect), len(heldout), n_max or math.inf))
    ts, th = list(suspect["text"]), list(heldout["text"])
    encoded = encoded if encoded is not None else Encoded(ts + th, text_features)
    ix, iy = trial_draws(len(suspect), len(heldout), n, trials, seed)
    matched, auroc = np.zeros(trials, dtype=int), np.full(trials, np.nan)
    mx, my = np.zeros((trials, n), dtype=int), np.zeros((trials, n), dtype=int)
    only = np.ones(trials, dtype=bool) if only is None else np.asarray(only, dtype=bool)
    for b in np.flatnonzero(only):
        m = match_pairs([ts[i] for i in ix[b]], [th[j] for j in iy[b]], seed=seed * 1_000_003 + b,
                        encoded=encoded.rows(np.r_[ix[b], len(ts) + iy[b]]))
        matched[b], auroc[b] = m.matched, m.auroc
        if m.pairs:
            mx[b, :m.matched] = ix[b][[i for i, _ in m.pairs]]
            my[b, :m.matched] = iy[b][[j for _, j in m.pairs]]
    width = max(int(matched.max()), 1)
    mx, my = mx[:, :width], my[:, :width]
    own = lambda stops: np.where(stops <= matched, stops, 0)  # noqa: E731  (a crossing in the padding: none)
    model = {}
    for name, (cols, test) in tests.items():
        S, H = suspect[cols].to_numpy(dtype=float), heldout[cols].to_numpy(dtype=float)
        signs = directions([c.split(":")[-1] for c in cols])
        model[name] = own(stream_stops(S, H, mx, my, [test], [test.alpha], signs)[0][0, 0])
    text_rows = text_rows or (TextRows(ts, text_features=text_features), TextRows(th, text_features=text_features))
    blind, _ = blind_stops(*text_rows, mx, my, config)
    return {"pairs": n, "trials": trials, "only": only, "matched": matched, "auroc": auroc, "model": model,
            "blind_stop": own(blind), "needed": min_pairs_to_reject(config), "rows": (mx, my)}


def matched_verdicts(result: dict, name: str, alpha: float) -> dict[str, np.ndarray]:
    """Per trial of audit ``name`` on the matched pairs: the model's test rejects (``model``),
    the verdict's guard is "overlap" or "blind" (``overlap``, ``blind``), and "trained on"
    (``trained_on``), each from ``decide`` and ``matched_verdict`` as the audit applies them."""
    guard_test = guard_of(name)
    out = {k: np.zeros(result["trials"], dtype=bool) for k in ("model", "trained_on", "overlap", "blind", "inconclusive")}
    for b in range(result["trials"]):
        m, reject = int(result["matched"][b]), bool(result["model"][name][b] > 0)
        blind = BlindResult(fired=bool(result["blind_stop"][b] > 0), e_value=1.0, max_wealth=1.0, p_value=1.0,
                            pairs_used=m, pairs_available=m, stop_time=None, alpha=alpha, wealth=[])
        if guard_test is None:
            placebo = PlaceboResult(ran=False, alpha=alpha)
        else:
            fired = guard_test in result["model"] and bool(result["model"][guard_test][b] > 0)
            placebo = PlaceboResult(ran=reject, model="placebo", fired=fired and reject, alpha=alpha)
        verdict, guard = decide(reject, reject, blind, placebo, UNGUARDED_MIN_PAIRS if guard_test is None else 0)
        verdict, guard = matched_verdict(verdict, guard, m, result["needed"])
        out["model"][b], out["trained_on"][b] = reject, verdict == "trained on"
        out["overlap"][b], out["blind"][b] = guard == "overlap", guard == "blind"
        out["inconclusive"][b] = verdict == "inconclusive"
    return out


def summarise_matched(result: dict, alpha: float, h0: bool, default: dict | None = None) -> dict:
    """Per scenario, over the matched trials (``result["only"]``): mean matched pairs and share of
    the draw, share "overlap", the blind check's and placebo checks' firing rates on the matched
    pairs; per audit on them (``arm``): the model's rejection rate, "trained on", share
    inconclusive and censored mean pairs to decision (a trial without rejection counts its matched
    pairs). ``default``: ``scenario_trials`` on the same draws (the audit without matching): then
    per audit also its "trained on" (``default``) and what ``--shift-check match`` says on every
    trial (``trained_on``, ``inconclusive``, ``censored_pairs``): the matched verdict where the
    trials were matched, the default one elsewhere (as ``audit`` matches only where the blind check
    fires); on H1 (``h0`` False) the share of the default's true rejections it loses and the trials it
    gains. Rates come with the one-sided binomial p-value of rate ≤ α."""
    from trainspotter.evaluation.shift_suite import verdicts

    arm, matched = result["only"], result["matched"]
    on = lambda x: x[arm] if arm.any() else np.zeros(1)  # noqa: E731  (no matched trial: zeros)
    out = {"pairs": result["pairs"], "trials": result["trials"], "matched_trials": _rate(arm, alpha),
           "matched_mean": float(on(matched).mean()), "matched_share": float(on(matched).mean() / max(result["pairs"], 1)),
           "auroc": float(np.nanmean(on(result["auroc"]))), "blind": _rate(on(result["blind_stop"]) > 0, alpha),
           "placebo": {k: _rate(on(v) > 0, alpha) for k, v in result["model"].items() if k.startswith("placebo_")},
           "tests": {}}
    if default is not None:
        out["blind_before"] = _rate(default["blind_stop"] > 0, alpha)
    for name in result["model"]:
        if name not in AUDITS:
            continue
        v = matched_verdicts(result, name, alpha)
        pairs = np.where(v["model"], result["model"][name], matched)
        row = {"arm": {"model": _rate(on(v["model"]), alpha), "trained_on": _rate(on(v["trained_on"]), alpha),
                       "overlap": float(on(v["overlap"]).mean()), "inconclusive": float(on(v["inconclusive"]).mean()),
                       "censored_pairs": float(on(pairs).mean())}}
        if default is not None and name in default["model"]:
            d = verdicts(default, name)
            row["default"] = _rate(d["guarded"], alpha)
            said = np.where(arm, v["trained_on"], d["guarded"])
            row["trained_on"] = _rate(said, alpha)
            row["inconclusive"] = float(np.where(arm, v["inconclusive"], d["model"] & ~d["guarded"]).mean())
            row["censored_pairs"] = float(np.where(arm, pairs, np.where(d["guarded"], default["model"][name],
                                                                         default["pairs"])).mean())
            row["default_censored_pairs"] = float(np.where(d["guarded"], default["model"][name], default["pairs"]).mean())
            if not h0:
                row["lost"] = float((d["guarded"] & ~said).sum() / max(d["guarded"].sum(), 1))
                row["gained"] = float((said & ~d["guarded"]).mean())
        out["tests"][name] = row
    return out


def member_pools(testbed: str, pools: dict, root=None) -> dict[str, tuple[str, list[Passage], str, list[Passage]]]:
    """{kind: (label of the members, members, label of the unseen pool, unseen pool)}: the
    testbed's members (Wikipedia leads, the first chunk of each, which its target model trained
    on) of one kind against the suite's pool (``shift_pools``) of passages neither model saw of
    another kind: topic and period in both directions, source (Python docs), length (32-token
    pieces), position (continuations)."""
    import json

    from trainspotter.assets import wikipedia_leads
    from trainspotter.testbeds.build import split_path

    members = [json.loads(line) for line in split_path(testbed, "member", root).read_text(encoding="utf-8").splitlines()]
    leads = {r["id"]: r for r in wikipedia_leads()}
    years = {p["id"]: [int(y) for y in _YEAR.findall(leads[p["id"]]["text"])] for p in members}
    people = [p for p in members if leads[p["id"]]["topic"] == "People"]
    sciences = [p for p in members if leads[p["id"]]["topic"] in SCIENCES]
    modern = [p for p in members if years[p["id"]] and max(years[p["id"]]) >= 1950]
    historical = [p for p in members if years[p["id"]] and max(years[p["id"]]) < 1900]
    out = {"topic": ("members: people", people, "unseen: sciences", pools["topic"][3]),
           "topic-r": ("members: sciences", sciences, "unseen: people", pools["topic"][1]),
           "period": ("members: modern", modern, "unseen: historical", pools["period"][3]),
           "period-r": ("members: historical", historical, "unseen: modern", pools["period"][1]),
           "source": ("members: Wikipedia", members, "unseen: Python docs", pools["source"][3]),
           "length": ("members: full chunks", members, f"unseen: {pools['length'][2]}", pools["length"][3]),
           "position": ("members: lead openings", members, "unseen: continuations", pools["position"][3])}
    return {k: v for k, v in out.items() if k.split("-")[0] in pools}
