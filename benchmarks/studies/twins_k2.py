"""The twins benchmark with k = 2 (issue 35, ``benchmarks/bench_twins.py``): which features make a
twins audit powerful, its pairs to decision against today's unpaired audit of the same members,
and its false "trained on" rate. (k > 2: ``studies.twins_kmean``; the compact suite behind
``benchmark --suite twins``: ``evaluation.twins_suite``.)

Features: the ``twins`` set, extracted once for every version with its twin's text (the lean
pass plus the changed-position features, ``features.twin_positions``); each feature subset
(``ACCESS``) is columns of that one table, tested on the same seeded trials with the audit's
sequential test (``stream_stops``, α = 0.05; BADI Sec. 4, Eq. 3's wealth) and two scorers
(``SCORED``: the default preset's learned one and the twins preset's fixed directions):

- members: each member's public version against its private twin, paired, in a random order
  (H1: the public versions were trained on);
- non-members (H0): the same with a fresh draw per trial, each passage's versions swapping sides
  with probability 1/2, as the draw at `twins make` could have gone; a version's features are
  f(version | its twin), so a swap swaps them;
- non-members under the testbed's one draw, reordered like the members: the control for what a
  members' rate owes to one draw's luck;
- unpaired: the members' public versions against held-out passages, each side in its own order.

Beside them STAMP's fixed-n paired t-test (Rastogi et al. 2025) at each n of ``STAMP_NS``, and the
blind check on the H0 streams.
"""

from __future__ import annotations

import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from trainspotter.evaluation.twins_suite import CALIBRATED, LEAN, STAMP_NS, summary
from trainspotter.evaluation.twins_suite import STAMP as GRAY_STAMP

__all__ = ["ACCESS", "SCORED", "STAMP", "TESTBED", "twins_testbed", "features", "k2_features", "k2_draws",
           "k2_rows", "stamp_k2", "k2_report", "k2_run"]

TESTBED = "tiny-pretrain-twins"
# The feature subsets compared on the same trials: columns of one extraction with the `twins` set,
# gray box (log-probabilities: the suite's LEAN and CALIBRATED) or black box (greedy tokens only).
CHANGED = ["gray_twin_lp", "gray_twin_ref_diff"]
BLACK_LEAN = ["black_ppl", "black_zlib_ratio", "black_min_k_20", "black_ref_ratio", "black_ref_diff",
              "black_match_rate", "black_ref_match_diff", "black_ez"]
BLACK_CALIBRATED = ["black_ref_ratio", "black_ref_diff", "black_ref_match_diff", "black_ez"]
BLACK_CHANGED = ["black_twin_lp", "black_twin_ref_diff", "black_twin_match"]
ACCESS = {  # access -> (lean columns, changed-position columns, subsets)
    "gray": (LEAN, CHANGED, {"lean": LEAN, "calibrated": CALIBRATED, "changed positions": CHANGED,
                             "changed ref-relative only": ["gray_twin_ref_diff"],
                             "calibrated + changed": CALIBRATED + CHANGED, "lean + changed (twins set)": LEAN + CHANGED}),
    "black": (BLACK_LEAN, BLACK_CHANGED, {
        "lean": BLACK_LEAN, "calibrated": BLACK_CALIBRATED, "changed positions": BLACK_CHANGED,
        "changed greedy match only": ["black_twin_match"], "changed ref-relative only": ["black_twin_ref_diff"],
        "calibrated + changed": BLACK_CALIBRATED + BLACK_CHANGED,
        "lean + changed (twins set)": BLACK_LEAN + BLACK_CHANGED}),
}
# The scorers compared on every subset: the default preset's learned one, and the twins preset's
# fixed directions (trainspotter.stats.fixed_scorer); the rows' keys end in " (fixed)" for the latter.
SCORED = {"online": "", "fixed": " (fixed)"}
# STAMP's test (Rastogi et al. 2025): a one-sided paired t-test of the target's log-likelihood of
# each public version against its private twin, at a fixed n; gray box on log perplexity (the target
# alone, as STAMP) and on the reference-calibrated gray_ref_diff. Black box, the same t-test on the
# greedy match rate at the changed tokens (a radioactivity count, Sander et al. 2024) and on the
# whole passage's.
STAMP = {"gray": GRAY_STAMP,
         "black": {"greedy match at changed tokens": ("black_twin_match", 1),
                   "greedy match, whole passage": ("black_match_rate", 1)}}


