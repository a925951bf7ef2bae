"""Why the keyed suite's budgets do or do not suffice (issue 53: "where measured power falls short,
why, measured"): on each keyed testbed's target, over the suite's first trials (its own prompts and
neutral passages, seed 0), the key's per-unit effect δ = mean(x − p) under the public key, beside
the same under fresh keys, and the units a fixed-n test would need (``evaluation.keyed_suite_report.unit_effect``,
``render_effect``; ``--render`` rewrites effect.md from effect.json); for the forced choice, also
what its draws would give if each form were one token ("choice, whole forms", simulated from the
whole forms' shares) and how many units have one-token forms under the testbed's tokenizer and
under SmolLM2's.

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
    from trainspotter.evaluation.keyed_suite_report import effect_runs, render_effect, unit_effect
    from trainspotter.evaluation.keyed_suite import KeyedSuiteConfig
    from trainspotter.testbeds.build import PRESETS, build_testbed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testbeds", nargs="+", default=["tiny-pretrain-keyed", "tiny-pretrain-keyed-3pct"])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "keyed")
    parser.add_argument("--accesses", nargs="+", default=["black", "choice", "choice, whole forms", "gray"],
                        help="rows to measure; rows not measured are kept from the existing effect.json")
    parser.add_argument("--render", action="store_true", help="only rewrite effect.md from effect.json")
    args = parser.parse_args()
    if args.render:
        (args.out / "effect.md").write_text(render_effect(json.loads((args.out / "effect.json").read_text())))
        return
    path = args.out / "effect.json"
    report = json.loads(path.read_text()) if path.exists() else {"results": {}}
    runs, start = effect_runs(report) if report["results"] else [], time.time()
    for name in args.testbeds:
        folder = build_testbed(PRESETS[name])
        rows = unit_effect(KeyedSuiteConfig(testbed=name), folder, args.trials, accesses=tuple(args.accesses))
        report["results"][name] = report["results"].get(name, {}) | rows
        if "choice" in args.accesses:
            report.setdefault("single_token", {})[name] = single_token_units(folder, name)
        print(name, json.dumps(rows), flush=True)
    cfg = KeyedSuiteConfig()
    report["runs"] = runs + [{"date": time.strftime("%Y-%m-%d"), "seconds": time.time() - start,
                              "trials": args.trials, "accesses": args.accesses, "contexts": cfg.contexts,
                              "samples": cfg.samples}]
    for key in ("date", "seconds", "trials"):  # (a report of one run kept them at the top)
        report.pop(key, None)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "effect.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "effect.md").write_text(render_effect(report))


def single_token_units(folder: Path, name: str) -> dict:
    """How many of the forced choice's units (its first trial's plan) have every form one token,
    under the testbed's tokenizer and under SmolLM2's (a real model's)."""
    from transformers import AutoTokenizer

    from trainspotter.assets import smollm2_gguf
    from trainspotter.evaluation.keyed_suite_report import choice_passages
    from trainspotter.evaluation.keyed_suite import KeyedSuiteConfig, keyed_bed
    from trainspotter.keyed.queries import choice_plan
    from trainspotter.keyed.units import Seen

    bed, gguf = keyed_bed(folder), smollm2_gguf()
    passages = choice_passages(bed, KeyedSuiteConfig(testbed=name), 0)
    out = {}
    for label, tok in (("the testbed's", AutoTokenizer.from_pretrained(folder / "target")),
                       ("SmolLM2's", AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name))):
        single = [all(len(s) == 1 for s in where[0][2]) for _, where, _ in choice_plan(bed.scoring.forms, tok,
                                                                                         passages, Seen(), 1)]
        out[label] = {"vocab": len(tok), "units": len(single), "all": sum(single), "first_400": sum(single[:400])}
    return out


if __name__ == "__main__":
    main()
