"""Twins on `tiny-pretrain-twins`: which features make a twins audit powerful, its pairs to
decision against today's unpaired audit on the same members, and its false "trained on" rate
(issue 35).

Testbed `tiny-pretrain-twins` (built if missing: 45 min on 2 busy shared CPUs): every passage rewritten twice
by the keyed lexical rewriter, one version drawn public; the target was pre-trained with the
members' public versions mixed in once, the reference without them. Features: the `twins` set
(gray box, with the reference), extracted once for every version, each with its twin's text:
the lean pass plus the changed-position features (``features.twin_positions``). Each feature
subset (``ACCESS``: lean, calibrated, changed positions, combinations) is columns of that one
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

Every row runs with two scorers (``SCORED``): the default preset's learned one (online) and the
twins preset's fixed directions (``stats.fixed_scorer``). Beside them, STAMP's fixed-n paired
t-test (``STAMP``) on the same trials: power and H0 rate at each n of ``STAMP_NS``.

Black box (``--access black``): the same with the greedy tokens only, the lean black columns
and the black changed-position ones (``black_twin_lp``, ``black_twin_ref_diff``,
``black_twin_match``), STAMP's t-test on the greedy match rates. Its testbed is
`tiny-pretrain-2k-twins-x2` (``--testbed``; 2000 passages per split, the members' public versions
seen twice, the exposure at which the unpaired black audit first has power).

Writes benchmarks/results/twins/{twins.md,twins.json} (another testbed or access:
benchmarks/results/twins/TESTBED-ACCESS/). A testbed with k > 2 variants per passage
(`tiny-pretrain-twins-k4`) runs ``twins_kmean`` instead: one private variant drawn at random
against the mean of the pairwise payoffs over all k − 1 (``--subsets`` from its ``KSUBSETS``).

    python benchmarks/bench_twins.py [--trials 1000]
    python benchmarks/bench_twins.py --access black --testbed tiny-pretrain-2k-twins-x2
    python benchmarks/bench_twins.py --testbed tiny-pretrain-twins-k4 --cache /tmp/k4-features.npz
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
import twins_kmean  # (benchmarks/, this script's folder)

from trainspotter.evaluation.twins_suite import CALIBRATED, LEAN, STAMP_NS, summary
from trainspotter.evaluation.twins_suite import STAMP as GRAY_STAMP

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "twins"
TESTBED = "tiny-pretrain-twins"


# The feature subsets compared on the same trials (issue 35): columns of one extraction with the
# `twins` set (the lean pass plus the changed-position features, ``features.twin_positions``),
# gray box (log-probabilities: the suite's LEAN and CALIBRATED) or black box (greedy tokens only:
# ``--access black``).
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
# each public version against its private twin, at a fixed n; here on log perplexity (the target
# alone, as STAMP) and on the reference-calibrated gray_ref_diff (the best single paired feature).
# Black box, the same t-test on the greedy match rate at the changed tokens (a radioactivity
# count, Sander et al. 2024) and on the whole passage's.
STAMP = {"gray": GRAY_STAMP,
         "black": {"greedy match at changed tokens": ("black_twin_match", 1),
                   "greedy match, whole passage": ("black_match_rate", 1)}}


def features(passages: list[dict], target, reference, access: str = "gray"):
    from trainspotter.features.extract import extract
    from trainspotter.features.features import FEATURE_SETS

    lean, changed, _ = ACCESS[access]
    if not all("twin" in p for p in passages):  # held-out text has no twin (extract refuses the twins set)
        df = extract(passages, target, reference, access, FEATURE_SETS["lean"])
        return np.column_stack([df[lean].to_numpy(dtype=float), np.full((len(df), len(changed)), np.nan)])
    df = extract(passages, target, reference, access, FEATURE_SETS["twins"])
    return df[lean + changed].to_numpy(dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--subsets", help="comma-separated names of the access's subsets (ACCESS; default: all)")
    parser.add_argument("--render", action="store_true", help="only rewrite twins.md from twins.json")
    parser.add_argument("--cache", type=Path, help="an .npz of the extracted features: read if there, else written")
    parser.add_argument("--rewriter", type=json.loads, help="JSON: KeyedLexicalRewriter settings for a variant "
                        "testbed (TESTBED-NAME, from --name), and \"keys\": \"shared\", \"per split\" (default) "
                        "or \"per passage\" (unkeyed); results under results/twins/NAME/")
    parser.add_argument("--name", default="variant", help="the variant's name (with --rewriter)")
    parser.add_argument("--access", choices=list(ACCESS), default="gray")
    parser.add_argument("--testbed", default=TESTBED, help="a twins testbed (results under results/twins/"
                        "TESTBED-ACCESS/ unless it is the default one, gray box)")
    args = parser.parse_args()
    global OUT
    if args.rewriter is not None:
        OUT = OUT / args.name
    elif (args.testbed, args.access) != (TESTBED, "gray"):
        OUT = OUT / f"{args.testbed}-{args.access}"
    if args.render:
        report = json.loads((OUT / "twins.json").read_text())
        return render(report) if report.get("k", 2) == 2 else twins_kmean.render(report, OUT)
    from trainspotter.backends import load_backend
    from trainspotter.evaluation.testbed import PRESETS, build_testbed, load_manifest
    from trainspotter.features.orientation import directions
    from trainspotter.features.text import TextRows
    from trainspotter.stats.blind import blind_stops
    from trainspotter.stats.sequential import TestConfig
    from trainspotter.stats.simulation import stream_stops
    from trainspotter.twins.folder import load_twins

    start = time.time()
    config, bed = PRESETS[args.testbed], args.testbed
    lean, changed, subsets = ACCESS[args.access]
    args.subsets = args.subsets or ",".join(subsets if config.twins <= 2 else twins_kmean.KSUBSETS)
    if args.rewriter is not None:  # a variant: another rewriter (or shared keys: {"keys": "shared"})
        from trainspotter.twins.lexical import KeyedLexicalRewriter

        spec = dict(args.rewriter)
        keys = spec.pop("keys", "per split")
        rewriter = KeyedLexicalRewriter(**spec).describe() | ({"keys": keys} if keys != "shared" else {})
        bed = f"{args.testbed}-{args.name}"
        config = config.model_copy(update={"name": bed, "twins_rewriter": rewriter})
    out = build_testbed(config)
    manifest = load_manifest(bed)
    target, reference = load_backend(f"testbed:{bed}"), load_backend(f"testbed:{bed}/reference")
    if config.twins > 2:  # k > 2: one private variant against the mean over all of them
        return twins_kmean.run(args, OUT, bed, out, manifest, target, reference)
    sides = {split: load_twins(out / f"twins-{split}").sides(seed=0) for split in ("member", "nonmember")}
    heldout = [json.loads(line) for line in (out / "heldout.jsonl").read_text().splitlines()]
    cached = bool(args.cache and args.cache.exists())
    if cached:  # (the extraction's own seconds travel with the cache)
        F = {tuple(k.split("/")) if "/" in k else k: v for k, v in np.load(args.cache).items()}
        start -= float(F.pop("extract_seconds", 0.0))
    else:
        F = {}
        for split, (public, private) in sides.items():  # each version with its twin's text
            F[split, "public"] = features(public, target, reference, args.access)
            F[split, "private"] = features(private, target, reference, args.access)
        F["heldout"] = features(heldout, target, reference, args.access)  # no twin: changed columns NaN, unused
        if args.cache:
            np.savez(args.cache, extract_seconds=time.time() - start,
                     **{"/".join(k) if isinstance(k, tuple) else k: v for k, v in F.items()})
    extracted = time.time() - start
    print(f"features extracted in {extracted:.0f} s", flush=True)
    config = TestConfig(alpha=0.05)
    rng = np.random.default_rng(args.seed)
    T, results, all_columns = args.trials, {}, lean + changed
    for split in ("member", "nonmember"):
        for side in ("public", "private"):
            if not np.isfinite(F[split, side]).all():
                raise SystemExit(f"non-finite features in {split}/{side}")

    def cols(X, names):
        return X[:, [all_columns.index(c) for c in names]]

    def stops_of(S, H, ix, iy, names, scorer="online"):
        test = config.model_copy(update={"scorer": scorer})
        return stream_stops(cols(S, names), cols(H, names), ix, iy, [test], [config.alpha], directions(names))[0][0, 0]

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
        for scorer, suffix in SCORED.items():
            t0, names, row = time.time(), subsets[name], name + suffix
            results[f"twins, members: {row}"] = summary(
                stops_of(F["member", "public"], F["member", "private"], order1, order1, names, scorer), n1, 0.05,
                False)
            results[f"twins, non-members (H0): {row}"] = summary(stops_of(both, both, ix0, iy0, names, scorer), n0,
                                                                 0.05, True)
            # control for the H1 rows: non-members under the testbed's one draw, reordered like the members
            results[f"twins, non-members, testbed's draw: {row}"] = summary(
                stops_of(pub, pri, order0, order0, names, scorer), n0, 0.05, True)
            seconds[row] = round(time.time() - t0, 1)
            print(row, results[f"twins, members: {row}"]["rate"], results[f"twins, non-members (H0): {row}"]["rate"],
                  f"{seconds[row]} s", flush=True)
    results["stamp"] = stamp_ttests(F, all_columns, order1, ix0, n0, STAMP[args.access])
    # unpaired: members' public versions vs held-out, each side its own order (lean)
    n = min(n1, len(F["heldout"]))
    ix = np.stack([rng.permutation(n1)[:n] for _ in range(T)])
    iy = np.stack([rng.permutation(len(F["heldout"]))[:n] for _ in range(T)])
    for scorer, suffix in SCORED.items():
        results[f"unpaired, members: lean{suffix}"] = summary(
            stops_of(F["member", "public"], F["heldout"], ix, iy, lean, scorer), n, 0.05, False)
    texts = [p["text"] for p in sides["nonmember"][0]] + [q["text"] for q in sides["nonmember"][1]]
    rows = TextRows(texts)
    blind, _ = blind_stops(rows, rows, ix0, iy0, config)
    results["blind check on twins (H0)"] = summary(blind, n0, 0.05, True)
    report = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "testbed": bed, "access": args.access,
              "member_repeats": manifest.get("member_repeats", 1),
              "rewriter": manifest["config"].get("twins_rewriter"),
              "machine": platform.machine(), "cpus": os.cpu_count(), "trials": T, "alpha": 0.05,
              "subsets": {k: subsets[k] for k in args.subsets.split(",")}, "twins": manifest["twins"],
              "extract_seconds": round(extracted, 1), "features_cached": cached, "test_seconds": seconds,
              "seconds": round(time.time() - start, 1), "results": results}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "twins.json").write_text(json.dumps(report, indent=2) + "\n")
    render(report)


def stamp_ttests(F: dict, columns: list[str], order1: np.ndarray, ix0: np.ndarray, n0: int, tests: dict) -> dict:
    """STAMP's fixed-n paired t-test (``STAMP``) on the first n pairs of each trial's order, for n
    in ``STAMP_NS``: the members' power (the same orders as the e-process rows) and the H0 rate on
    the fresh draws; and the one test on every member pair (n = all)."""
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


def _rewriter(settings: dict | None) -> str:
    if not settings:
        return "v1: rate 0.5, 1 sense, shared keys"
    return (f"v{settings.get('version', 1)}: rate {settings.get('rate')}, {settings.get('senses')} senses, "
            f"SemCor count ≥ {settings.get('min_count', 0)}, inflections, phrases {settings.get('phrases')}, "
            f"{'per-split' if settings.get('keys') == 'per split' else 'shared'} keys")


def _times(k: int) -> str:
    return {1: "once", 2: "twice"}.get(k, f"{k} times")


def _quality(made: dict) -> str:
    out = f", MiniLM similarity {made['similarity']:.3f}" if made.get("similarity") is not None else ""
    if made.get("twin_edit_rate") is not None:
        out += f"; public against private version, audited tokens: edit rate {made['twin_edit_rate']:.3f}"
    return out


def _fixed(row: dict | None) -> str:
    return "" if row is None else (f"; with the fixed scorer {row['rate']:.3f}, {row['mean_pairs_to_decision']:.1f} "
                                   f"pairs on average ({row.get('pairs_for_95pct') or '–'} for 95%)")


def _stamp(stamp: dict | None, res: dict, rows: str = "twins, members") -> list[str]:
    """The STAMP t-test section: power and H0 rate at each fixed n, n for 80% power, beside the
    e-process's pairs for 80% of its trials (its results whose keys begin with ``rows``)."""
    if not stamp:
        return []
    ns = [n for n in map(str, STAMP_NS) if all(n in row for row in stamp.values())]
    lines = ["", "## STAMP's paired t-test on the same twins (fixed n)", "",
             "One-sided paired t-test (α = 0.05) of the public version's against its private twin's value (k > 2: the "
             "mean of its private versions' values, per passage), on the "
             "first n pairs of each members' trial order (power) and of each fresh H0 draw (rate); n = all: the one "
             "test on every member pair.", "",
             "| t-test on | " + " | ".join(f"n = {n}" for n in ns) + " | n = all: p | n for 80% power |",
             "|---|" + "---:|" * (len(ns) + 2)]
    for name, row in stamp.items():
        at80 = next((n for n in ns if row[n]["power"] >= 0.8), None)
        lines.append(f"| {name} | " + " | ".join(f"{row[n]['power']:.2f} (H0 {row[n]['h0']:.3f})" for n in ns)
                     + f" | {row['all']['p']:.2g} | {at80 or '> ' + ns[-1]} |")
    best = min((r.get("pairs_for_80pct") or math.inf, k) for k, r in res.items() if k.startswith(rows))
    lines += ["", "The e-process needs no n in advance; " + (
        f"its fewest pairs for 80% of the members' trials: {best[0]} ({best[1].removeprefix(rows).strip(': ')})."
        if best[0] < math.inf else "no row reached 80% of the members' trials within the pairs available.")]
    return lines


