"""The benchmark's Markdown tables: per-sample methods with their cost, DI configurations,
and the best valid configuration."""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone

from trainspotter.evaluation.benchmark import BenchmarkConfig

__all__ = ["header_line", "render_markdown"]


def header_line(config: BenchmarkConfig, commit: str, device: str) -> str:
    """Date, hardware, git commit and configuration of a benchmark run, on one line."""
    cfg = config.model_dump(mode="json", exclude={"out"})
    return (f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} · {os.cpu_count()} CPU cores · "
            f"torch device {device} · git {commit[:12]} · config {json.dumps(cfg, separators=(',', ':'))}")


def _f(x, digits: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def _fp(r: dict, key: str) -> str:
    """An FPR with its binomial p, e.g. "0.042 (0.958)"; "—" where not measured."""
    return "—" if r.get(key) is None else f"{_f(r[key])} ({_f(r.get(key + '_binom_p'))})"


def _saving(r: dict) -> str:
    """Saving vs the paper's ons/mmd with its CI, or "—" where that configuration was not
    benchmarked (a subset of strategies or payoffs without it)."""
    if r.get("saving") is None:
        return "—"
    return f"{r['saving']:+.1%} [{r['saving_ci_low']:+.1%}, {r['saving_ci_high']:+.1%}]"


def _ci(m: dict, key: str) -> str:
    lo, hi = m.get(f"{key}_ci_low"), m.get(f"{key}_ci_high")
    return _f(m[key]) + ("" if lo is None else f" [{_f(lo)}, {_f(hi)}]")


def render_markdown(title: str, header: str, methods: list[dict], di: list[dict],
                    best: list[dict] | None = None) -> str:
    """The benchmark tables: per-sample methods (value [95% bootstrap CI]) with cost, and
    DI configurations with TPR, negative-control FPR and pairs to decision."""
    lines = [f"# {title}", "", header, ""]
    if methods:
        n1, n0 = methods[0]["metrics"]["n_members"], methods[0]["metrics"]["n_nonmembers"]
        lines += [f"## Per-sample membership inference ({n1} members vs {n0} non-members)", "",
                  "Value [95% stratified bootstrap CI]. TPR at FPR ≤ x: the best ROC operating point "
                  "with FPR ≤ x, no interpolation (with m non-members only multiples of 1/m exist). "
                  "Precision … MA at the threshold maximising MA = TPR − FPR on these scores "
                  "(in-sample, optimistic, as in TDDBench App. A.6). s/sample and peak MB: the "
                  "method's own minimal extraction + scoring on a subsample (module docstring of "
                  "trainspotter.evaluation.benchmark_cost).", "",
                  "| method | access | AUROC | TPR@1%FPR | TPR@0.1%FPR | TPR@10%FPR | precision | recall "
                  "| F1 | accuracy | FPR | FNR | MA | s/sample | peak MB |",
                  "|---" * 15 + "|"]
        for r in methods:
            m, c = r["metrics"], r.get("cost") or {}
            cells = [r["label"], r["access"], _ci(m, "auroc"), _ci(m, "tpr_at_1pct_fpr"),
                     _ci(m, "tpr_at_0.1pct_fpr"), _ci(m, "tpr_at_10pct_fpr")]
            cells += [_ci(m, k) for k in ("precision", "recall", "f1", "accuracy", "fpr", "fnr", "advantage")]
            cells += [_f(c.get("seconds_per_sample"), 4), _f(c.get("peak_rss_mb"), 1)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if di:
        lines += ["## Dataset inference (members vs held-out; FPR: non-members vs held-out, and pooled)", "",
                  "Monte Carlo over random orders of at most N_max pairs (BADI Sec. 5.1, App. D); every "
                  "configuration sees the same trial streams. Pairs to decision: mean over all member "
                  "trials with a non-rejection counted as N_max (censored), and mean ± std over rejecting "
                  "trials. Saving: 1 − pairs / pairs of the paper's ons/mmd on the same trials, "
                  "[95% paired bootstrap CI]. FPR, non-members vs held-out: every trial reorders the same "
                  "two sets, so with N_max near their size it is conditional on that one split. FPR, pooled: "
                  "non-members ∪ held-out split at random anew in every trial (the guarantee's FPR). "
                  "(p): one-sided binomial test of FPR ≤ α. The p-value rows use a fixed n = N_max per "
                  "trial (Maini et al., BADI App. A.8).", "",
                  "| access | test | α | TPR | FPR, non-members vs held-out (p) | FPR, pooled (p) | pairs to "
                  "decision (censored) | saving vs paper | rejecting: mean ± std | N_max | trials (controls) |",
                  "|---" * 11 + "|"]
        for r in di:
            stop = "—" if r.get("mean_stop") is None else f"{r['mean_stop']:.1f} ± {r['std_stop']:.1f}"
            lines.append(f"| {r['access']} | {r['test']} | {r['alpha']:g} | {_f(r['tpr'])} | {_fp(r, 'fpr')} "
                         f"| {_fp(r, 'fpr_pooled')} | {_f(r.get('mean_pairs'), 1)} | {_saving(r)} | {stop} "
                         f"| {r['pairs']} | {r['trials']} ({r.get('null_trials', r['trials'])}) |")
        lines.append("")
    for b in best or []:
        per = "; ".join(f"{r['access']}: {r['mean_pairs']:.1f} pairs, saving vs paper {_saving(r)}, "
                        f"FPR {r['fpr']:.4f} (binomial p {r['fpr_binom_p']:.3g})"
                        + ("" if r.get("fpr_pooled") is None else
                           f", pooled {r['fpr_pooled']:.4f} (binomial p {r['fpr_pooled_binom_p']:.3g})")
                        for r in b["rows"])
        lines += [f"**Best valid configuration at α = {b['alpha']:g}** (fewest censored pairs to decision "
                  f"averaged over accesses, no control's FPR significantly above α): `{b['test']}` — {per}.", ""]
    return "\n".join(lines)
