"""Why the keyed suite's budgets do or do not suffice (issue 53: "where measured power falls short,
why, measured"): on each keyed testbed's target, over the suite's first trials (its own prompts and
neutral passages, seed 0), the key's per-unit effect δ = mean(x − p) under the public key, beside
the same under fresh keys, and the units a fixed-n test would need (``evaluation.keyed_report.unit_effect``,
``render_effect``; ``--render`` rewrites effect.md from effect.json).

    python benchmarks/bench_keyed_effect.py --trials 10   # → benchmarks/results/keyed/effect.{json,md}

The testbeds must be built (`trainspotter testbed build NAME`) under $TRAINSPOTTER_ARTIFACTS.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    from trainspotter.evaluation.keyed_report import render_effect, unit_effect
    from trainspotter.evaluation.keyed_suite import KeyedSuiteConfig
    from trainspotter.evaluation.testbed import PRESETS, build_testbed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testbeds", nargs="+", default=["tiny-pretrain-keyed", "tiny-pretrain-keyed-3pct"])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "keyed")
    parser.add_argument("--render", action="store_true", help="only rewrite effect.md from effect.json")
    args = parser.parse_args()
    if args.render:
        (args.out / "effect.md").write_text(render_effect(json.loads((args.out / "effect.json").read_text())))
        return
    start, results = time.time(), {}
    for name in args.testbeds:
        folder = build_testbed(PRESETS[name])
        results[name] = unit_effect(KeyedSuiteConfig(testbed=name), folder, args.trials)
        print(name, json.dumps(results[name]), flush=True)
    report = {"trials": args.trials, "date": time.strftime("%Y-%m-%d"), "seconds": time.time() - start,
              "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "effect.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "effect.md").write_text(render_effect(report))


if __name__ == "__main__":
    main()
