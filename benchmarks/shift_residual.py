"""What matching leaves of a shift in the model's own evidence (issue 36): on the shift suite's null
pools (no model saw either set), the mean per-pair difference of the reference-relative loss
(`gray_ref_diff`, target minus reference; negative is member-like) before and after matching, its
spread, and the pairs a test of that mean would need to reach z = 3 on it alone, (3 σ / δ)².

The reference cancels what makes a text hard for any model trained like it, not what the target
learned more of. One reading of the numbers: the members are 13% of the target's training tokens
and its reference never saw them, so kinds of text that gain most from more training (Wikipedia
leads, the members' own source, more than Python docs; biographies more than science articles)
look "member-like" to the target without being members. Matching balances what a text-only model sees; this measures how much of the model-visible shift
remains.

    TRAINSPOTTER_ARTIFACTS=/work/main/artifacts .venv/bin/python benchmarks/shift_residual.py \\
        --table artifacts/shift-table.pkl --out benchmarks/results/shift-matched/residual.md

(``--table``: the pickle of bench_shift_matched.py: pools, IID splits and gray features.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from trainspotter.auditing.matching import Encoded, match_pairs
from trainspotter.evaluation.shift import trial_draws

COLUMN = "gray_ref_diff"


def residuals(pools: dict, frame: pd.DataFrame, trials: int, n_max: int, seed: int = 0) -> list[dict]:
    """Per null pool pair (side A as suspect): the mean difference of ``COLUMN`` over all passages,
    and over the matched pairs of ``trials`` draws of up to ``n_max`` a side (their spread, pairs
    per draw)."""
    out = []
    for kind, (la, a, lb, b) in pools.items():
        ta, tb = [p["text"] for p in a], [p["text"] for p in b]
        fa = frame.loc[[p["id"] for p in a], COLUMN].to_numpy()
        fb = frame.loc[[p["id"] for p in b], COLUMN].to_numpy()
        encoded = Encoded(ta + tb)
        ix, iy = trial_draws(len(a), len(b), min(len(a), len(b), n_max), trials, seed)
        d = []
        for t in range(trials):
            m = match_pairs([ta[i] for i in ix[t]], [tb[j] for j in iy[t]], seed=t,
                            encoded=encoded.rows(np.r_[ix[t], len(ta) + iy[t]]))
            d += [fa[ix[t][i]] - fb[iy[t][j]] for i, j in m.pairs]
        d = np.array(d)
        out.append({"kind": kind, "suspect": la, "heldout": lb, "before": float(fa.mean() - fb.mean()),
                    "after": float(d.mean()), "sd": float(d.std()), "pairs": len(d) / trials,
                    "z3_pairs": float(9 * d.var() / d.mean() ** 2)})
    return out


def render(rows: list[dict], members: float | None, trials: int, n_max: int) -> str:
    lines = ["# What matching leaves of a shift in the reference-relative loss", "",
             f"`{COLUMN}` (target minus reference loss per token; negative is member-like), suspect side minus "
             f"held-out side, on the shift suite's null pools of `tiny-pretrain` (no model saw either set): over "
             f"all passages (*before*) and over the matched pairs of {trials} draws of up to {n_max} a side "
             "(*after*: optimal caliper matching, as `--shift-check match`). *z = 3 at*: (3 σ / δ)², the pairs "
             "a test of the mean would need to reach z = 3 on the residual alone."
             + (f" For scale: members vs the IID held-out split differ by {members:+.4f}." if members is not None else ""),
             "", "| shift | suspect | held-out | before | after | σ per pair | matched pairs | z = 3 at |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['suspect']} | {r['heldout']} | {r['before']:+.4f} | {r['after']:+.4f} "
                     f"| {r['sd']:.3f} | {r['pairs']:.0f} | {r['z3_pairs']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", required=True)
    ap.add_argument("--out", default="benchmarks/results/shift-matched/residual.md")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--n-max", type=int, default=400)
    args = ap.parse_args()
    pools, iid, frame = pd.read_pickle(args.table)
    ids = lambda ps: [p["id"] for p in ps]  # noqa: E731
    members = float(frame.loc[ids(iid["member"]), COLUMN].mean() - frame.loc[ids(iid["heldout"]), COLUMN].mean())
    text = render(residuals(pools, frame, args.trials, args.n_max), members, args.trials, args.n_max)
    Path(args.out).write_text(text)
    print(text)
