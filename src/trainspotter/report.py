"""Plots of an audit: the wealth trajectory W_t on a log scale with the 1/α line."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def wealth_plot(wealth: np.ndarray, alpha: float, path: Path, title: str = "",
                stop_time: int | None = None, run_start: int = 0) -> Path:
    """W_0 = 1, W_1..W_n on a log axis; reject H0 once W_t ≥ 1/α (Ville's inequality).
    ``run_start`` > 0 marks where a continued audit's latest run took over."""
    w = np.concatenate([[1.0], np.asarray(wealth, dtype=float)])
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=120)
    ax.plot(np.arange(len(w)), w, color="tab:blue", lw=1.6, label="wealth $W_t$")
    ax.axhline(1 / alpha, color="tab:red", ls="--", lw=1, label=f"1/α = {1 / alpha:g}")
    ax.axhline(1, color="grey", lw=0.6)
    if run_start > 0:
        ax.axvline(run_start, color="grey", ls="-.", lw=1, label=f"this run from t = {run_start + 1}")
    if stop_time is not None:
        ax.axvline(stop_time, color="tab:green", ls=":", lw=1, label=f"stop at t = {stop_time}")
    ax.set_yscale("log")
    ax.set_xlabel("pairs t")
    ax.set_ylabel("wealth (e-value)")
    ax.set_title(title or "Testing by betting")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
