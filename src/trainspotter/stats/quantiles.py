"""Bounded-memory quantiles: the P² algorithm (Jain & Chlamtac 1985), for the online
scorer's trimming bounds (BADI App. A.7 on a stream of any length)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["P2Quantile"]


class P2Quantile:
    """P² estimate of the τ-quantile of many streams (Jain & Chlamtac 1985).

    Five markers per stream (min, τ/2, τ, (1+τ)/2, max) move with each new
    value by piecewise-parabolic interpolation: O(1) time and memory per value,
    however long the stream. Every stream (any array shape) gets one value per
    ``add``. Until 5 values are in, the markers hold them sorted and ``value``
    is the exact 'lower' order statistic (numpy's method="lower").
    Markers are the leading axis so each one is a contiguous array.
    """

    def __init__(self, tau: float, shape: tuple):
        if not 0.0 < tau < 1.0:
            raise ValueError(f"tau must lie in (0, 1); got {tau}")
        self.tau, self.n = float(tau), 0
        shape = tuple(shape)
        self.q = np.zeros((5,) + shape)  # marker heights
        self.pos = np.broadcast_to(np.arange(1.0, 6.0).reshape((5,) + (1,) * len(shape)), self.q.shape).copy()
        self._f = np.array([0.0, tau / 2, tau, (1 + tau) / 2, 1.0])  # desired position = 1 + (n−1)·f

    def add(self, x: np.ndarray) -> None:
        x = np.asarray(x, dtype=float)
        q, pos = self.q, self.pos
        if self.n < 5:  # warm-up: keep the first values sorted
            q[self.n] = x
            self.n += 1
            q[: self.n] = np.sort(q[: self.n], axis=0)
            return
        # markers at or above the cell q_k ≤ x < q_{k+1} move up one position: with the heights
        # sorted, markers 1..3 exactly where x is not ≥ them, marker 4 always
        pos[1:4] += ~(x >= q[1:4])
        pos[4] += 1
        np.minimum(q[:1], x, out=q[:1])  # (slices: in place for streams of any shape, () too)
        np.maximum(q[4:], x, out=q[4:])
        self.n += 1
        desired = 1.0 + (self.n - 1) * self._f
        qf, pf = q.reshape(5, -1), pos.reshape(5, -1)  # views: flat streams
        for i in (1, 2, 3):
            d = desired[i] - pf[i]
            gu, gd = pf[i + 1] - pf[i], pf[i - 1] - pf[i]  # gu ≥ 1, gd ≤ −1
            j = np.flatnonzero(((d >= 1) & (gu > 1)) | ((d <= -1) & (gd < -1)))  # markers that move
            if j.size == 0:
                continue
            s, gu, gd = np.sign(d[j]), gu[j], gd[j]
            qi, qu, ql = qf[i, j], qf[i + 1, j], qf[i - 1, j]
            par = qi + s / (gu - gd) * ((s - gd) * (qu - qi) / gu + (gu - s) * (qi - ql) / -gd)
            up = s > 0
            lin = qi + s * np.where(up, qu - qi, ql - qi) / np.where(up, gu, gd)
            qf[i, j] = np.where((ql < par) & (par < qu), par, lin)
            pf[i, j] += s

    @property
    def value(self) -> np.ndarray:
        if self.n == 0:
            return np.full(self.q.shape[1:], np.nan)
        if self.n < 5:
            return self.q[int(math.floor(self.tau * (self.n - 1)))].copy()
        return self.q[2].copy()

    def to_dict(self) -> dict:
        return {"tau": self.tau, "n": self.n, "q": self.q.tolist(), "pos": self.pos.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "P2Quantile":
        q = np.asarray(d["q"], dtype=float)
        obj = cls(d["tau"], q.shape[1:])
        obj.n, obj.q, obj.pos = int(d["n"]), q, np.asarray(d["pos"], dtype=float)
        return obj
