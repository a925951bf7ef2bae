"""Twins with k > 2 variants per passage (issue 35, ``benchmarks/bench_twins.py`` on a testbed with
k > 2): bet on one private variant drawn at random, or on the mean of the public version's
pairwise payoffs against all k − 1 private ones?

Features of every ordered pair (a, b) of a passage's k variants, f(x_a | x_b) (the `twins` set: the
lean columns do not depend on b, the changed-position ones do), each text forward-passed once
(``MemoBackend``). Then, on the same trials (orders, draws), with the fixed scorer (the twins
preset):

- (a) ``one``: per passage and trial, one private variant j drawn at random, the round is the pair
  (f(pub | j), f(j | pub)): ``audit --twins --twins-private one``;
- (b) ``mean``: the round's payoff is the mean over the k − 1 private j of the pairwise payoffs,
  u_t = 1/(k−1) Σ_j φ_t(x_pub, x_j) (``SequentialTest.update`` with m = k − 1 sub-pairs;
  trainspotter.stats.sequential, "Sub-pairs"; STAMP Sec. 3).

Members (H1): the testbed's draw, a seeded order per trial. Non-members (H0): a fresh uniform draw
of the public index among the k variants per passage and trial. The blind check runs on the H0
trials' one-private pairs. Beside them (``evaluation.twins_suite``): STAMP's fixed-n paired t-test,
today's unpaired audit of the same members with its controls, and the members' signal and noise
per pair in both designs.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from harness.memo import MemoBackend
from studies.twins_k2 import ACCESS, STAMP, features
from trainspotter.evaluation.twins_suite import (SUBSETS, h0_draws, own_values, private_variants, signal_noise,
                                                 stamp_ttests, sub_pair_indices, summary, unpaired)

__all__ = ["MODES", "KSUBSETS", "pair_features", "kmean_features", "paired", "kmean_rows", "kmean_run"]

MODES = {"one": "(a) one private variant, drawn at random", "mean": "(b) mean of the pairwise payoffs, all k − 1"}
KSUBSETS = ("lean", "calibrated", "lean + changed (twins set)")


def pair_features(twins, target, reference, columns: list[str], access: str) -> np.ndarray:
    """Rows f(x_a | x_b) of every ordered pair of every passage's variants, shape (N·k·k, p): row
    (n·k + a)·k + b (a = b: NaN, unused). Variant indices are the folder's (0..k − 1).
    ``target`` and ``reference``: ``MemoBackend``s, so that each text is scored once."""
    from trainspotter.features.extract import extract
    from trainspotter.features.features import FEATURE_SETS

    k, n = twins.k, len(twins.ids)
    texts = [twins.variants[i][a] for i in twins.ids for a in range(k)]
    target.prefill(texts, label="target")
    reference.prefill(texts, label="reference")
    passages = [{"id": f"{i}#{a}|{b}", "text": twins.variants[i][a], "twin": twins.variants[i][b]}
                for i in twins.ids for a in range(k) for b in range(k) if a != b]
    df = extract(passages, target, reference, access, FEATURE_SETS["twins"])
    rows = np.full((n, k, k, len(columns)), np.nan)
    a, b = np.nonzero(~np.eye(k, dtype=bool))
    rows[:, a, b] = df[columns].to_numpy(dtype=float).reshape(n, k * (k - 1), len(columns))
    return rows.reshape(n * k * k, len(columns))


def kmean_features(twins: dict, heldout: list[dict], target, reference, access: str,
                   cache: Path | None) -> tuple[dict, float, bool]:
    """F["member"], F["nonmember"] (``pair_features``) and F["heldout"] (the lean columns: held-out
    text has no twin), read from the ``cache`` .npz where it holds them, else computed (and the
    cache written). Returns F, the cached extraction's own seconds and whether all was cached."""
    lean, changed, _ = ACCESS[access]
    F = dict(np.load(cache)) if cache and cache.exists() else {}
    carried = float(F.pop("extract_seconds", 0.0))
    cached = "member" in F and "heldout" in F
    start = time.time()
    if "member" not in F:
        memo_t, memo_r = MemoBackend(target, chunk=64), MemoBackend(reference, chunk=64)
        F |= {s: pair_features(tw, memo_t, memo_r, lean + changed, access) for s, tw in twins.items()}
    if "heldout" not in F:
        F["heldout"] = features(heldout, target, reference, access)[:, :len(lean)]
    if cache and not cached:
        np.savez(cache, extract_seconds=carried + time.time() - start, **F)
    return F, carried, cached


