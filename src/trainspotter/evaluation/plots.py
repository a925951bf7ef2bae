"""Plots and a self-contained HTML page of a benchmark: its tables, ROC curves, sequential power
curves and the shift suite's verdicts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainspotter.record.report import plt, save_figure

__all__ = ["benchmark_html", "power_plot", "roc_plot", "shift_plot"]


BENCHMARK_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
 body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; color: #222; }
 table { border-collapse: collapse; margin: 1em 0; font-size: .85em; }
 td, th { padding: .2em .6em; border-bottom: 1px solid #ddd; text-align: left; }
 td { font-variant-numeric: tabular-nums; } small { color: #666; }
</style></head><body>
{{ body }}
{% for title, png in figures %}<h2>{{ title }}</h2><img alt="{{ title }}" src="data:image/png;base64,{{ png }}" style="max-width:100%">{% endfor %}
<p><small>trainspotter {{ version }}</small></p>
</body></html>
"""


def benchmark_html(markdown_text: str, figures: list[tuple[str, bytes]]) -> str:
    """A self-contained HTML page of a benchmark: its Markdown tables rendered, then the
    figures (ROC curves on log-log axes, sequential power curves) inlined as base64."""
    import base64

    import markdown
    from jinja2 import Environment
    from markupsafe import Markup

    from trainspotter import __version__

    title = markdown_text.splitlines()[0].lstrip("# ") if markdown_text else "benchmark"
    body = Markup(markdown.markdown(markdown_text, extensions=["tables"]))
    return Environment(autoescape=True).from_string(BENCHMARK_TEMPLATE).render(
        title=title, body=body, version=__version__,
        figures=[(t, base64.b64encode(p).decode("ascii")) for t, p in figures])


def power_plot(curves: dict[str, list[float]], path: Path, title: str = "") -> Path:
    """Sequential power curves Power(t) = P(T ≤ t) (BADI App. D.5), one per configuration."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=120)
    colours = plt.get_cmap("tab20" if len(curves) > 10 else "tab10").colors  # one colour per curve
    for i, (label, curve) in enumerate(curves.items()):
        ax.plot(np.arange(1, len(curve) + 1), curve, lw=1.4, label=label, color=colours[i % len(colours)])
    ax.set_xlabel("pairs t")
    ax.set_ylabel("P(rejected by t)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title or "Sequential power", fontsize=9)
    ax.legend(loc="best", fontsize=7)
    return save_figure(fig, path)


def roc_plot(curves: dict[str, tuple[list[float], list[float]]], path: Path, title: str = "",
             n_nonmembers: int | None = None, n_members: int | None = None) -> Path:
    """ROC curves of several methods on log-log axes (Carlini et al. 2022; EZ-MIA Sec. 4),
    where low-FPR behaviour is visible. Drawn as steps: at FPR x the curve shows the best TPR
    of an operating point with FPR ≤ x (``trainspotter.evaluation.metrics.tpr_at_fpr``, no
    interpolation). Zero rates cannot be drawn on a log axis: they are clipped to half the
    smallest non-zero rate, 0.5/m (m = non-members / members)."""
    fig, ax = plt.subplots(figsize=(5.2, 4.6), dpi=120)
    fx = 0.5 / n_nonmembers if n_nonmembers else 1e-3
    fy = 0.5 / n_members if n_members else 1e-3
    colours = plt.get_cmap("tab10").colors
    for i, (label, (fpr, tpr)) in enumerate(curves.items()):
        ax.step(np.maximum(fpr, fx), np.maximum(tpr, fy), where="post", lw=1.3, label=label,
                color=colours[i % 10], ls=("-", "--", ":")[i // 10 % 3])
    grid = np.logspace(np.log10(min(fx, fy)), 0, 50)
    ax.plot(grid, grid, color="grey", ls="--", lw=0.8, label="chance")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(fx, 1.02)
    ax.set_ylim(fy, 1.05)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(title or "ROC (log-log)")
    ax.legend(loc="lower right", fontsize=7)
    return save_figure(fig, path)


def shift_plot(scenarios: list[dict], alpha: float, path: Path) -> Path:
    """False "trained on" rates per held-out shift and audit size (trainspotter.evaluation.shift_suite)
    of the default audit (gray, with a reference): before issue 34 (the blind check alone
    guards) and now (the placebo check too), and now without a reference; the α line."""
    labels = list(dict.fromkeys(f"{s['kind']}: {s['suspect']} vs {s['heldout']}" for s in scenarios))
    series = [("default, before", "gray", "blind_only", "tab:red"), ("default, now", "gray", "guarded", "tab:green"),
              ("no reference, now", "gray_noref", "guarded", "tab:blue"), ("black, now", "black", "guarded", "tab:purple")]
    fig, axes = plt.subplots(1, len(series), figsize=(3.0 * len(series), 0.4 * len(labels) + 2.2), dpi=120,
                             sharey=True)
    sizes_seen = sorted({s["size"] for s in scenarios}, key=lambda n: n or 10**9)
    for ax, (name, test, kind, colour) in zip(np.atleast_1d(axes), series):
        grid = np.full((len(labels), len(sizes_seen)), np.nan)
        for s in scenarios:
            if test in s["tests"]:
                grid[labels.index(f"{s['kind']}: {s['suspect']} vs {s['heldout']}"),
                     sizes_seen.index(s["size"])] = s["tests"][test][kind]["rate"]
        ax.imshow(grid, cmap="Reds", vmin=0, vmax=1, aspect="auto")
        for (i, j), v in np.ndenumerate(grid):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6,
                        color="black" if v < 0.5 else "white", weight="bold" if v > alpha else "normal")
        ax.set_xticks(range(len(sizes_seen)), [str(n) if n else "all" for n in sizes_seen], fontsize=7)
        ax.set_xlabel("passages per side", fontsize=7)
        ax.set_title(name, fontsize=8, color=colour)
    np.atleast_1d(axes)[0].set_yticks(range(len(labels)), labels, fontsize=6)
    fig.suptitle(f'rate of "trained on" about text no model saw (bold: above α = {alpha:g})', fontsize=8)
    return save_figure(fig, path)
