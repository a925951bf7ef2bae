"""Twins on `tiny-pretrain-twins`: which features make a twins audit powerful, its pairs to
decision against today's unpaired audit on the same members, and its false "trained on" rate
(issue 35).

Testbed `tiny-pretrain-twins` (built if missing: 45 min on 2 busy shared CPUs): every passage rewritten twice
by the keyed lexical rewriter, one version drawn public; the target was pre-trained with the
members' public versions mixed in once, the reference without them. The rows, their trials and
the features: ``studies.twins_k2`` (k = 2); a testbed with k > 2 variants per
passage (`tiny-pretrain-twins-k4`) runs ``studies.twins_kmean`` instead: one
private variant drawn at random against the mean of the pairwise payoffs over all k − 1. The
Markdown: ``studies.twins_tables``.

Black box (``--access black``): the greedy tokens only; its testbed is
`tiny-pretrain-2k-twins-x2` (``--testbed``; 2000 passages per split, the members' public versions
seen twice, the exposure at which the unpaired black audit first has power).

Writes benchmarks/results/twins/{twins.md,twins.json} (another testbed or access:
benchmarks/results/twins/TESTBED-ACCESS/; a ``--rewriter`` variant: benchmarks/results/twins/NAME/).

    python benchmarks/bench_twins.py [--trials 1000]
    python benchmarks/bench_twins.py --access black --testbed tiny-pretrain-2k-twins-x2
    python benchmarks/bench_twins.py --testbed tiny-pretrain-twins-k4 --cache /tmp/k4-features.npz
    python benchmarks/bench_twins.py --rewriter '{"keys": "per passage"}' --name unkeyed
    python benchmarks/bench_twins.py --render [--testbed ... --access ...]   # twins.md from twins.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from trainspotter.evaluation.plots import power_plot
from studies.twins_k2 import ACCESS, TESTBED, k2_run, twins_testbed
from studies.twins_kmean import KSUBSETS, kmean_run
from trainspotter.evaluation.twins_suite import decided_curves
from studies.twins_tables import render_k2, render_kmean

OUT = Path(__file__).resolve().parent / "results" / "twins"


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
    out = (OUT / args.name if args.rewriter is not None
           else OUT / f"{args.testbed}-{args.access}" if (args.testbed, args.access) != (TESTBED, "gray") else OUT)
    if args.render:
        return write(out, json.loads((out / "twins.json").read_text()), report_too=False)
    start = time.time()
    bed, folder, manifest, target, reference, k = twins_testbed(args.testbed, args.rewriter, args.name)
    names = (args.subsets or ",".join(ACCESS[args.access][2] if k <= 2 else KSUBSETS)).split(",")
    run = dict(access=args.access, names=names, trials=args.trials, seed=args.seed, cache=args.cache, start=start)
    if k <= 2:
        return write(out, k2_run(bed, folder, manifest, target, reference, **run))
    report, decided = kmean_run(bed, folder, manifest, target, reference, **run)
    out.mkdir(parents=True, exist_ok=True)
    power_plot(decided_curves(decided["stops"], decided["lengths"]), out / "decided.png",
               title=f"Members' trials decided by t pairs ({bed}, k = {k}, α = 0.05, {args.trials} trials)")
    write(out, report)


def write(out: Path, report: dict, report_too: bool = True) -> None:
    """twins.md and (``report_too``) twins.json."""
    out.mkdir(parents=True, exist_ok=True)
    if report_too:
        (out / "twins.json").write_text(json.dumps(report, indent=2) + "\n")
    text = (render_k2 if report.get("k", 2) == 2 else render_kmean)(report)
    (out / "twins.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
