"""Twins on `tiny-pretrain-twins`: pairs to decision of a twins audit against today's unpaired
audit on the same members, and the twins audit's false "trained on" rate (issue 35, a first
look before `benchmark --suite twins`).

Testbed `tiny-pretrain-twins` (built if missing, ~8 CPU-minutes): every passage rewritten twice
by the keyed lexical rewriter, one version drawn public; the target was pre-trained with the
members' public versions mixed in once, the reference without them. Features: the default
audit's (`lean`, gray box, with the reference), extracted once for every version. Then, with
the audit's sequential test (``stream_stops``, default preset, α = 0.05), per trial:

- ``twins, members``: each member's public version against its private twin, paired, in a
  random order (H1: the public versions were trained on);
- ``unpaired, members``: members' public versions against held-out passages (their public
  versions too: the same rewriting on both sides), each side in its own random order — the
  audit a user runs without twins;
- ``twins, non-members (H0)``: the same on non-members, with **a fresh draw per trial**: each
  passage's two versions swap sides with probability 1/2, as the random draw at `twins make`
  could have gone (neither was trained on, so every draw is equally valid). So the trials are
  independent draws of the design, not reorderings of one split. The blind check runs on the
  same streams.

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


def features(passages: list[dict], target, reference, columns: list[str] | None = None):
    from trainspotter.features.extract import extract
    from trainspotter.features.features import FEATURE_SETS

    df = extract(passages, target, reference, "gray", FEATURE_SETS["lean"])
    columns = columns or [c for c in df.columns if c not in ("id", "set")]
    return df[columns].to_numpy(dtype=float), columns


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
    parser.add_argument("--render", action="store_true", help="only rewrite twins.md from twins.json")
    args = parser.parse_args()
    if args.render:
        return render(json.loads((OUT / "twins.json").read_text()))
    from trainspotter.backends import load_backend
    from trainspotter.evaluation.testbed import PRESETS, build_testbed, load_manifest
    from trainspotter.stats.blind import TextRows, blind_stops
    from trainspotter.stats.sequential import TestConfig
    from trainspotter.stats.simulation import stream_stops
    from trainspotter.twins import load_twins

    start = time.time()
    out = build_testbed(PRESETS[TESTBED])
    manifest = load_manifest(TESTBED)
    target, reference = load_backend(f"testbed:{TESTBED}"), load_backend(f"testbed:{TESTBED}/reference")
    sides = {split: load_twins(out / f"twins-{split}").sides(seed=0) for split in ("member", "nonmember")}
    heldout = [json.loads(line) for line in (out / "heldout.jsonl").read_text().splitlines()]
    F = {}
    for split, (public, private) in sides.items():
        F[split, "public"], columns = features(public, target, reference)
        F[split, "private"], _ = features(private, target, reference, columns)
    F["heldout"], _ = features(heldout, target, reference, columns)
    extracted = time.time() - start
    config = TestConfig(alpha=0.05)
    rng = np.random.default_rng(args.seed)
    T, results = args.trials, {}

    # H1, paired: the same random order on both sides
    n = len(F["member", "public"])
    order = np.stack([rng.permutation(n) for _ in range(T)])
    results["twins, members"] = summary(stream_stops(F["member", "public"], F["member", "private"], order, order,
                                                     [config], [config.alpha], columns)[0][0, 0], n, 0.05, False)
    # H1, unpaired: members' public versions vs held-out, each side its own order
    n = min(len(F["member", "public"]), len(F["heldout"]))
    ix = np.stack([rng.permutation(len(F["member", "public"]))[:n] for _ in range(T)])
    iy = np.stack([rng.permutation(len(F["heldout"]))[:n] for _ in range(T)])
    results["unpaired, members"] = summary(stream_stops(F["member", "public"], F["heldout"], ix, iy, [config],
                                                        [config.alpha], columns)[0][0, 0], n, 0.05, False)
    # H0: non-members, a fresh draw per trial (swap the versions of each passage w.p. 1/2)
    pub, pri = F["nonmember", "public"], F["nonmember", "private"]
    texts = [p["text"] for p in sides["nonmember"][0]], [q["text"] for q in sides["nonmember"][1]]
    n = len(pub)
    both, both_texts = np.concatenate([pub, pri]), texts[0] + texts[1]
    swap = rng.random((T, n)) < 0.5
    order = np.stack([rng.permutation(n) for _ in range(T)])
    sw = np.take_along_axis(swap, order, axis=1)
    ix, iy = np.where(sw, order + n, order), np.where(sw, order, order + n)
    stops = stream_stops(both, both, ix, iy, [config], [config.alpha], columns)[0][0, 0]
    rows = TextRows(both_texts)
    blind, _ = blind_stops(rows, rows, ix, iy, config)
    results["twins, non-members (H0)"] = summary(stops, n, 0.05, True)
    results["blind check on twins (H0)"] = summary(blind, n, 0.05, True)
    report = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "testbed": TESTBED,
              "machine": platform.machine(), "cpus": os.cpu_count(), "trials": T, "alpha": 0.05,
              "features": columns, "twins": manifest["twins"], "extract_seconds": round(extracted, 1),
              "seconds": round(time.time() - start, 1), "results": results}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "twins.json").write_text(json.dumps(report, indent=2) + "\n")
    render(report)


def render(report: dict) -> None:
    """benchmarks/results/twins/twins.md from the report (``--render``: from twins.json)."""
    made = report["twins"]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "twins.json").write_text(json.dumps(report, indent=2) + "\n")
    render(report)


def render(report: dict) -> None:
    """benchmarks/results/twins/twins.md from the report (``--render``: from twins.json)."""
    made = report["twins"]
    lines = [
        "# Twins on tiny-pretrain-twins: paired against unpaired, and the false \"trained on\" rate", "",
        f"`benchmarks/bench_twins.py`, {report['when']}, {report['trials']} trials each, α = {report['alpha']}, "
        f"default audit (`lean`, gray, with the reference). Twins (k = 2, keyed lexical rewriter): "
        f"{made['member']['passages']} members and {made['nonmember']['passages']} non-members "
        f"({made['member']['dropped']} and {made['nonmember']['dropped']} dropped: a version too short, or the "
        f"versions equal within the 64 audited tokens); mean edit rate {made['member']['edit_rate']:.3f} of the words.",
        "",
        "| audit | pairs available | \"trained on\" | mean pairs to decision (censored) | pairs for 95% | "
        "p (rate > α), one-sided |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in report["results"].items():
        mean = f"{r['mean_pairs_to_decision']:.1f}" if "mean_pairs_to_decision" in r else "–"
        p = f"{r['p_above_alpha']:.3g}" if "p_above_alpha" in r else ""
        lines.append(f"| {name} | {r['pairs']} | {r['rate']:.3f} ({r['rejected']}/{r['trials']}) | {mean} | "
                     f"{r.get('pairs_for_95pct') or '–'} | {p} |")
    lines += ["", "H1 rows reorder one set of members (the testbed's); the H0 rows draw the twins anew per trial."]
    (OUT / "twins.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

if __name__ == "__main__":
    main()
