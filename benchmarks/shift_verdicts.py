"""Re-derive the shift suite's verdicts from its saved stop times with the current rules.

    python benchmarks/shift_verdicts.py benchmarks/results [--note "..."]

``trainspotter benchmark --suite shift`` saves every trial's first-crossing time of every
test and of the blind check (shift-stops.npz); the verdicts ("trained on" before and now)
are functions of those and of the audit size (trainspotter.evaluation.shift.verdicts), so a
change of the rules needs no new Monte Carlo. Rewrites shift.md, shift.json, shift.png."""
import json
import sys
from pathlib import Path

import numpy as np

from trainspotter.evaluation.plots import shift_plot
from trainspotter.evaluation.shift import render_markdown, summarise

out = Path(sys.argv[1])
summary = json.loads((out / "shift.json").read_text())
if "--note" in sys.argv:
    summary["header"] = summary["header"].split(" · note: ")[0] + " · note: " + sys.argv[sys.argv.index("--note") + 1]
stops = np.load(out / "shift-stops.npz")
def res(key, pairs, trials):
    model = {k.split("|")[-1]: stops[k] for k in stops.files if k.startswith(key + "|") and not k.endswith("|blind")}
    return {"pairs": pairs, "trials": trials, "model": model, "blind_stop": stops[key + "|blind"]}
alpha = 0.05
for s in summary["scenarios"]:
    key = f"{s['kind']}|{s['suspect']}|{s['size']}"
    s.update(summarise(res(key, s["pairs"], s["trials"]), alpha, h0=True))
for r in summary["iid"]:
    key = f"iid|{r['suspect']}|{r['size']}"
    r.update(summarise(res(key, r["pairs"], r["trials"]), alpha, h0=r["h0"]))
(out / "shift.md").write_text(render_markdown(summary, alpha))
(out / "shift.json").write_text(json.dumps(summary, indent=1))
shift_plot(summary["scenarios"], alpha, out / "shift.png")