def paired(one: np.ndarray, mean: np.ndarray, n: int) -> dict:
    """Censored pairs to decision (never: n), trial by trial: (a) minus (b), its mean with a 95%
    normal CI (mean ± 1.96 s/√T) and the shares of trials where (b), or (a), decided sooner."""
    d = np.where(one > 0, one, n) - np.where(mean > 0, mean, n)
    half = 1.96 * d.std(ddof=1) / math.sqrt(len(d))
    return {"mean_saving": float(d.mean()), "ci95": [float(d.mean() - half), float(d.mean() + half)],
            "mean_sooner": float((d > 0).mean()), "one_sooner": float((d < 0).mean())}


def _check_finite(F: dict, k: int, p: int) -> None:
    for s, R in F.items():
        used = R.reshape(-1, k, k, p)[:, ~np.eye(k, dtype=bool)]
        if not np.isfinite(used).all():
            raise SystemExit(f"non-finite features in {s}")


def kmean_rows(F: dict, trials1: tuple, trials0: tuple, k: int, columns: list[str], subsets: dict,
               names: list[str]) -> tuple[dict, dict, dict]:
    """Both modes of every subset in ``names``, members and non-members (``trials*``: public (T, N),
    order (T, n), private variants); returns the rows, the seconds per subset and the members'
    stop times of the plotted rows (``SUBSETS``)."""
    from trainspotter.features.orientation import directions
    from trainspotter.stats.sequential import TestConfig
    from trainspotter.stats.simulation import stream_stops

    config = TestConfig(alpha=0.05, scorer="fixed")
    results, seconds, decided = {}, {}, {}
    for name in names:
        t0, cols, signs = time.time(), [columns.index(c) for c in subsets[name]], directions(subsets[name])
        stops = {}
        for mode in MODES:
            for split, (pub, order, priv), h0 in (("member", trials1, False), ("nonmember", trials0, True)):
                ix, iy = sub_pair_indices(pub, order, priv[mode], k)
                R = F[split][:, cols]
                stops[mode, split] = st = stream_stops(R, R, ix, iy, [config], [config.alpha], signs)[0][0, 0]
                if split == "member" and name in SUBSETS:
                    decided[f"twins {'all' if mode == 'mean' else 'one'}, {name}"] = st
                results[f"{split}s, {mode}: {name}"] = summary(st, order.shape[1], config.alpha, h0)
        results[f"paired (members), one minus mean: {name}"] = paired(stops["one", "member"],
                                                                      stops["mean", "member"], trials1[1].shape[1])
        seconds[name] = round(time.time() - t0, 1)
        print(name, {m: results[f"members, {m}: {name}"]["mean_pairs_to_decision"] for m in MODES},
              {m: results[f"nonmembers, {m}: {name}"]["rate"] for m in MODES}, f"{seconds[name]} s", flush=True)
    return results, seconds, decided


