"""Twins on `tiny-pretrain-twins`: which features make a twins audit powerful, its pairs to
decision against today's unpaired audit on the same members, and its false "trained on" rate
(issue 35).

Testbed `tiny-pretrain-twins` (built if missing: 45 min on 2 busy shared CPUs): every passage rewritten twice
by the keyed lexical rewriter, one version drawn public; the target was pre-trained with the
members' public versions mixed in once, the reference without them. Features: the `twins` set
(gray box, with the reference), extracted once for every version, each with its twin's text:
the lean pass plus the changed-position features (``features.twin_positions``). Each feature
subset (``SUBSETS``: lean, calibrated, changed positions, combinations) is columns of that one
table, tested on the same trials with the audit's sequential test (``stream_stops``, default
preset, α = 0.05):

- ``twins, members``: each member's public version against its private twin, paired, in a
  random order (H1: the public versions were trained on);
- ``twins, non-members (H0)``: the same on non-members, with **a fresh draw per trial**: each
  passage's two versions swap sides with probability 1/2, as the random draw at `twins make`
  could have gone (neither was trained on, so every draw is equally valid). So the trials are
  independent draws of the design, not reorderings of one split. A version's features are
  f(version | its twin), so a swap swaps them: the H0 rows use the new features as an audit does;
- ``twins, non-members, testbed's draw``: non-members under the testbed's one draw, reordered as
  the members' rows are: the control for what a members' rate owes to one draw's luck;
- ``unpaired, members: lean``: members' public versions against held-out passages (their public
  versions too: the same rewriting on both sides), each side in its own random order — the
  audit a user runs without twins. The blind check runs on the H0 streams.

Writes benchmarks/results/twins/{twins.md,twins.json}.

    python benchmarks/bench_twins.py [--trials 1000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "twins"
TESTBED = "tiny-pretrain-twins"


# The feature subsets compared on the same trials (issue 35): columns of one extraction with the
# `twins` set (the lean pass plus the changed-position features, ``features.twin_positions``).
LEAN = ["gray_ppl", "gray_zlib_ratio", "gray_min_k_20", "gray_min_kpp_20", "gray_ref_ratio", "gray_ref_diff",
        "gray_ez"]
CALIBRATED = ["gray_ref_ratio", "gray_ref_diff", "gray_ez"]
CHANGED = ["gray_twin_lp", "gray_twin_ref_diff"]
SUBSETS = {"lean": LEAN, "calibrated": CALIBRATED, "changed positions": CHANGED,
           "changed ref-relative only": ["gray_twin_ref_diff"], "calibrated + changed": CALIBRATED + CHANGED,
           "lean + changed (twins set)": LEAN + CHANGED}


def features(passages: list[dict], target, reference):
    from trainspotter.features.extract import extract
    from trainspotter.features.features import FEATURE_SETS

    if not all("twin" in p for p in passages):  # held-out text has no twin (extract refuses the twins set)
        df = extract(passages, target, reference, "gray", FEATURE_SETS["lean"])
        return np.column_stack([df[LEAN].to_numpy(dtype=float), np.full((len(df), len(CHANGED)), np.nan)])
    df = extract(passages, target, reference, "gray", FEATURE_SETS["twins"])
    return df[LEAN + CHANGED].to_numpy(dtype=float)


def summary(stops: np.ndarray, n: int, alpha: float, h0: bool) -> dict:
    hits = int((stops > 0).sum())
    out = {"trials": int(len(stops)), "pairs": int(n), "rejected": hits, "rate": hits / len(stops)}
    if h0:
        out["p_above_alpha"] = float(binomtest(hits, len(stops), alpha, alternative="greater").pvalue)
    else:
        censored = np.where(stops > 0, stops, n)
        out |= {"mean_pairs_to_decision": float(censored.mean()),
                "median_pairs_to_decision": float(np.median(censored)),
                "pairs_for_95pct": int(np.sort(censored)[math.ceil(0.95 * len(censored)) - 1])
                if hits >= 0.95 * len(stops) else None}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--subsets", default=",".join(SUBSETS), help="comma-separated names of SUBSETS")
    parser.add_argument("--render", action="store_true", help="only rewrite twins.md from twins.json")
    parser.add_argument("--cache", type=Path, help="an .npz of the extracted features: read if there, else written")
    parser.add_argument("--rewriter", type=json.loads, help="JSON: KeyedLexicalRewriter settings for a variant "
                        "testbed (TESTBED-NAME, from --name); results under results/twins/NAME/")
    parser.add_argument("--name", default="variant", help="the variant's name (with --rewriter)")
    args = parser.parse_args()
    global OUT
    if args.rewriter is not None:
        OUT = OUT / args.name
    if args.render:
        return render(json.loads((OUT / "twins.json").read_text()))
    from trainspotter.backends import load_backend
    from trainspotter.evaluation.testbed import PRESETS, build_testbed, load_manifest
    from trainspotter.stats.blind import TextRows, blind_stops
    from trainspotter.stats.sequential import TestConfig
    from trainspotter.stats.simulation import stream_stops
    from trainspotter.twins import load_twins

    start = time.time()
    config, bed = PRESETS[TESTBED], TESTBED
    if args.rewriter is not None:  # a variant: another rewriter (or shared keys: {"keys": "shared"})
        from trainspotter.twins import KeyedLexicalRewriter

        spec = dict(args.rewriter)
        keys = spec.pop("keys", "per split")
        rewriter = KeyedLexicalRewriter(**spec).describe() | ({"keys": keys} if keys == "per split" else {})
        bed = f"{TESTBED}-{args.name}"
        config = config.model_copy(update={"name": bed, "twins_rewriter": rewriter})
    out = build_testbed(config)
    manifest = load_manifest(bed)
    target, reference = load_backend(f"testbed:{bed}"), load_backend(f"testbed:{bed}/reference")
    sides = {split: load_twins(out / f"twins-{split}").sides(seed=0) for split in ("member", "nonmember")}
    heldout = [json.loads(line) for line in (out / "heldout.jsonl").read_text().splitlines()]
    cached = bool(args.cache and args.cache.exists())
    if cached:  # (the extraction's own seconds travel with the cache)
        F = {tuple(k.split("/")) if "/" in k else k: v for k, v in np.load(args.cache).items()}
        start -= float(F.pop("extract_seconds", 0.0))
    else:
        F = {}
        for split, (public, private) in sides.items():  # each version with its twin's text
            F[split, "public"] = features(public, target, reference)
            F[split, "private"] = features(private, target, reference)
        F["heldout"] = features(heldout, target, reference)  # no twin: changed-position columns NaN, unused
        if args.cache:
            np.savez(args.cache, extract_seconds=time.time() - start,
                     **{"/".join(k) if isinstance(k, tuple) else k: v for k, v in F.items()})
    extracted = time.time() - start
    print(f"features extracted in {extracted:.0f} s", flush=True)
    config = TestConfig(alpha=0.05)
    rng = np.random.default_rng(args.seed)
    T, results, all_columns = args.trials, {}, LEAN + CHANGED
    for split in ("member", "nonmember"):
        for side in ("public", "private"):
            if not np.isfinite(F[split, side]).all():
                raise SystemExit(f"non-finite features in {split}/{side}")

    def cols(X, names):
        return X[:, [all_columns.index(c) for c in names]]

    def stops_of(S, H, ix, iy, names):
        return stream_stops(cols(S, names), cols(H, names), ix, iy, [config], [config.alpha], names)[0][0, 0]

    # the same trials (orders, draws) for every subset
    n1 = len(F["member", "public"])
    order1 = np.stack([rng.permutation(n1) for _ in range(T)])
    pub, pri = F["nonmember", "public"], F["nonmember", "private"]
    n0 = len(pub)
    both = np.concatenate([pub, pri])
    swap = rng.random((T, n0)) < 0.5  # H0: a fresh draw per trial (swap each passage's versions w.p. 1/2)
    order0 = np.stack([rng.permutation(n0) for _ in range(T)])
    sw = np.take_along_axis(swap, order0, axis=1)
    ix0, iy0 = np.where(sw, order0 + n0, order0), np.where(sw, order0, order0 + n0)
    seconds = {}
    for name in args.subsets.split(","):
        t0 = time.time()
        names = SUBSETS[name]
        results[f"twins, members: {name}"] = summary(
            stops_of(F["member", "public"], F["member", "private"], order1, order1, names), n1, 0.05, False)
        results[f"twins, non-members (H0): {name}"] = summary(stops_of(both, both, ix0, iy0, names), n0, 0.05, True)
        # control for the H1 rows: non-members under the testbed's one draw, reordered like the members
        results[f"twins, non-members, testbed's draw: {name}"] = summary(
            stops_of(pub, pri, order0, order0, names), n0, 0.05, True)
        seconds[name] = round(time.time() - t0, 1)
        print(name, results[f"twins, members: {name}"]["rate"], results[f"twins, non-members (H0): {name}"]["rate"],
              f"{seconds[name]} s", flush=True)
    # unpaired: members' public versions vs held-out, each side its own order (lean)
    n = min(n1, len(F["heldout"]))
    ix = np.stack([rng.permutation(n1)[:n] for _ in range(T)])
    iy = np.stack([rng.permutation(len(F["heldout"]))[:n] for _ in range(T)])
    results["unpaired, members: lean"] = summary(stops_of(F["member", "public"], F["heldout"], ix, iy, LEAN), n,
                                                 0.05, False)
    texts = [p["text"] for p in sides["nonmember"][0]] + [q["text"] for q in sides["nonmember"][1]]
    rows = TextRows(texts)
    blind, _ = blind_stops(rows, rows, ix0, iy0, config)
    results["blind check on twins (H0)"] = summary(blind, n0, 0.05, True)
    report = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "testbed": bed,
              "rewriter": manifest["config"].get("twins_rewriter"),
              "machine": platform.machine(), "cpus": os.cpu_count(), "trials": T, "alpha": 0.05,
              "subsets": {k: SUBSETS[k] for k in args.subsets.split(",")}, "twins": manifest["twins"],
              "extract_seconds": round(extracted, 1), "features_cached": cached, "test_seconds": seconds,
              "seconds": round(time.time() - start, 1), "results": results}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "twins.json").write_text(json.dumps(report, indent=2) + "\n")
    render(report)


def _rewriter(settings: dict | None) -> str:
    if not settings:
        return "v1: rate 0.5, 1 sense, shared keys"
    return (f"v{settings.get('version', 1)}: rate {settings.get('rate')}, {settings.get('senses')} senses, "
            f"SemCor count ≥ {settings.get('min_count', 0)}, inflections, phrases {settings.get('phrases')}, "
            f"{'per-split' if settings.get('keys') == 'per split' else 'shared'} keys")


def _quality(made: dict) -> str:
    out = f", MiniLM similarity {made['similarity']:.3f}" if made.get("similarity") is not None else ""
    if made.get("twin_edit_rate") is not None:
        out += f"; public against private version, audited tokens: edit rate {made['twin_edit_rate']:.3f}"
    return out


def render(report: dict) -> None:
    """benchmarks/results/twins/twins.md from the report (``--render``: from twins.json)."""
    made, res = report["twins"], report["results"]
    rate = lambda r: f"{r['rate']:.3f} ({r['rejected']}/{r['trials']})"  # noqa: E731
    lines = [
        f"# Twins on {report['testbed']}: which features, paired against unpaired, and the false \"trained on\" "
        "rate",
        "",
        f"`benchmarks/bench_twins.py`, {report['when']}, {report['trials']} trials each, α = {report['alpha']}, "
        f"gray box with the reference, the same trials (orders, draws) for every feature subset. Twins (k = 2, "
        f"keyed lexical rewriter {_rewriter(report.get('rewriter'))}): {made['member']['passages']} members and "
        f"{made['nonmember']['passages']} non-members ({made['member']['dropped']} and "
        f"{made['nonmember']['dropped']} dropped: a version too short, or the versions equal within the 64 audited "
        f"tokens); members' variant 0 against the original passage: mean edit rate {made['member']['edit_rate']:.3f} "
        f"of the words{_quality(made['member'])}. Features extracted once ({report['extract_seconds']} s"
        f"{', read back from its cache for this run' if report.get('features_cached') else ''}) with the `twins` "
        f"set; each subset is columns of it.",
        "",
        "| features | members: \"trained on\" | mean pairs to decision (censored) | non-members, fresh draw per "
        "trial (H0) | p (rate > α), one-sided | non-members, the testbed's one draw |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, columns in report["subsets"].items():
        h1, h0 = res[f"twins, members: {name}"], res[f"twins, non-members (H0): {name}"]
        control = res.get(f"twins, non-members, testbed's draw: {name}")
        lines.append(f"| {name} (`{'`, `'.join(columns)}`) | {rate(h1)} | {h1['mean_pairs_to_decision']:.1f} | "
                     f"{rate(h0)} | {h0['p_above_alpha']:.3g} | {rate(control) if control else '–'} |")
    unpaired, blind = res["unpaired, members: lean"], res["blind check on twins (H0)"]
    lines += ["", f"Unpaired audit of the same members' public versions against held-out passages (lean): "
              f"{rate(unpaired)}, {unpaired['mean_pairs_to_decision']:.1f} pairs on average "
              f"({unpaired.get('pairs_for_95pct') or '–'} for 95%). Blind check on the fresh-draw twins (H0): "
              f"fired in {rate(blind)}.", "",
              "The members' rows reorder one draw (the testbed's: training fixed which versions are public); the "
              "H0 rows draw the twins anew per trial (each passage's versions swap sides with probability 1/2), so "
              "they are independent draws of the design. The last column reorders the non-members' one draw like "
              "the members' rows: what a members' rate owes to the luck of one draw rather than to training.",
              "", f"Seconds per subset (both sides' tests): {report.get('test_seconds')}; all: {report['seconds']} s "
              f"on {report['cpus']} shared CPUs."]
    (OUT / "twins.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