def twins_testbed(testbed: str, rewriter: dict | None = None, name: str = "variant"):
    """The twins testbed (built if missing) and its models: (name, folder, manifest, target,
    reference, k). ``rewriter``: KeyedLexicalRewriter settings for a variant testbed
    TESTBED-NAME, with "keys": "shared", "per split" (default) or "per passage" (unkeyed)."""
    from trainspotter.backends import load_backend
    from trainspotter.testbeds.build import PRESETS, build_testbed, load_manifest

    config, bed = PRESETS[testbed], testbed
    if rewriter is not None:  # a variant: another rewriter (or shared keys: {"keys": "shared"})
        from trainspotter.rewriters.lexical import KeyedLexicalRewriter

        spec = dict(rewriter)
        keys = spec.pop("keys", "per split")
        settings = KeyedLexicalRewriter(**spec).describe() | ({"keys": keys} if keys != "shared" else {})
        bed = f"{testbed}-{name}"
        config = config.model_copy(update={"name": bed, "twins_rewriter": settings})
    out = build_testbed(config)
    manifest = load_manifest(bed)
    target, reference = load_backend(f"testbed:{bed}"), load_backend(f"testbed:{bed}/reference")
    return bed, out, manifest, target, reference, config.twins


def features(passages: list[dict], target, reference, access: str = "gray") -> np.ndarray:
    """The lean and changed-position columns of ``ACCESS[access]`` for each passage (with its
    twin's text); passages without a twin (held-out text) get NaN changed columns."""
    from trainspotter.features.extract import extract
    from trainspotter.features.features import FEATURE_SETS

    lean, changed, _ = ACCESS[access]
    if not all("twin" in p for p in passages):  # held-out text has no twin (extract refuses the twins set)
        df = extract(passages, target, reference, access, FEATURE_SETS["lean"])
        return np.column_stack([df[lean].to_numpy(dtype=float), np.full((len(df), len(changed)), np.nan)])
    df = extract(passages, target, reference, access, FEATURE_SETS["twins"])
    return df[lean + changed].to_numpy(dtype=float)


def k2_features(sides: dict, heldout: list[dict], target, reference, access: str,
                cache: Path | None) -> tuple[dict, float, bool]:
    """F[(split, "public" | "private")] and F["heldout"]: ``features`` of each side, read from the
    ``cache`` .npz when it exists, else extracted (and written there, with the extraction's
    seconds). Returns F, the cached extraction's own seconds (0 when extracted now) and whether
    it was cached."""
    if cache and cache.exists():
        F = {tuple(k.split("/")) if "/" in k else k: v for k, v in np.load(cache).items()}
        return F, float(F.pop("extract_seconds", 0.0)), True
    start, F = time.time(), {}
    for split, (public, private) in sides.items():  # each version with its twin's text
        F[split, "public"] = features(public, target, reference, access)
        F[split, "private"] = features(private, target, reference, access)
    F["heldout"] = features(heldout, target, reference, access)  # no twin: changed columns NaN, unused
    if cache:
        np.savez(cache, extract_seconds=time.time() - start,
                 **{"/".join(k) if isinstance(k, tuple) else k: v for k, v in F.items()})
    return F, 0.0, False


def k2_draws(rng, n1: int, n0: int, trials: int) -> dict:
    """The trials every subset shares: the members' orders (T, n1); for the non-members a fresh
    draw per trial (each passage's versions swap sides w.p. 1/2) in a random order, as indices
    ``ix0``, ``iy0`` into [public; private] (T, n0), and the orders themselves (``order0``)."""
    order1 = np.stack([rng.permutation(n1) for _ in range(trials)])
    swap = rng.random((trials, n0)) < 0.5  # H0: a fresh draw per trial
    order0 = np.stack([rng.permutation(n0) for _ in range(trials)])
    sw = np.take_along_axis(swap, order0, axis=1)
    ix0, iy0 = np.where(sw, order0 + n0, order0), np.where(sw, order0, order0 + n0)
    return {"order1": order1, "order0": order0, "ix0": ix0, "iy0": iy0}


