"""Re-derive the shift suite's verdicts from its saved stop times with the current rules
(studies.shift_stops): rewrites shift.md, shift.json and shift.png from
shift.json and shift-stops.npz; the matched audit's section of shift.md comes back with
``bench_shift_matched.py --shift-md``.

    python benchmarks/shift_verdicts.py benchmarks/results [--note "..."]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from trainspotter.evaluation.plots import shift_plot
from trainspotter.evaluation.shift_suite import render_markdown
from studies.shift_stops import rederive

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="the folder of shift.json and shift-stops.npz")
    ap.add_argument("--note", help="replaces the header's note")
    args = ap.parse_args()
    summary = rederive(json.loads((args.out / "shift.json").read_text()), np.load(args.out / "shift-stops.npz"),
                       0.05, args.note)
    (args.out / "shift.md").write_text(render_markdown(summary, 0.05))
    (args.out / "shift.json").write_text(json.dumps(summary, indent=1))
    shift_plot(summary["scenarios"], 0.05, args.out / "shift.png")
