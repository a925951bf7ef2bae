"""The online scorer ("online"): the A.4 logistic layer fitted from running statistics.

One Newton (IRLS) step from θ = 0 on the ridge-penalised BCE of all past rows: each round
costs O(p³), independent of the number of pairs n, and the state does not grow with n
(trainspotter.stats.scoring describes the pre-processing and the predictability both
scorers keep).
"""

from __future__ import annotations

import math

import numpy as np

from trainspotter.stats.oriented_qp import check_signs, oriented_qp
from trainspotter.stats.quantiles import P2Quantile

__all__ = ["NewtonScorer"]


class NewtonScorer:
    """The online scorer ("online"): the A.4 logistic layer fitted from running statistics.

    After pair t it holds the minimiser of the second-order expansion at θ = 0
    of the ridge-penalised BCE over all past rows (one Newton / IRLS step from
    θ = 0, where every row has weight p(1−p) = ¼), bias unpenalised, penalty
    ½ρ‖w‖² on the weights of the normalised features z = (x − μ)/σ (A.7):

        w = (¼ C_z + ρ I)⁻¹ · ½ Σ_{s≤t} (z(X_s) − z(Y_s)),   b = −w·z̄,

    C_z the centred scatter of the normalised past rows, z̄ their mean. For weak
    signals (where the MLE is near 0 and the test needs many pairs) this is the
    logistic MLE to first order, and it is the (ridge) Fisher-LDA direction —
    the Bayes-optimal linear score for Gaussian features with a shared
    covariance — on the logit scale. ρ = ``ridge``·d (d features) keeps it
    defined while n < d and shrinks the noisy early weights; as a Gaussian
    prior w ~ N(0, I/ρ) it expects a squared separation E‖w‖² = 1/ridge
    whatever d, because noise in ŵ grows with d and the signal does not.
    (Default ridge 2, chosen on synthetic weak-signal streams:
    benchmarks/results/online_scorer.md.)

    Since z is affine in the raw row r, the same score is computed in raw units
    with φ = w/σ:  score(x) = φ·(r(x) − r̄),  φ = (¼ C + ρ diag σ²)⁻¹ · ½ Σ (r(X_s) − r(Y_s)),
    C, r̄ the centred scatter and mean of the past (trimmed) raw rows. So the
    state is running sums (Chan et al.) and each round costs one p×p solve:
    O(p³) time and O(p²) memory, whatever the number of pairs.

    A.7 pre-processing, past-only: μ, σ are the running mean and population σ of
    all past rows (Eq. 6–7); the trimming bounds are P² estimates of the past
    2.5% / 97.5% quantiles, used once the exact 2.5% tail would hold a whole
    row (as in the paper scorer). A value beyond them is replaced by the past
    mean μ (z = 0), both when the row is scored and — with the same bounds —
    when it enters the statistics afterwards.
    """

    kind = "online"

    def __init__(self, n_features: int, ridge: float = 2.0, trim: float = 0.025, batch: int | None = None,
                 signs=None):
        if n_features < 1:
            raise ValueError("n_features must be ≥ 1")
        if not 0.0 <= trim < 0.5:
            raise ValueError(f"trim must lie in [0, 0.5); got {trim}")
        if not ridge > 0:
            raise ValueError(f"ridge must be > 0; got {ridge}")
        self.p, self.ridge, self.trim, self.batch = int(n_features), float(ridge), float(trim), batch
        self.signs = check_signs(signs, self.p)  # s_j w_j ≥ 0 (trainspotter.stats.oriented_qp)
        self.rho = self.ridge * self.p
        B = 1 if batch is None else batch
        self.active = np.zeros((B, self.p), dtype=bool)  # constrained weights held at 0 (warm start)
        self.n = 0  # rows seen (2 per pair)
        self.mu, self.m2 = np.zeros((B, self.p)), np.zeros((B, self.p))  # raw rows (Eq. 6–7)
        self.r_mean = np.zeros((B, self.p))             # r̄, mean of trimmed rows
        self.r_scatter = np.zeros((B, self.p, self.p))  # ¼ C = ¼ Σ (r − r̄)(r − r̄)ᵀ
        self.r_diff = np.zeros((B, self.p))             # ½ Σ_pairs (r(X_s) − r(Y_s))
        self.phi = np.zeros((B, self.p))                # θ = 0 before any data
        # Lower τ-quantile of x and of −x (minus the upper one), one P² per feature.
        self.tails = P2Quantile(self.trim, (2, B, self.p)) if self.trim > 0 else None
        self._refresh()

    # -- pre-processing (A.7) -----------------------------------------------
    def _refresh(self) -> None:
        """σ (Eq. 7, 1/n; 1 before data or for constant features) and trimming bounds of past rows."""
        sd = np.sqrt(self.m2 / max(self.n, 1))
        self.sd = np.where(sd > 1e-12, sd, 1.0)
        # Bounds apply once the exact 2.5% tail would hold a whole row, as in the paper scorer.
        self.trimming = self.tails is not None and math.floor(self.trim * (self.n - 1)) >= 1
        if self.trimming:
            v = self.tails.value
            self.lo, self.hi = v[0], -v[1]
        else:
            self.lo, self.hi = np.full(self.mu.shape, -np.inf), np.full(self.mu.shape, np.inf)

    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return self.lo, self.hi

    def _trim(self, rows: np.ndarray) -> np.ndarray:
        """Rows (B, m, p) with values beyond the past quantiles replaced by the past mean
        (clipped to the quantiles when oriented)."""
        if not self.trimming:
            return rows
        if self.signs is not None:
            return np.clip(rows, self.lo[:, None, :], self.hi[:, None, :])
        out = (rows < self.lo[:, None, :]) | (rows > self.hi[:, None, :])
        return np.where(out, self.mu[:, None, :], rows)

    # -- the model ------------------------------------------------------------
    @property
    def w(self) -> np.ndarray:
        """Weights of the normalised features z (the layer's w): σ·φ."""
        return self.phi * self.sd

    @property
    def theta(self) -> np.ndarray:
        """[w, b] as in :class:`AdamScorer` (weights of z, bias last): b = −w·z̄ = −φ·(r̄ − μ)."""
        b = -np.einsum("bp,bp->b", self.phi, self.r_mean - self.mu)
        return np.concatenate([self.w, b[:, None]], axis=1)

    def score(self, x):
        """Scores (logits) φ·(r(x) − r̄) = w·z(x) + b of rows x with the fit on pairs seen so far.

        Shapes as :meth:`AdamScorer.score`: (p,) → float, (m, p) → (m,);
        batch (B, p) → (B,), (B, m, p) → (B, m).
        """
        a = np.asarray(x, dtype=float)
        B = 1 if self.batch is None else self.batch
        r = self._trim(a.reshape(B, -1, self.p))
        s = np.einsum("bmp,bp->bm", r, self.phi) - np.einsum("bp,bp->b", self.r_mean, self.phi)[:, None]
        if self.batch is None:
            return float(s[0, 0]) if a.ndim == 1 else s[0]
        return s[:, 0] if a.ndim == 2 else s

    def update(self, x, y) -> None:
        """Absorb pair (x suspect, y held-out), then refit φ on pairs ≤ t."""
        B = 1 if self.batch is None else self.batch
        x = np.asarray(x, dtype=float).reshape(B, self.p)
        y = np.asarray(y, dtype=float).reshape(B, self.p)
        r = self._trim(np.stack([x, y], axis=1))  # bounds of rows < t, as when scored
        rx, ry = r[:, 0], r[:, 1]
        # Trimmed rows: r̄ and ¼C (Chan et al. with the two new rows as one group):
        # C += ½(rx − ry)(rx − ry)ᵀ + (2 n_a / n) δδᵀ, δ = (rx + ry)/2 − r̄.
        n_a, n = self.n, self.n + 2
        delta = 0.5 * (rx + ry) - self.r_mean
        f = np.stack([math.sqrt(1 / 8) * (rx - ry), math.sqrt(n_a / (2.0 * n)) * delta], axis=2)  # (B, p, 2)
        self.r_scatter += np.matmul(f, f.transpose(0, 2, 1))
        self.r_mean += delta * (2.0 / n)
        self.r_diff += 0.5 * (rx - ry)
        # Raw rows: μ, M2 (Eq. 6–7) and the quantile markers, after pair t was trimmed.
        d_raw = 0.5 * (x + y) - self.mu
        self.m2 += 0.5 * (x - y) ** 2 + d_raw * d_raw * (2.0 * n_a / n)
        self.mu += d_raw * (2.0 / n)
        self.n = n
        if self.tails is not None:
            self.tails.add(np.stack([x, -x]))
            self.tails.add(np.stack([y, -y]))
        self._refresh()
        self._fit()

    def _fit(self) -> None:
        """φ = (¼C + ρ diag σ²)⁻¹ ½ Σ (r_x − r_y), i.e. the ridge on w = σφ; when oriented,
        the minimiser of the same quadratic under s_j φ_j ≥ 0 (σ > 0, so w has φ's signs)."""
        A = self.r_scatter.copy()
        A.reshape(A.shape[0], -1)[:, :: self.p + 1] += self.rho * self.sd ** 2
        if self.signs is None:
            self.phi = np.linalg.solve(A, self.r_diff[:, :, None])[:, :, 0]
        else:
            self.phi, self.active = oriented_qp(A, self.r_diff, self.signs, self.active)

    @property
    def n_pairs(self) -> int:
        return self.n // 2

    # -- persistence ----------------------------------------------------------
    _ARRAYS = ("mu", "m2", "r_mean", "r_scatter", "r_diff", "phi")

    def to_dict(self) -> dict:
        """JSON-able state of size O(B·p²), whatever the number of pairs."""
        d = {"kind": self.kind, "n_features": self.p, "ridge": self.ridge, "trim": self.trim,
             "batch": self.batch, "n": self.n,
             "tails": None if self.tails is None else self.tails.to_dict(),
             "signs": None if self.signs is None else self.signs.tolist(), "active": self.active.tolist()}
        d.update({k: getattr(self, k).tolist() for k in self._ARRAYS})
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "NewtonScorer":
        obj = cls(d["n_features"], d["ridge"], d["trim"], d["batch"], d.get("signs"))
        obj.n = int(d["n"])
        if "active" in d:
            obj.active = np.asarray(d["active"], dtype=bool).reshape(obj.active.shape)
        for k in cls._ARRAYS:
            setattr(obj, k, np.asarray(d[k], dtype=float))
        obj.tails = None if d["tails"] is None else P2Quantile.from_dict(d["tails"])
        obj._refresh()
        return obj