def _stops(S, H, ix, iy, columns: list[str], names: list[str], scorer: str, alpha: float = 0.05) -> np.ndarray:
    """First crossings (0: never) of the audit's test with ``scorer`` on columns ``names``."""
    from trainspotter.features.orientation import directions
    from trainspotter.stats.sequential import TestConfig
    from trainspotter.stats.simulation import stream_stops

    config = TestConfig(alpha=alpha)
    test = config.model_copy(update={"scorer": scorer})
    cols = [columns.index(c) for c in names]
    return stream_stops(S[:, cols], H[:, cols], ix, iy, [test], [alpha], directions(names))[0][0, 0]


def k2_rows(F: dict, columns: list[str], subsets: dict[str, list[str]], names: list[str],
            draws: dict) -> tuple[dict, dict]:
    """Per subset in ``names`` and scorer: the members' row, the H0 row (fresh draws) and the
    testbed's-draw control; returns the rows and the seconds per subset."""
    pub1, pri1 = F["member", "public"], F["member", "private"]
    pub, pri = F["nonmember", "public"], F["nonmember", "private"]
    both, n1, n0 = np.concatenate([pub, pri]), len(pub1), len(pub)
    order1, order0 = draws["order1"], draws["order0"]
    results, seconds = {}, {}
    for name in names:
        for scorer, suffix in SCORED.items():
            t0, cols, row = time.time(), subsets[name], name + suffix
            results[f"twins, members: {row}"] = summary(
                _stops(pub1, pri1, order1, order1, columns, cols, scorer), n1, 0.05, False)
            results[f"twins, non-members (H0): {row}"] = summary(
                _stops(both, both, draws["ix0"], draws["iy0"], columns, cols, scorer), n0, 0.05, True)
            # control for the H1 rows: non-members under the testbed's one draw, reordered like the members
            results[f"twins, non-members, testbed's draw: {row}"] = summary(
                _stops(pub, pri, order0, order0, columns, cols, scorer), n0, 0.05, True)
            seconds[row] = round(time.time() - t0, 1)
            print(row, results[f"twins, members: {row}"]["rate"], results[f"twins, non-members (H0): {row}"]["rate"],
                  f"{seconds[row]} s", flush=True)
    return results, seconds


def stamp_k2(F: dict, columns: list[str], order1: np.ndarray, ix0: np.ndarray, n0: int, tests: dict) -> dict:
    """STAMP's fixed-n paired t-test (``tests``: name -> (column, sign)) on the first n pairs of
    each trial's order, for n in ``STAMP_NS``: the members' power (the e-process rows' orders)
    and the H0 rate on the fresh draws; and the one test on every member pair (n = all)."""
    from scipy.stats import ttest_1samp

    out = {}
    for name, (column, sign) in tests.items():
        j = columns.index(column)
        if column == "gray_ppl":  # the log-likelihood: −log perplexity
            value = {k: -np.log(v[:, j]) for k, v in F.items() if isinstance(k, tuple)}
            sign = 1
        else:
            value = {k: v[:, j] for k, v in F.items() if isinstance(k, tuple)}
        d1 = sign * (value["member", "public"] - value["member", "private"])  # > 0: the public version fits better
        both = np.concatenate([value["nonmember", "public"], value["nonmember", "private"]])
        # H0 trials: the fresh draw's suspect side is ix0 (an index into both), its twin the other half
        d0 = sign * (both[ix0] - both[np.where(ix0 >= n0, ix0 - n0, ix0 + n0)])
        row = {"all": {"n": int(len(d1)), "p": float(ttest_1samp(d1, 0.0, alternative="greater").pvalue)}}
        for n in STAMP_NS:
            if n > min(len(d1), n0):
                break
            p1 = ttest_1samp(d1[order1[:, :n]], 0.0, axis=1, alternative="greater").pvalue
            p0 = ttest_1samp(d0[:, :n], 0.0, axis=1, alternative="greater").pvalue
            row[str(n)] = {"power": float((p1 <= 0.05).mean()), "h0": float((p0 <= 0.05).mean())}
        out[name] = row
    return out