def kmean_report(F: dict, H: np.ndarray, twins: dict, access: str, names: list[str], trials: int,
                 seed: int) -> dict:
    """Every row of the k > 2 comparison (module docstring) on pair-feature rows F (per split) and
    the held-out passages' lean values H; returns {"results", "test_seconds", "decided"}."""
    from trainspotter.features.text import TextRows
    from trainspotter.stats.blind import blind_stops
    from trainspotter.stats.sequential import TestConfig

    lean, changed, subsets = ACCESS[access]
    columns, k = lean + changed, twins["member"].k
    _check_finite(F, k, len(columns))
    rng, T = np.random.default_rng(seed), trials
    n1, n0 = len(twins["member"].ids), len(twins["nonmember"].ids)
    pub1 = np.broadcast_to(np.array([twins["member"].public[i] for i in twins["member"].ids]), (T, n1))
    order1 = np.stack([rng.permutation(n1) for _ in range(T)])
    priv1 = private_variants(pub1, order1, k, rng)
    pub0 = h0_draws(rng, T, n0, k)  # H0: a fresh uniform draw of the public variant per trial
    order0 = np.stack([rng.permutation(n0) for _ in range(T)])
    priv0 = private_variants(pub0, order0, k, rng)
    results, seconds, decided = kmean_rows(F, (pub1, order1, priv1), (pub0, order0, priv0), k, columns, subsets,
                                           names)
    tw0 = twins["nonmember"]
    rows = TextRows([tw0.variants[i][a] for i in tw0.ids for a in range(k)])
    pub = np.take_along_axis(pub0, order0, axis=1)
    blind, _ = blind_stops(rows, rows, order0 * k + pub, order0 * k + priv0["one"][..., 0],
                           TestConfig(alpha=0.05, scorer="fixed"))
    results["blind check on the H0 trials (one private)"] = summary(blind, n0, 0.05, True)
    drawn0 = np.array([tw0.public[i] for i in tw0.ids])  # the testbed's draw
    V = {s: own_values(F[s], k, len(columns)) for s in ("member", "nonmember")}  # (the lean columns lead)
    flat, flat_stops = unpaired({s: v[..., :len(lean)] for s, v in V.items()}, H, pub1[0], drawn0, lean, rng, T)
    results |= flat
    decided |= {f"unpaired ({sc}), lean": flat_stops[f"unpaired, members against held-out: lean ({sc})"]
                for sc in ("online", "fixed")}
    pairs = {s: F[s].reshape(-1, k, k, len(columns)) for s in V}  # (black's STAMP column depends on the twin)
    results["stamp"] = stamp_ttests(pairs, pub1, order1, pub0, order0, columns, STAMP[access])
    results["signal and noise"] = signal_noise(V["member"][..., :len(lean)], H, pub1[0], lean)
    return {"results": results, "test_seconds": seconds, "decided": decided}


def kmean_run(bed: str, out: Path, manifest: dict, target, reference, access: str, names: list[str],
              trials: int, seed: int, cache: Path | None, start: float | None = None) -> tuple[dict, dict]:
    """The k > 2 comparison on a built twins testbed (folder ``out``): the report twins.json holds
    and the members' stop times of the plotted rows (``decided``, with their pairs available)."""
    from trainspotter.twins.folder import load_twins

    twins = {s: load_twins(out / f"twins-{s}") for s in ("member", "nonmember")}
    heldout = [json.loads(x) for x in (out / "heldout.jsonl").read_text().splitlines()]
    start = time.time() if start is None else start
    F, carried, cached = kmean_features(twins, heldout, target, reference, access, cache)
    start -= carried
    extracted = time.time() - start
    print(f"features of every ordered pair in {extracted:.0f} s", flush=True)
    H = F.pop("heldout")
    rows = kmean_report(F, H, twins, access, names, trials, seed)
    n1, k = len(twins["member"].ids), twins["member"].k
    lengths = {r: n1 if r.startswith("twins") else min(n1, len(H)) for r in rows["decided"]}
    report = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "testbed": bed, "k": k,
              "access": access, "rewriter": manifest["config"].get("twins_rewriter"),
              "machine": platform.machine(), "cpus": os.cpu_count(), "trials": trials, "alpha": 0.05,
              "test": "twins preset (mixture strategy, diff payoff, λ_max 0.8, fixed scorer)",
              "subsets": {n: ACCESS[access][2][n] for n in names}, "twins": manifest["twins"], "members": n1,
              "nonmembers": len(twins["nonmember"].ids), "extract_seconds": round(extracted, 1),
              "features_cached": cached, "test_seconds": rows["test_seconds"],
              "seconds": round(time.time() - start, 1), "results": rows["results"]}
    return report, {"stops": rows["decided"], "lengths": lengths}
