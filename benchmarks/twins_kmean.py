"""Twins with k > 2 variants per passage (issue 35): bet on one private variant drawn at random,
or on the mean of the public version's pairwise payoffs against all k − 1 private ones?

Called by ``bench_twins.py`` for a testbed with k > 2 (``tiny-pretrain-twins-k4``). Features of
every ordered pair (a, b) of a passage's k variants, f(x_a | x_b) (the `twins` set: the lean
columns do not depend on b, the changed-position ones do), each text forward-passed once
(``MemoBackend``). Then, on the same trials (orders, draws), with the fixed scorer (the twins
preset):

- (a) ``one``: per passage and trial, one private variant j drawn at random, the round is the pair
  (f(pub | j), f(j | pub)): what ``audit --twins`` does today (there, with its seed);
- (b) ``mean``: the round's payoff is the mean over the k − 1 private j of the pairwise payoffs
  (``SequentialTest.update`` with m = k − 1 sub-pairs; trainspotter.stats.sequential).

Members (H1): the testbed's draw (training fixed which version is public), a seeded order per
trial. Non-members (H0): a fresh uniform draw of the public index among the k variants per
passage per trial (neither version was trained on, so every draw is one the design could have
made). The blind check runs on the H0 trials' one-private pairs, as ``bench_twins.py`` does.

Beside them: STAMP's fixed-n paired t-test (the public version against the mean of its private
versions, ``stamp_ttests``); today's unpaired audit of the same members against the held-out
passages, with its usual control and the pooled one (``unpaired``); and the members' signal and
noise per pair in both designs, with the pairs the most powerful test of each would need
(``signal_noise``): what bounds any test on these features.
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

from trainspotter.evaluation.plots import power_plot
from trainspotter.evaluation.twins_suite import (SUBSETS, decided_curves, h0_draws, own_values, private_variants,
                                                 signal_noise, stamp_ttests, sub_pair_indices, summary, unpaired)

MODES = {"one": "(a) one private variant, drawn at random", "mean": "(b) mean of the pairwise payoffs, all k − 1"}
KSUBSETS = ("lean", "calibrated", "lean + changed (twins set)")


class MemoBackend:
    """A backend whose ``score`` answers each text once (the k(k − 1) ordered pairs of a passage
    share its k texts); everything else is the wrapped backend's."""

    def __init__(self, inner):
        self.inner, self.memo = inner, {}

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def prefill(self, texts: list[str], chunk: int = 64, label: str = "") -> None:
        new = list(dict.fromkeys(t for t in texts if (t, False) not in self.memo))
        for start in range(0, len(new), chunk):
            part = new[start: start + chunk]
            self.memo.update({(t, False): s for t, s in zip(part, self.inner.score(part, False))})
            print(f"{label}: {min(start + chunk, len(new))}/{len(new)} texts scored", flush=True)

    def score(self, texts: list[str], distribution: bool = False):
        if distribution:  # (not asked by the `twins` set; not memoised)
            return self.inner.score(texts, True)
        self.prefill(texts)
        return [self.memo[t, False] for t in texts]


def pair_features(twins, target, reference, columns: list[str], access: str) -> np.ndarray:
    """Rows f(x_a | x_b) of every ordered pair of every passage's variants, shape (N·k·k, p): row
    (n·k + a)·k + b (a = b: NaN, unused). Variant indices are the folder's (0..k − 1)."""
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


def paired(one: np.ndarray, mean: np.ndarray, n: int) -> dict:
    """Censored pairs to decision, trial by trial: (a) minus (b), mean with a 95% normal CI."""
    d = np.where(one > 0, one, n) - np.where(mean > 0, mean, n)
    half = 1.96 * d.std(ddof=1) / math.sqrt(len(d))
    return {"mean_saving": float(d.mean()), "ci95": [float(d.mean() - half), float(d.mean() + half)],
            "mean_sooner": float((d > 0).mean()), "one_sooner": float((d < 0).mean())}