def render(report: dict) -> None:
    """benchmarks/results/twins/twins.md from the report (``--render``: from twins.json)."""
    made, res = report["twins"], report["results"]
    rate = lambda r: f"{r['rate']:.3f} ({r['rejected']}/{r['trials']})"  # noqa: E731
    lines = [
        f"# Twins on {report['testbed']}: which features, paired against unpaired, and the false \"trained on\" "
        "rate",
        "",
        f"`benchmarks/bench_twins.py`, {report['when']}, {report['trials']} trials each, α = {report['alpha']}, "
        f"{report.get('access', 'gray')} box with the reference, the members' public versions seen "
        f"{_times(report.get('member_repeats', 1))} in pre-training, the same trials (orders, draws) for every "
        f"feature subset. Twins (k = 2, "
        f"keyed lexical rewriter {_rewriter(report.get('rewriter'))}): {made['member']['passages']} members and "
        f"{made['nonmember']['passages']} non-members ({made['member']['dropped']} and "
        f"{made['nonmember']['dropped']} dropped: a version too short, or the versions equal within the 64 audited "
        f"tokens); members' variant 0 against the original passage: mean edit rate {made['member']['edit_rate']:.3f} "
        f"of the words{_quality(made['member'])}. Features extracted once ({report['extract_seconds']} s"
        f"{', read back from its cache for this run' if report.get('features_cached') else ''}) with the `twins` "
        f"set; each subset is columns of it.",
        "",
        "| features | scorer | members: \"trained on\" | mean pairs to decision (censored) | 80% by | 95% by | "
        "non-members, fresh draw per trial (H0) | p (rate > α), one-sided | non-members, the testbed's one draw |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, columns in report["subsets"].items():
        for scorer, suffix in SCORED.items():
            if f"twins, members: {name}{suffix}" not in res:
                continue
            h1, h0 = res[f"twins, members: {name}{suffix}"], res[f"twins, non-members (H0): {name}{suffix}"]
            control = res.get(f"twins, non-members, testbed's draw: {name}{suffix}")
            lines.append(f"| {name} (`{'`, `'.join(columns)}`) | {scorer} | {rate(h1)} | "
                         f"{h1['mean_pairs_to_decision']:.1f} | {h1.get('pairs_for_80pct') or '–'} | "
                         f"{h1.get('pairs_for_95pct') or '–'} | {rate(h0)} | {h0['p_above_alpha']:.3g} | "
                         f"{rate(control) if control else '–'} |")
    unpaired, blind = res["unpaired, members: lean"], res["blind check on twins (H0)"]
    lines += ["", f"Unpaired audit of the same members' public versions against held-out passages (lean): "
              f"{rate(unpaired)}, {unpaired['mean_pairs_to_decision']:.1f} pairs on average "
              f"({unpaired.get('pairs_for_95pct') or '–'} for 95%)"
              f"{_fixed(res.get('unpaired, members: lean (fixed)'))}. "
              f"Blind check on the fresh-draw twins (H0): "
              f"fired in {rate(blind)}.", "",
              "The members' rows reorder one draw (the testbed's: training fixed which versions are public); the "
              "H0 rows draw the twins anew per trial (each passage's versions swap sides with probability 1/2), so "
              "they are independent draws of the design. The last column reorders the non-members' one draw like "
              "the members' rows: what a members' rate owes to the luck of one draw rather than to training. "
              "Scorer: online, the default preset's (weights learned from the pairs); fixed, the twins preset's "
              "(each feature's catalogued direction, scaled by its past pair differences: "
              "trainspotter.stats.fixed_scorer).",
              *_stamp(res.get("stamp"), res),
              "", f"Seconds per subset (both sides' tests): {report.get('test_seconds')}; all: {report['seconds']} s "
              f"on {report['cpus']} shared CPUs."]
    (OUT / "twins.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
