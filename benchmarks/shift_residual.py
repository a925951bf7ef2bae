"""What matching leaves of a shift in the model's own evidence (issue 36): on the shift suite's null
pools (no model saw either set), the mean per-pair difference of the reference-relative loss
(`gray_ref_diff`) before and after matching, its spread, and the pairs a test of that mean would
need to reach z = 3 on it alone (studies.shift_residual).

    TRAINSPOTTER_ARTIFACTS=/work/main/artifacts .venv/bin/python benchmarks/shift_residual.py \\
        --table artifacts/shift-table.pkl --out benchmarks/results/shift-matched/residual.md

(``--table``: the pickle of bench_shift_matched.py: pools, IID splits and gray features.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from studies.shift_residual import members_gap, render, residuals

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", required=True)
    ap.add_argument("--out", default="benchmarks/results/shift-matched/residual.md")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--n-max", type=int, default=400)
    args = ap.parse_args()
    pools, iid, frame = pd.read_pickle(args.table)
    text = render(residuals(pools, frame, args.trials, args.n_max), members_gap(iid, frame), args.trials, args.n_max)
    Path(args.out).write_text(text)
    print(text)
