"""How the forced choice should spend its draws (issue 53; the defaults ``keyed.audit.CONTEXTS`` and
``SAMPLES``): in more contexts per unit, or more draws in one? On a keyed testbed's target, over
exploration trials kept apart from the keyed suite's (its trials are 0 to 39; these default to
100 to 105), each unit's first context in each of the first ``--max-contexts`` neutral passages
that show it, and the exact probability of each form in a draw there
(``keyed.queries.choice_shares``, relative to the testbed's reference, as the suite asks). Each
plan (C contexts × K draws in each) is then drawn ``--draws`` times from those probabilities (what
``keyed.queries.choose`` samples on local weights), the units the release shows most first within
the token budget (each draw costing its most, as the audit plans it), and the e-process run on
the pooled shares under the release key: its rate of "trained on" (weighted and unweighted), the
units asked and the median tokens to decision.

    python benchmarks/bench_keyed_contexts.py   # → benchmarks/results/keyed/contexts.{json,md}

The testbed must be built (`trainspotter testbed build tiny-pretrain-keyed`) under $TRAINSPOTTER_ARTIFACTS.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    from trainspotter.backends.hf import HFBackend
    from studies.keyed_contexts import PLANS, render_contexts, shares, simulate
    from trainspotter.evaluation.keyed_suite import keyed_bed
    from trainspotter.testbeds.build import PRESETS, build_testbed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testbed", default="tiny-pretrain-keyed")
    parser.add_argument("--trials", type=int, nargs="+", default=list(range(100, 106)))
    parser.add_argument("--max-contexts", type=int, default=16)
    parser.add_argument("--many", type=int, default=700, help="units measured in more than their first context")
    parser.add_argument("--units", type=int, default=1300)
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--budget", type=int, default=20000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "keyed")
    args = parser.parse_args()
    start, folder = time.time(), build_testbed(PRESETS[args.testbed])
    bed = keyed_bed(folder)
    target, reference = HFBackend(folder / "target", device="cpu"), HFBackend(folder / "reference", device="cpu")
    measured = {t: shares(bed, target, reference, t, args.max_contexts, args.many, args.units) for t in args.trials}
    rng, plans = np.random.default_rng(0), []
    for contexts, samples in PLANS:
        runs = [simulate(bed, units if contexts == 1 else units[:args.many], contexts, samples, args.budget, 0.05, rng)
                for units in measured.values() for _ in range(args.draws)]
        plans.append({"contexts": contexts, "samples": samples, "tpr": float(np.mean([r["rejected"] for r in runs])),
                      "flat_tpr": float(np.mean([r["flat"] for r in runs])),
                      "units": float(np.mean([r["units"] for r in runs])),
                      "capped": contexts > 1 and max(r["units"] for r in runs) >= args.many,
                      "median_spent": float(np.median([r["spent"] for r in runs]))})
        print(plans[-1], flush=True)
    report = {"testbed": args.testbed, "trials": args.trials, "draws": args.draws, "budget": args.budget,
              "alpha": 0.05, "many": args.many, "plans": plans, "date": time.strftime("%Y-%m-%d"),
              "seconds": time.time() - start}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "contexts.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "contexts.md").write_text(render_contexts(report))


if __name__ == "__main__":
    main()