def k2_report(F: dict, access: str, names: list[str], trials: int, seed: int, blind_texts: list[str]) -> dict:
    """Every row of the k = 2 benchmark (module docstring) on the features F (``k2_features``),
    the same seeded trials for every subset in ``names``; ``blind_texts``: the non-members'
    public texts, then their private twins' (the blind check on the H0 streams). Returns
    {"results", "test_seconds"}."""
    from trainspotter.features.text import TextRows
    from trainspotter.stats.blind import blind_stops
    from trainspotter.stats.sequential import TestConfig

    for split in ("member", "nonmember"):
        for side in ("public", "private"):
            if not np.isfinite(F[split, side]).all():
                raise SystemExit(f"non-finite features in {split}/{side}")
    lean, changed, subsets = ACCESS[access]
    columns, rng = lean + changed, np.random.default_rng(seed)
    n1, n0 = len(F["member", "public"]), len(F["nonmember", "public"])
    draws = k2_draws(rng, n1, n0, trials)
    results, seconds = k2_rows(F, columns, subsets, names, draws)
    results["stamp"] = stamp_k2(F, columns, draws["order1"], draws["ix0"], n0, STAMP[access])
    # unpaired: members' public versions vs held-out, each side its own order (lean)
    n = min(n1, len(F["heldout"]))
    ix = np.stack([rng.permutation(n1)[:n] for _ in range(trials)])
    iy = np.stack([rng.permutation(len(F["heldout"]))[:n] for _ in range(trials)])
    for scorer, suffix in SCORED.items():
        results[f"unpaired, members: lean{suffix}"] = summary(
            _stops(F["member", "public"], F["heldout"], ix, iy, columns, lean, scorer), n, 0.05, False)
    rows = TextRows(blind_texts)
    blind, _ = blind_stops(rows, rows, draws["ix0"], draws["iy0"], TestConfig(alpha=0.05))
    results["blind check on twins (H0)"] = summary(blind, n0, 0.05, True)
    return {"results": results, "test_seconds": seconds}


def k2_run(bed: str, out: Path, manifest: dict, target, reference, access: str, names: list[str],
           trials: int, seed: int, cache: Path | None, start: float | None = None) -> dict:
    """The k = 2 benchmark on a built twins testbed (folder ``out``): features (extracted or read
    from ``cache``) and every row (``k2_report``), as the report twins.json holds. ``start``:
    the run's clock (default now; a cached extraction's own seconds are added to it)."""
    from trainspotter.twins.folder import load_twins

    sides = {split: load_twins(out / f"twins-{split}").sides(seed=0) for split in ("member", "nonmember")}
    heldout = [json.loads(line) for line in (out / "heldout.jsonl").read_text().splitlines()]
    start = time.time() if start is None else start
    F, carried, cached = k2_features(sides, heldout, target, reference, access, cache)
    start -= carried
    extracted = time.time() - start
    print(f"features extracted in {extracted:.0f} s", flush=True)
    blind_texts = [p["text"] for p in sides["nonmember"][0]] + [q["text"] for q in sides["nonmember"][1]]
    rows = k2_report(F, access, names, trials, seed, blind_texts)
    subsets = ACCESS[access][2]
    return {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "testbed": bed, "access": access,
            "member_repeats": manifest.get("member_repeats", 1),
            "rewriter": manifest["config"].get("twins_rewriter"),
            "machine": platform.machine(), "cpus": os.cpu_count(), "trials": trials, "alpha": 0.05,
            "subsets": {k: subsets[k] for k in names}, "twins": manifest["twins"],
            "extract_seconds": round(extracted, 1), "features_cached": cached, "test_seconds": rows["test_seconds"],
            "seconds": round(time.time() - start, 1), "results": rows["results"]}
