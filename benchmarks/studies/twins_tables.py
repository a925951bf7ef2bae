"""The twins benchmark's Markdown (``benchmarks/bench_twins.py``; ``--render`` rewrites it from
twins.json): the k = 2 table (``render_k2``: ``studies.twins_k2``'s rows) and the k > 2 one
(``render_kmean``: ``studies.twins_kmean``'s), with STAMP's t-test (Rastogi et al. 2025), today's
unpaired audit and the signal and noise per pair beside them."""

from __future__ import annotations

import math

from studies.twins_k2 import SCORED
from studies.twins_kmean import MODES
from trainspotter.evaluation.twins_suite import STAMP_NS

__all__ = ["render_k2", "render_kmean"]


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


def _stamp(stamp: dict | None, res: dict, rows: str = "twins, members", k: int = 2) -> list[str]:
    """The STAMP t-test section: power and H0 rate at each fixed n, n for 80% power, beside the
    e-process's pairs for 80% of its trials (its results whose keys begin with ``rows``)."""
    if not stamp:
        return []
    ns = [n for n in map(str, STAMP_NS) if all(n in row for row in stamp.values())]
    lines = ["", "## STAMP's paired t-test on the same twins (fixed n)", "",
             "One-sided paired t-test (α = 0.05) of the public version's against its private twin's value"
             + (" (k > 2: the mean of its private versions' values, per passage)" if k > 2 else "") + ", on the "
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


def render_k2(report: dict) -> str:
    """twins.md of a k = 2 report (``studies.twins_k2.k2_run``)."""
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
    return "\n".join(lines) + "\n"


def render_kmean(report: dict) -> str:
    """twins.md of a k > 2 report (``studies.twins_kmean.kmean_run``); a report made before
    a section existed (STAMP's t-test, signal and noise) renders without it."""
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
    tail = [*_stamp(res.get("stamp"), res, "members, ", k), *_signal_lines(res.get("signal and noise"), k)]
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
              *tail, *([""] if tail else []),
              f"Seconds per subset (both modes, both splits): {report['test_seconds']}; all: {report['seconds']} s on "
              f"{report['cpus']} shared CPUs."]
    return "\n".join(lines) + "\n"


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


def _signal_lines(sn: dict | None, k: int) -> list[str]:
    """The signal-and-noise table (``twins_suite.signal_noise``)."""
    if not sn:
        return []
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
