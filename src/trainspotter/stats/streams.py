"""Batches of independent streams, the shape convention of the betting code.

Payoffs, strategies and the e-process work on a leading batch axis of B independent
streams so the Monte Carlo evaluation can run many trials at once; ``batch=None`` (the
default) is the ordinary single-stream use, where inputs and outputs are scalars / one
row.
"""

from __future__ import annotations

import numpy as np


def stream_rows(x, batch: int | None, dim: int) -> np.ndarray:
    """Bring one observation (or a batch of them) to shape (B, dim)."""
    a = np.asarray(x, dtype=float)
    B = 1 if batch is None else batch
    return a.reshape(B, dim)


def per_stream(a: np.ndarray, batch: int | None):
    """Scalar for single-stream use, the (B,) array otherwise."""
    return float(a[0]) if batch is None else a.copy()
