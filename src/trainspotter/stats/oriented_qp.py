"""Orientation constraints s_j w_j ≥ 0 on the scorers' weights (beyond the paper; the
signs s ∈ {−1, 0, +1}^p come from trainspotter.features.orientation, and
trainspotter.stats.scoring says why): checking the signs, and ``oriented_qp``, the online
scorer's constrained fit. The paper scorer projects after every Adam step instead."""

from __future__ import annotations

import numpy as np

__all__ = ["check_signs", "oriented_qp"]


def check_signs(signs, p: int) -> np.ndarray | None:
    """``signs`` as a (p,) array of −1/0/+1, or None when there is nothing to constrain."""
    if signs is None:
        return None
    s = np.asarray(signs, dtype=float).reshape(-1)
    if s.shape != (p,) or not np.isin(s, (-1.0, 0.0, 1.0)).all():
        raise ValueError(f"signs must be {p} values in {{-1, 0, 1}}; got {signs!r}")
    return s if s.any() else None  # no known direction: nothing to constrain


def _masked_solve(A: np.ndarray, b: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Solve A_FF v_F = b_F with v = 0 off F, per stream (F = ``free``, (B, p))."""
    both = free[:, :, None] & free[:, None, :]
    M = np.where(both, A, 0.0) + np.eye(A.shape[1]) * (~free)[:, None, :]
    return np.linalg.solve(M, np.where(free, b, 0.0)[:, :, None])[:, :, 0]


def _primal_active_set(A: np.ndarray, b: np.ndarray, cons: np.ndarray) -> np.ndarray:
    """One stream of ``oriented_qp`` by the primal active-set method of Lawson & Hanson
    (1974, Ch. 23, NNLS), written for a quadratic: from the feasible point with every
    constrained coordinate at 0, free the coordinate whose gradient points most into the
    feasible side, solve, and step back to feasibility when a free coordinate would turn
    negative. The objective falls at every step, so it terminates."""
    p = len(b)
    free = ~cons.copy()
    solve = lambda f: _masked_solve(A[None], b[None], f[None])[0]  # noqa: E731
    v = solve(free)
    tol = 1e-12 * (1.0 + np.abs(b).max())
    for _ in range(10 * p + 10):
        w = b - A @ v  # minus the gradient
        cand = cons & ~free & (w > tol)
        if not cand.any():
            break
        free[np.argmax(np.where(cand, w, -np.inf))] = True
        while True:
            z = solve(free)
            bad = free & cons & (z <= 0)
            if not bad.any():
                v = z
                break
            step = np.min(v[bad] / (v[bad] - z[bad]))
            v = v + step * (z - v)
            free &= ~(cons & (v <= tol))
            v[~free] = 0.0
    return v


def oriented_qp(A: np.ndarray, b: np.ndarray, signs: np.ndarray,
                active: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """argmin_φ ½ φᵀAφ − bᵀφ subject to s_j φ_j ≥ 0 where s_j ≠ 0, for B streams
    (A (B, p, p) symmetric positive definite, b (B, p), s (p,)).

    Primal-dual active set (Hintermüller, Ito & Kunisch 2003): hold the active
    coordinates at 0, solve for the rest, then activate those that came out on the wrong
    side and release those whose multiplier (the gradient) is negative, until the set
    stops changing — a KKT point, hence the minimiser. Warm-started from ``active`` (the
    previous round's set) it usually takes one or two batched solves; a stream that has
    not settled after 2p + 2 rounds is finished by ``_primal_active_set``, which always
    terminates. Returns φ (exactly on the constraint where active) and the active set."""
    cons = signs != 0
    d = np.where(cons, signs, 1.0)
    A2, b2 = A * d[:, None] * d[None, :], b * d  # v = d·φ: constraints v_j ≥ 0
    B, p = b.shape
    act = np.zeros((B, p), dtype=bool) if active is None else active & cons
    tol = 1e-12 * (1.0 + np.abs(b2).max(axis=1, keepdims=True))
    settled = np.zeros(B, dtype=bool)
    for _ in range(2 * p + 2):
        v = _masked_solve(A2, b2, ~act)
        g = np.einsum("bij,bj->bi", A2, v) - b2  # the multipliers on the active set
        new = cons & ((act & (g >= -tol)) | (~act & (v < -tol)))
        settled = (new == act).all(axis=1)
        if settled.all():
            break
        act = np.where(settled[:, None], act, new)
    for i in np.flatnonzero(~settled):
        v[i] = _primal_active_set(A2[i], b2[i], cons)
        act[i] = cons & (v[i] <= 0)
    v = np.where(cons, np.maximum(v, 0.0), v)
    return v * d, act
