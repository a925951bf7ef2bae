"""e-BH: false discovery rate control over K hypotheses from their e-values (Wang &
Ramdas 2022, "False discovery rate control with e-values", JRSS-B 84(3), arXiv:2009.02824).

With e_(1) ≥ … ≥ e_(K), e-BH at level q rejects the k* hypotheses with the largest
e-values, k* = max{k : e_(k) ≥ K / (q k)} (0 if no k qualifies). Its FDR is at most
q K_0 / K ≤ q (K_0 true nulls) whatever the dependence between the e-values, so K audits
that share one held-out set may be combined with it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ebh"]


def ebh(e_values, q: float = 0.05) -> np.ndarray:
    """e-BH at FDR level q over K e-values: a boolean mask (input order) of the k* largest,
    k* = max{k : e_(k) ≥ K / (q k)}. Ties at the boundary are broken by input order."""
    e = np.asarray(e_values, dtype=float)
    if e.ndim != 1:
        raise ValueError("e_values must be one-dimensional")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie in (0, 1); got {q}")
    if np.any(e < 0) or np.any(np.isnan(e)):
        raise ValueError("e-values must be non-negative numbers")
    order = np.argsort(-e, kind="stable")
    ks = np.arange(1, len(e) + 1)
    ok = e[order] >= len(e) / (q * ks)
    mask = np.zeros(len(e), dtype=bool)
    mask[order[:ks[ok].max() if ok.any() else 0]] = True
    return mask
