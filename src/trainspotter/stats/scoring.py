"""Online scoring models: aggregate membership features into one score.

BADI paper Sec. 3 ("Scoring Model for Feature Aggregation"), App. A.4 and A.7.
Labels: suspect = 1, held-out = 0, so a higher score (a logit) means "more
member-like". (The paper labels the other way round; only the sign changes.)

Two scorers, chosen by ``TestConfig.scorer``:

* ``"paper"`` — :class:`AdamScorer`, the paper's protocol (A.4): a linear layer
  trained with binary cross-entropy and Adam (lr 0.01, 30 full-batch epochs over
  ALL past pairs per round, warm-started). Each round costs O(n·p·epochs).
* ``"online"`` — :class:`NewtonScorer`, the same logistic layer fitted from
  running sufficient statistics: one Newton (IRLS) step from θ = 0 on the
  ridge-penalised BCE of all past rows. Each round costs O(p³), independent of n,
  and its state does not grow with n.

Predictability (DESIGN.md): pair t is scored by weights *and* normalisation
statistics fitted on pairs 1..t−1 only; ``update`` absorbs pair t afterwards.

Pre-processing (A.7, Eq. 6–9), applied per feature with statistics of the
past rows (both sides of all past pairs, so it is symmetric in X and Y):
z = (x − μ) / σ with the population σ (Eq. 7); values strictly beyond the
past 2.5% / 97.5% quantiles are replaced by the past mean (0 after
normalisation). The paper scorer reads exact order-statistic quantiles; the
online scorer keeps P² estimates of them (bounded memory).

Orientation (beyond the paper; ``signs``, see trainspotter.features.orientation): with
s ∈ {−1, 0, +1}^p the layer's weights are constrained to s_j w_j ≥ 0, so the score can
only grow in the member-like direction of every feature whose direction is known (s_j = 0:
learned freely). The fit is then the minimiser under these constraints (``oriented_qp``),
and values beyond the trimming bounds are clipped to them rather than replaced by the mean
(a monotone map, which the one-sided argument in trainspotter.stats.sequential needs).

Everything is vectorised with numpy over a leading batch axis of B independent
streams (Monte Carlo trials).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

__all__ = ["AdamScorer", "NewtonScorer", "OnlineScorer", "P2Quantile", "SCORERS",
           "make_scorer", "oriented_qp", "scorer_from_dict"]

SCORERS = ("online", "paper")

_BETA1, _BETA2, _ADAM_EPS = 0.9, 0.999, 1e-8


def _signs(signs, p: int) -> np.ndarray | None:
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


class AdamScorer:
    """The paper's scorer ("paper"): logistic layer refitted on all past pairs (App. A.4).

    ``score(x)`` → logit θ·[z(x), 1] of rows x with the current (past-only)
    fit; ``update(x, y)`` appends pair (x suspect, y held-out), updates the
    normalisation statistics and runs ``epochs`` full-batch Adam steps.
    """

    def __init__(self, n_features: int, lr: float = 0.01, epochs: int = 30, trim: float = 0.025,
                 seed: int = 0, batch: int | None = None, signs=None):
        if n_features < 1:
            raise ValueError("n_features must be ≥ 1")
        if not 0.0 <= trim < 0.5:
            raise ValueError(f"trim must lie in [0, 0.5); got {trim}")
        self.p, self.lr, self.epochs, self.trim = int(n_features), float(lr), int(epochs), float(trim)
        self.seed, self.batch = int(seed), batch
        self.signs = _signs(signs, self.p)  # projected Adam: s_j w_j ≥ 0 after every step
        B = 1 if batch is None else batch
        # A random linear layer initialised like torch.nn.Linear (U(±1/√p));
        # the first stake is 0, so no pretraining is needed (A.4). The bias is
        # the last entry of θ (rows get a constant 1 feature).
        rng = np.random.default_rng(self.seed)
        bound = 1.0 / math.sqrt(self.p)
        self.theta = self._project(rng.uniform(-bound, bound, size=(B, self.p + 1)))
        self.m, self.v = np.zeros((B, self.p + 1)), np.zeros((B, self.p + 1))  # Adam moments
        self.steps = 0
        self.n = 0  # rows seen (2 per pair)
        self._rows_t = np.zeros((B, self.p, 64))  # past rows, feature-major
        # Running mean and sum of squared deviations (Welford/Chan) of past rows.
        self.mu, self.m2 = np.zeros((B, self.p)), np.zeros((B, self.p))
        # Sorted tails of past rows per feature (padded with +inf): the L
        # smallest values and the L largest (negated), enough to read the
        # trimming quantiles without re-sorting all rows each round.
        self._tail = 0
        self._low = np.full((B, self.p, 0), np.inf)
        self._high = np.full((B, self.p, 0), np.inf)

    # -- pre-processing (A.7) -----------------------------------------------
    @property
    def sd(self) -> np.ndarray:
        """σ of past rows (Eq. 7, 1/n); 1 before any data or for constant features."""
        sd = np.sqrt(self.m2 / max(self.n, 1))
        return np.where(sd > 1e-12, sd, 1.0)

    def _k(self) -> int:
        """Order-statistic index of the lower trimming quantile (numpy 'lower')."""
        return int(math.floor(self.trim * (self.n - 1))) if self.n > 0 else -1

    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Past 2.5% ('lower') and 97.5% ('higher') quantiles per feature.

        With order statistics nothing is trimmed until a 2.5% tail holds a
        whole row; before any data nothing is trimmed at all.
        """
        k = self._k()
        if self.trim == 0 or k < 0:
            shape = self.mu.shape
            return np.full(shape, -np.inf), np.full(shape, np.inf)
        return self._low[:, :, k], -self._high[:, :, k]

    def _project(self, theta: np.ndarray) -> np.ndarray:
        """θ with the weights of oriented features moved onto s_j w_j ≥ 0 (bias untouched)."""
        if self.signs is None:
            return theta
        w = theta[..., :-1]
        return np.concatenate([np.where(self.signs * w < 0, 0.0, w), theta[..., -1:]], axis=-1)

    def _normalise(self, rows: np.ndarray) -> np.ndarray:
        """z-score with past μ, σ (Eq. 8–9); values beyond past quantiles → mean (0), or
        clipped to them when oriented."""
        lo, hi = self._bounds()
        if self.signs is not None:
            return (np.clip(rows, lo[:, None, :], hi[:, None, :]) - self.mu[:, None, :]) / self.sd[:, None, :]
        z = (rows - self.mu[:, None, :]) / self.sd[:, None, :]
        out = (rows < lo[:, None, :]) | (rows > hi[:, None, :])
        z[out] = 0.0
        return z

    def _absorb_stats(self, new: np.ndarray) -> None:
        """Add rows new (B, 2, p) to μ, M2 (Chan et al.) and to the sorted tails."""
        n_a, n_b = self.n, new.shape[1]
        mean_b = new.mean(axis=1)
        m2_b = ((new - mean_b[:, None, :]) ** 2).sum(axis=1)
        delta = mean_b - self.mu
        n = n_a + n_b
        self.mu = self.mu + delta * (n_b / n)
        self.m2 = self.m2 + m2_b + delta * delta * (n_a * n_b / n)
        self.n = n
        if self.trim == 0:
            return
        need = self._k() + 1
        if need > self._tail:  # rebuild tails from all rows, doubling their length
            self._tail = L = max(8, 2 * need)
            srt = np.sort(self._rows_t[:, :, : self.n], axis=2)
            pad = np.full(srt.shape[:2] + (max(0, L - self.n),), np.inf)
            self._low = np.concatenate([srt[:, :, :L], pad], axis=2)
            self._high = np.concatenate([-srt[:, :, ::-1][:, :, :L], pad], axis=2)
        else:
            nt = new.transpose(0, 2, 1)
            self._low = np.sort(np.concatenate([self._low, nt], axis=2), axis=2)[:, :, : self._tail]
            self._high = np.sort(np.concatenate([self._high, -nt], axis=2), axis=2)[:, :, : self._tail]

    # -- the model ------------------------------------------------------------
    def score(self, x):
        """Scores (logits) of rows x with the fit on pairs seen so far.

        Single stream: x of shape (p,) → float, or (m, p) → (m,).
        Batch: x of shape (B, p) → (B,), or (B, m, p) → (B, m).
        """
        a = np.asarray(x, dtype=float)
        B = 1 if self.batch is None else self.batch
        z = self._normalise(a.reshape(B, -1, self.p))
        s = np.einsum("bmp,bp->bm", z, self.theta[:, :-1]) + self.theta[:, -1:]
        if self.batch is None:
            return float(s[0, 0]) if a.ndim == 1 else s[0]
        return s[:, 0] if a.ndim == 2 else s

    def update(self, x, y) -> None:
        """Absorb pair (x suspect → label 1, y held-out → label 0) and refit."""
        B = 1 if self.batch is None else self.batch
        new = np.stack([np.asarray(x, dtype=float).reshape(B, self.p),
                        np.asarray(y, dtype=float).reshape(B, self.p)], axis=1)
        if self.n + 2 > self._rows_t.shape[2]:
            grown = np.zeros((B, self.p, 2 * self._rows_t.shape[2]))
            grown[:, :, : self.n] = self._rows_t[:, :, : self.n]
            self._rows_t = grown
        self._rows_t[:, :, self.n: self.n + 2] = new.transpose(0, 2, 1)
        self._absorb_stats(new)
        self._fit(self._design())

    def _design(self) -> np.ndarray:
        """Normalised past rows plus a bias row, feature-major: (B, p+1, n)."""
        B, n, p = self.theta.shape[0], self.n, self.p
        rows = self._rows_t[:, :, :n]
        zt = np.empty((B, p + 1, n))
        lo, hi = self._bounds()
        if self.signs is not None:
            rows = np.clip(rows, lo[:, :, None], hi[:, :, None])
        np.subtract(rows, self.mu[:, :, None], out=zt[:, :p])
        zt[:, :p] /= self.sd[:, :, None]
        if self.signs is None:
            zt[:, :p][(rows < lo[:, :, None]) | (rows > hi[:, :, None])] = 0.0
        zt[:, p] = 1.0
        return zt

    def _fit(self, zt: np.ndarray) -> None:
        """``epochs`` full-batch Adam steps on the mean BCE loss, warm-started."""
        B, _, n = zt.shape
        za = zt.transpose(0, 2, 1)  # (B, n, p+1) view; BLAS reads it transposed
        labels = np.tile([1.0, 0.0], n // 2)  # rows alternate suspect, held-out
        theta, m, v = self.theta, self.m, self.v
        if B == 1:  # plain 2-D BLAS matrix-vector products: least overhead per step
            za, zt, theta, m, v = za[0], zt[0], theta[0], m[0], v[0]
            logits = lambda th: za @ th  # noqa: E731
            grad = lambda r: (zt @ r) * (1.0 / n)  # noqa: E731
        else:
            logits = lambda th: np.matmul(za, th[:, :, None])[:, :, 0]  # noqa: E731
            grad = lambda r: np.matmul(zt, r[:, :, None])[:, :, 0] * (1.0 / n)  # noqa: E731
        for _ in range(self.epochs):
            self.steps += 1
            g = grad(expit(logits(theta)) - labels)  # dBCE/dθ, mean over rows
            m = _BETA1 * m + (1 - _BETA1) * g
            v = _BETA2 * v + (1 - _BETA2) * (g * g)
            step = self.lr / (1 - _BETA1 ** self.steps)
            theta = self._project(theta - step * m / (np.sqrt(v * (1.0 / (1 - _BETA2 ** self.steps))) + _ADAM_EPS))
        if B == 1:
            theta, m, v = theta[None], m[None], v[None]
        self.theta, self.m, self.v = theta, m, v

    @property
    def n_pairs(self) -> int:
        return self.n // 2

    # -- persistence ----------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON-able state; includes the past rows because refits need them."""
        return {"kind": "paper", "n_features": self.p, "lr": self.lr, "epochs": self.epochs, "trim": self.trim,
                "seed": self.seed, "batch": self.batch, "steps": self.steps, "n": self.n,
                "signs": None if self.signs is None else self.signs.tolist(),
                "theta": self.theta.tolist(), "m": self.m.tolist(), "v": self.v.tolist(),
                "mu": self.mu.tolist(), "m2": self.m2.tolist(),
                "rows": self._rows_t[:, :, : self.n].transpose(0, 2, 1).tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "AdamScorer":
        obj = cls(d["n_features"], d["lr"], d["epochs"], d["trim"], d["seed"], d["batch"], d.get("signs"))
        f = lambda k: np.asarray(d[k], dtype=float)  # noqa: E731
        obj.theta, obj.m, obj.v, obj.mu, obj.m2 = f("theta"), f("m"), f("v"), f("mu"), f("m2")
        obj.steps = int(d["steps"])
        B, n = obj.theta.shape[0], int(d["n"])
        rows = f("rows").reshape(B, n, obj.p)
        obj._rows_t = np.zeros((B, obj.p, max(64, 2 * n)))
        obj._rows_t[:, :, :n] = rows.transpose(0, 2, 1)
        obj.n = n
        if obj.trim > 0 and n > 0:  # tails are a pure function of the rows
            obj._tail = L = max(8, 2 * (obj._k() + 1))
            srt = np.sort(rows.transpose(0, 2, 1), axis=2)
            pad = np.full(srt.shape[:2] + (max(0, L - n),), np.inf)
            obj._low = np.concatenate([srt[:, :, :L], pad], axis=2)
            obj._high = np.concatenate([-srt[:, :, ::-1][:, :, :L], pad], axis=2)
        return obj


# Backward-compatible name of the paper scorer (code written before "online" existed).
OnlineScorer = AdamScorer


# ---------------------------------------------------------------------------
# Bounded-memory quantiles and the online (Newton) scorer
# ---------------------------------------------------------------------------


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
        self._ar = np.arange(5).reshape((5,) + (1,) * len(shape))

    def add(self, x: np.ndarray) -> None:
        x = np.asarray(x, dtype=float)
        q, pos = self.q, self.pos
        if self.n < 5:  # warm-up: keep the first values sorted
            q[self.n] = x
            self.n += 1
            q[: self.n] = np.sort(q[: self.n], axis=0)
            return
        k = (x >= q[1]).astype(int) + (x >= q[2]) + (x >= q[3])  # cell q_k ≤ x < q_{k+1}
        q[0], q[4] = np.minimum(q[0], x), np.maximum(q[4], x)
        pos += self._ar > k
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
        self.signs = _signs(signs, self.p)  # orientation constraints s_j w_j ≥ 0 (module docstring)
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


def make_scorer(kind: str, n_features: int, *, lr: float = 0.01, epochs: int = 30, ridge: float = 2.0,
                trim: float = 0.025, seed: int = 0, batch: int | None = None, signs=None):
    """Scorer by name: "online" (NewtonScorer) or "paper" (AdamScorer, A.4 as published);
    ``signs`` constrains the weights' directions (module docstring)."""
    if kind == "online":
        return NewtonScorer(n_features, ridge, trim, batch, signs)
    if kind == "paper":
        return AdamScorer(n_features, lr, epochs, trim, seed, batch, signs)
    raise ValueError(f"unknown scorer {kind!r}; choose one of {', '.join(SCORERS)}")


def scorer_from_dict(d: dict):
    """Rebuild a saved scorer; states saved before "kind" existed are the paper scorer."""
    return NewtonScorer.from_dict(d) if d.get("kind", "paper") == "online" else AdamScorer.from_dict(d)
