"""What matching leaves of a shift in the model's own evidence (issue 36; ``benchmarks/shift_residual.py``):
on the shift suite's null pools (no model saw either set), the mean per-pair difference of the
reference-relative loss (``gray_ref_diff``, target minus reference; negative is member-like) before
and after matching (``auditing.matching.match_pairs``), its spread σ, and the pairs a test of
that mean would need to reach z = 3 on it alone, (3 σ / δ)² (a one-sample z-test: z = δ √n / σ).

The reference cancels what makes a text hard for any model trained like it, not what the target
learned more of: kinds of text that gain most from more training look "member-like" to the target
without being members. Matching balances what a text-only model sees; this measures how much of
the model-visible shift remains."""

from __future__ import annotations

import numpy as np
import pandas as pd

from trainspotter.auditing.matching import Encoded, match_pairs
from trainspotter.evaluation.shift_suite import trial_draws

__all__ = ["COLUMN", "residuals", "members_gap", "render"]

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


def members_gap(iid: dict, frame: pd.DataFrame) -> float:
    """For scale: members minus the IID held-out split in ``COLUMN``, over all passages."""
    ids = lambda ps: [p["id"] for p in ps]  # noqa: E731
    return float(frame.loc[ids(iid["member"]), COLUMN].mean() - frame.loc[ids(iid["heldout"]), COLUMN].mean())


def render(rows: list[dict], members: float | None, trials: int, n_max: int) -> str:
    """residual.md: one row per null pool pair (``residuals``); ``members``: ``members_gap``."""
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