def run(args, out_dir: Path, bed: str, out: Path, manifest: dict, target, reference) -> None:
    """The k > 2 comparison (module docstring); writes out_dir/twins.json and twins.md."""
    from bench_twins import ACCESS, STAMP, features

    from trainspotter.features.orientation import directions
    from trainspotter.features.text import TextRows
    from trainspotter.stats.blind import blind_stops
    from trainspotter.stats.sequential import TestConfig
    from trainspotter.stats.simulation import stream_stops
    from trainspotter.twins.folder import load_twins

    start = time.time()
    lean, changed, subsets = ACCESS[args.access]
    names = args.subsets.split(",")
    columns = lean + changed
    twins = {s: load_twins(out / f"twins-{s}") for s in ("member", "nonmember")}
    k = twins["member"].k
    F = dict(np.load(args.cache)) if args.cache and args.cache.exists() else {}
    start -= float(F.pop("extract_seconds", 0.0))
    cached = "member" in F and "heldout" in F
    if "member" not in F:
        memo_t, memo_r = MemoBackend(target), MemoBackend(reference)
        F |= {s: pair_features(tw, memo_t, memo_r, columns, args.access) for s, tw in twins.items()}
    if "heldout" not in F:  # (held-out text has no twin: the lean columns only)
        heldout = [json.loads(x) for x in (out / "heldout.jsonl").read_text().splitlines()]
        F["heldout"] = features(heldout, target, reference, args.access)[:, :len(lean)]
    if args.cache and not cached:
        np.savez(args.cache, extract_seconds=time.time() - start, **F)
    extracted = time.time() - start
    print(f"features of every ordered pair in {extracted:.0f} s", flush=True)
    H = F.pop("heldout")
    for s, R in F.items():
        used = R.reshape(-1, k, k, len(columns))[:, ~np.eye(k, dtype=bool)]
        if not np.isfinite(used).all():
            raise SystemExit(f"non-finite features in {s}")
    rng, T = np.random.default_rng(args.seed), args.trials
    n1, n0 = len(twins["member"].ids), len(twins["nonmember"].ids)
    pub1 = np.broadcast_to(np.array([twins["member"].public[i] for i in twins["member"].ids]), (T, n1))
    order1 = np.stack([rng.permutation(n1) for _ in range(T)])
    priv1 = private_variants(pub1, order1, k, rng)
    pub0 = h0_draws(rng, T, n0, k)  # H0: a fresh uniform draw of the public variant per trial
    order0 = np.stack([rng.permutation(n0) for _ in range(T)])
    priv0 = private_variants(pub0, order0, k, rng)
    config = TestConfig(alpha=0.05, scorer="fixed")
    results, seconds, decided = {}, {}, {}  # decided: the members' stop times of the plotted rows
    for name in names:
        t0, cols = time.time(), [columns.index(c) for c in subsets[name]]
        signs = directions(subsets[name])
        stops = {}
        for mode in MODES:
            for split, R, pub, order, priv, n, h0 in (("member", F["member"], pub1, order1, priv1, n1, False),
                                                      ("nonmember", F["nonmember"], pub0, order0, priv0, n0, True)):
                ix, iy = sub_pair_indices(pub, order, priv[mode], k)
                st = stream_stops(R[:, cols], R[:, cols], ix, iy, [config], [config.alpha], signs)[0][0, 0]
                stops[mode, split] = st
                if split == "member" and name in SUBSETS:
                    decided[f"twins {'all' if mode == 'mean' else 'one'}, {name}"] = st
                results[f"{split}s, {mode}: {name}"] = summary(st, n, config.alpha, h0)
        results[f"paired (members), one minus mean: {name}"] = paired(stops["one", "member"],
                                                                      stops["mean", "member"], n1)
        seconds[name] = round(time.time() - t0, 1)
        print(name, {m: results[f"members, {m}: {name}"]["mean_pairs_to_decision"] for m in MODES},
              {m: results[f"nonmembers, {m}: {name}"]["rate"] for m in MODES}, f"{seconds[name]} s", flush=True)
    tw0 = twins["nonmember"]
    rows = TextRows([tw0.variants[i][a] for i in tw0.ids for a in range(k)])
    pub = np.take_along_axis(pub0, order0, axis=1)
    blind, _ = blind_stops(rows, rows, order0 * k + pub, order0 * k + priv0["one"][..., 0], config)
    results["blind check on the H0 trials (one private)"] = summary(blind, n0, config.alpha, True)
    drawn0 = np.array([twins["nonmember"].public[i] for i in twins["nonmember"].ids])  # the testbed's draw
    V = {s: own_values(F[s], k, len(columns)) for s in ("member", "nonmember")}  # (the lean columns lead)
    flat, flat_stops = unpaired({s: v[..., :len(lean)] for s, v in V.items()}, H, pub1[0], drawn0, lean, rng, T)
    results |= flat
    decided |= {f"unpaired ({sc}), lean": flat_stops[f"unpaired, members against held-out: lean ({sc})"]
                for sc in ("online", "fixed")}
    pairs = {s: F[s].reshape(-1, k, k, len(columns)) for s in V}  # (black's STAMP column depends on the twin)
    results["stamp"] = stamp_ttests(pairs, pub1, order1, pub0, order0, columns, STAMP[args.access])
    results["signal and noise"] = signal_noise(V["member"][..., :len(lean)], H, pub1[0], lean)
    report = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "testbed": bed, "k": k,
              "access": args.access, "rewriter": manifest["config"].get("twins_rewriter"),
              "machine": platform.machine(), "cpus": os.cpu_count(), "trials": T, "alpha": config.alpha,
              "test": "twins preset (mixture strategy, diff payoff, λ_max 0.8, fixed scorer)",
              "subsets": {n: subsets[n] for n in names}, "twins": manifest["twins"], "members": n1,
              "nonmembers": n0, "extract_seconds": round(extracted, 1), "features_cached": cached,
              "test_seconds": seconds, "seconds": round(time.time() - start, 1), "results": results}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "twins.json").write_text(json.dumps(report, indent=2) + "\n")
    lengths = {r: n1 if r.startswith("twins") else min(n1, len(H)) for r in decided}
    power_plot(decided_curves(decided, lengths), out_dir / "decided.png",
               title=f"Members' trials decided by t pairs ({bed}, k = {k}, α = {config.alpha:g}, {T} trials)")
    render(report, out_dir)


