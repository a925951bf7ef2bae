"""How often a twins folder whose public versions a model chose frames a model that saw none of
them (issue 53: "a proof by design is only as good as the draw"), under the verdict rules before
the draw had to be shown random and now.

Testbed `mini` (the tests' seconds-scale recipe: the target is its reference fine-tuned on 80
member passages) and the 160 passages its target never saw (held-out and non-members). Per try:
fresh twins of those passages (k = 2, the keyed lexical rewriter with each passage's keys derived
for it alone, ``PerPassageKeys``, as an attacker who knows that the blind check reads a key's
dataset-wide word choices would make them; fresh keys), the public version of each chosen by

- ``target``: the target's preference (its mean token log-probability), as the earlier measurement;
- ``target over reference``: the target's preference minus its reference's (so that the placebo
  check, the reference in the target's place, sees nothing),

written as a folder of version 1 (committed to the draw itself, every sha256 matching: what a
data owner could publish before `twins release`), and audited as `audit --twins DIR` does (library
`audit`, the twins preset, seed 0, α = 0.05): gray without a reference, gray with the reference
(placebo check), and black. "Before" is the verdict the rules gave then (``decide`` without the
draw: the placebo check alone stood in the way); "now" is the verdict this code gives (the draw
of a version 1 folder is unproven: a rejection is inconclusive). Counts over tries with a 95%
Clopper-Pearson interval.

    python benchmarks/bench_framing.py --tries 20      # → benchmarks/results/framing.{json,md}
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from scipy.stats import binomtest

ROOT = Path(__file__).resolve().parents[1]
AUDITS = {"gray": {}, "gray + reference": {"reference": ["testbed:mini/reference"]}, "black": {"access": "black"}}


def _choices(score_target, score_reference):
    return {"target": score_target, "target over reference": lambda texts: score_target(texts) - score_reference(texts)}


def one_try(passages: list[dict], work: Path, n: int) -> list[dict]:
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.auditing.verdict import decide
    from studies.framing import choose, preference, write_legacy
    from trainspotter.testbeds.twins_variant import PerPassageKeys
    from trainspotter.loop.run import audit
    from trainspotter.rewriters.lexical import KeyedLexicalRewriter
    from trainspotter.twins.make import make_twins

    twins = make_twins(passages, 2, PerPassageKeys(KeyedLexicalRewriter()))
    rows = []
    choices = _choices(lambda t: preference("testbed:mini", t), lambda t: preference("testbed:mini/reference", t))
    for name, score in choices.items():
        folder = write_legacy(twins, choose(twins, score), work / f"try{n}-{name.replace(' ', '-')}")
        for label, settings in AUDITS.items():
            result = audit(AuditConfig(twins=str(folder), model="testbed:mini", **settings))
            before, _ = decide(result.model_reject, result.model_reject, result.blind, result.placebo, 0)
            rows.append({"try": n, "choice": name, "audit": label, "model_reject": result.model_reject,
                         "e_value": result.e_value, "pairs_used": result.pairs_used,
                         "placebo_fired": result.placebo.fired, "blind_fired": result.blind.fired,
                         "before": before, "now": result.verdict,
                         "guard": result.guard})
        shutil.rmtree(folder)
    return rows


def table(rows: list[dict], tries: int) -> str:
    def rate(k):
        lo, hi = binomtest(k, tries).proportion_ci(0.95, method="exact")
        return f"{k}/{tries} ({lo:.2f}–{hi:.2f})"

    lines = ["| public versions chosen by | audit | blind check fired | model test rejected | placebo fired | "
             "\"trained on\" before | \"trained on\" now |", "|---|---|---|---|---|---|---|"]
    for choice in ("target", "target over reference"):
        for label in AUDITS:
            sel = [r for r in rows if r["choice"] == choice and r["audit"] == label]
            lines.append(f"| {choice} | {label} | {rate(sum(r['blind_fired'] for r in sel))} | "
                         f"{rate(sum(r['model_reject'] for r in sel))} | "
                         f"{'—' if label != 'gray + reference' else rate(sum(r['placebo_fired'] for r in sel))} | "
                         f"{rate(sum(r['before'] == 'trained on' for r in sel))} | "
                         f"{rate(sum(r['now'] == 'trained on' for r in sel))} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    from trainspotter.testbeds.build import PRESETS, build_testbed

    bed = build_testbed(PRESETS["mini"])
    passages = [json.loads(line) for s in ("heldout", "nonmember")
                for line in (bed / f"{s}.jsonl").read_text().splitlines()]
    rows, start = [], time.process_time()
    with tempfile.TemporaryDirectory() as work:
        for n in range(args.tries):
            rows += one_try(passages, Path(work), n)
            print(f"try {n + 1}/{args.tries}: {time.process_time() - start:.0f} CPU s", flush=True)
    report = {"testbed": "mini", "passages": len(passages), "k": 2, "alpha": 0.05, "tries": args.tries, "rows": rows}
    (args.out / "framing.json").write_text(json.dumps(report, indent=1) + "\n")
    md = (f"# Framing with twins: public versions chosen by a model's preference\n\n"
          f"`python benchmarks/bench_framing.py --tries {args.tries}`: testbed `mini`, twins (k = 2, keyed lexical "
          f"rewriter, keys derived per passage, fresh keys per try) of the {len(passages)} passages its target never "
          f"saw, the public versions "
          f"chosen as the first column says and written as a version 1 folder (every sha256 and the commitment "
          f"matching); each audited as `audit --twins DIR` does (twins preset, seed 0, α = 0.05). \"Before\": the "
          f"verdict the rules gave before the draw had to be shown random (only the placebo check stood in the way); "
          f"\"now\": this code's (a version 1 folder's draw is unproven, so a rejection is inconclusive). Counts over "
          f"tries, 95% Clopper-Pearson intervals.\n\n{table(rows, args.tries)}\n")
    (args.out / "framing.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