def render(report: dict, out_dir: Path) -> None:
    """out_dir/twins.md from the k > 2 report (``bench_twins.py --render`` reads twins.json)."""
    from bench_twins import _stamp

    res, k = report["results"], report["k"]
    rate = lambda r: f"{r['rate']:.3f} ({r['rejected']}/{r['trials']})"  # noqa: E731
    lines = [f"# Twins with k = {k} on {report['testbed']}: one private variant, or the mean over all {k - 1}?", "",
             f"`benchmarks/bench_twins.py --testbed {report['testbed']}`, {report['when']}, {report['trials']} "
             f"trials each, α = {report['alpha']}, {report['access']} box with the reference, {report['test']}, the "
             f"same trials (orders, draws) for every row. {report['members']} members (their public versions seen "
             f"once in pre-training) and {report['nonmembers']} non-members, each with {k} variants. Features of "
             f"every ordered pair of a passage's variants, f(x_a | x_b) (`twins` set), extracted once "
             f"({report['extract_seconds']} s{', read back from its cache' if report['features_cached'] else ''}).",
             "", "| features | private variants | members: \"trained on\" | mean pairs to decision (censored) | "
             "80% by | 95% by | texts queried, mean | non-members, fresh uniform draw per trial (H0) | "
             "p (rate > α), one-sided |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in report["subsets"]:
        for mode, label in MODES.items():
            h1, h0 = res[f"members, {mode}: {name}"], res[f"nonmembers, {mode}: {name}"]
            lines.append(f"| {name} | {label} | {rate(h1)} | {h1['mean_pairs_to_decision']:.1f} | "
                         f"{h1.get('pairs_for_80pct') or '–'} | {h1.get('pairs_for_95pct') or '–'} | "
                         f"{h1['mean_pairs_to_decision'] * (2 if mode == 'one' else k):.0f} | {rate(h0)} | "
                         f"{h0['p_above_alpha']:.3g} |")
    lines += ["", "Trial by trial on the members (same order, same draw of the public version; (a) also draws "
              "its one private variant per trial): pairs to decision of (a) minus (b).", "",
              "| features | mean saving of (b) [95% CI] | (b) decided sooner | (a) sooner |", "|---|---:|---:|---:|"]
    for name in report["subsets"]:
        p = res[f"paired (members), one minus mean: {name}"]
        lines.append(f"| {name} | {p['mean_saving']:.1f} [{p['ci95'][0]:.1f}, {p['ci95'][1]:.1f}] | "
                     f"{p['mean_sooner']:.1%} | {p['one_sooner']:.1%} |")
    blind = res["blind check on the H0 trials (one private)"]
    lines += ["", f"Texts queried: a pair of (a) costs the model 2 texts, a round of (b) all {k} variants (one "
              "forward pass each; the twin features need only the other version's text). Passages are what a twins "
              "audit runs out of; where queries cost more than passages, compare that column.", "",
              f"Blind check on the H0 trials' one-private pairs: fired in {rate(blind)}.", "",
              *_unpaired_lines(res), "",
              "(a) is `audit --twins --twins-private one` (its private variant drawn with the audit's seed); (b), the "
              "default `--twins-private all`, bets "
              "once per passage on u_t = 1/(k−1) Σ_j φ_t(x_pub, x_j), then the scorer learns all k − 1 sub-pairs: "
              "valid because every payoff is antisymmetric and, under H0, the public index is uniform among the k "
              "variants (trainspotter.stats.sequential, \"Sub-pairs\"; STAMP Sec. 3).", "",
              *_stamp(res.get("stamp"), res, "members, "), *_signal_lines(res["signal and noise"], k), "",
              f"Seconds per subset (both modes, both splits): {report['test_seconds']}; all: {report['seconds']} s on "
              f"{report['cpus']} shared CPUs."]
    (out_dir / "twins.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _unpaired_lines(res: dict) -> list[str]:
    """Today's unpaired audit of the same members, and its two controls (``unpaired``)."""
    rows = {key.removeprefix("unpaired, "): r for key, r in res.items() if key.startswith("unpaired")}
    if not rows:
        return []
    lines = ["## Today's audit without twins, on the same members", "",
             "Members' public versions against the held-out passages (their public versions: the same rewriter on "
             "both sides), lean features; the controls put non-members where the members were: one split reordered "
             "per trial (the benchmark's usual FPR), and the pooled control, non-members ∪ held-out split afresh "
             "in every trial (issue 35 item 6).", "",
             "| stream | pairs a side | \"trained on\" | mean pairs to decision (censored) | 80% by | 95% by | "
             "p (rate > α), one-sided |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in rows.items():
        if "p_above_alpha" in r:
            lines.append(f"| {name} | {r['pairs']} | {r['rate']:.3f} ({r['rejected']}/{r['trials']}) | | | | "
                         f"{r['p_above_alpha']:.3g} |")
        else:
            lines.append(f"| {name} | {r['pairs']} | {r['rate']:.3f} ({r['rejected']}/{r['trials']}) | "
                         f"{r['mean_pairs_to_decision']:.1f} | {r.get('pairs_for_80pct') or '–'} | "
                         f"{r.get('pairs_for_95pct') or '–'} | |")
    return lines


def _signal_lines(sn: dict, k: int) -> list[str]:
    """The signal-and-noise table (``signal_noise``)."""
    lines = ["", "## Signal and noise per pair: why twins need the pairs they need", "",
             f"Members, oriented so that > 0 is member-like. Twins: the public version minus the mean of its {k - 1} "
             "private versions; unpaired: a member's public version minus an independent held-out passage. μ: mean, "
             "σ: standard deviation, δ = μ/σ; n95 = ((z_0.95 + z_0.95)/δ)², the pairs a one-sided z-test (α = 0.05, "
             "direction and σ known: the most powerful test of a mean shift) needs for 95% power. Oracle: the best "
             "linear combination of the lean columns, δ² = μᵀΣ⁻¹μ fitted on these members (optimistic).", "",
             "| feature | twins μ | twins σ | twins δ | twins n95 | unpaired μ | unpaired σ | unpaired δ | "
             "unpaired n95 | twins μ / unpaired μ | twins σ / unpaired σ |", "|---|" + "---:|" * 10]
    for name, r in sn.items():
        if name == "oracle":
            continue
        t, u = r["twins"], r["unpaired"]
        lines.append(f"| {name} | {t['mu']:.4g} | {t['sigma']:.4g} | {t['delta']:.3f} | {t['n95']:.0f} | "
                     f"{u['mu']:.4g} | {u['sigma']:.4g} | {u['delta']:.3f} | {u['n95']:.0f} | "
                     f"{t['mu'] / u['mu']:.2f} | {t['sigma'] / u['sigma']:.2f} |")
    o = sn["oracle"]
    lines.append(f"| oracle (all lean columns) | | | {o['twins']['delta']:.3f} | {o['twins']['n95']:.0f} | | | "
                 f"{o['unpaired']['delta']:.3f} | {o['unpaired']['n95']:.0f} | | |")
    return lines
