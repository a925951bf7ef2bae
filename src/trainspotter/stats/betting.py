"""Two-sample testing by betting: payoffs, betting strategies and the e-process.

BADI paper, Sec. 4 and App. C. One round t sees a pair Z_t = (X_t, Y_t)
(suspect, held-out). A *payoff* (witness) fitted on rounds < t turns it into a
bounded score u_t ∈ [-1, 1] with E[u_t | F_{t-1}] = 0 under H0 (the witness is
antisymmetric in X_t, Y_t, which are exchangeable under H0). A *strategy* picks
the stake λ_t from rounds < t, and the wealth is W_t = W_{t-1}(1 + λ_t u_t)
(Eq. 2/10 with the linearised payoff S_t = 1 + λ_t u_t). Since |λ_t| < 1 and
|u_t| ≤ 1, W_t > 0 and it is a test martingale under H0, so by Ville's
inequality P(sup_t W_t ≥ 1/α) ≤ α (App. C.2).

Every class here works on a leading batch axis of B independent streams so the
Monte Carlo evaluation can run many trials at once; ``batch=None`` (the
default) is the ordinary single-stream use, where inputs and outputs are
scalars / one row.
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = [
    "poly2_feature_map",
    "MMDWitness",
    "KSWitness",
    "DiffPayoff",
    "make_payoff",
    "ONS",
    "Kelly",
    "Mixture",
    "make_strategy",
    "wealth_path",
    "EProcess",
    "PAYOFFS",
    "STRATEGIES",
]

PAYOFFS = ("mmd", "ks", "diff", "mmd-std")
STRATEGIES = ("ons", "kelly", "mixture")


def _rows(x, batch: int | None, dim: int) -> np.ndarray:
    """Bring one observation (or a batch of them) to shape (B, dim)."""
    a = np.asarray(x, dtype=float)
    B = 1 if batch is None else batch
    return a.reshape(B, dim)


def _out(a: np.ndarray, batch: int | None):
    """Scalar for single-stream use, the (B,) array otherwise."""
    return float(a[0]) if batch is None else a.copy()


# ---------------------------------------------------------------------------
# Payoffs (what we bet on)
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _triu(p: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(p, k=1)


def poly2_feature_map(x: np.ndarray, gamma: float | None = None, c: float = 1.0) -> np.ndarray:
    """Explicit feature map φ of the degree-2 polynomial kernel (App. C.3).

    K(x, y) = (γ xᵀy + c)² = ⟨φ(x), φ(y)⟩ with
    φ(x) = [c, √(2cγ)·x_i, γ·x_i², √2·γ·x_i x_j (i < j)], γ = 1/p by default.
    Works on the last axis, so any leading batch axes are kept.
    """
    x = np.asarray(x, dtype=float)
    p = x.shape[-1]
    gamma = 1.0 / p if gamma is None else gamma
    iu, ju = _triu(p)
    parts = [
        np.full(x.shape[:-1] + (1,), c),
        math.sqrt(2.0 * c * gamma) * x,
        gamma * x * x,
        math.sqrt(2.0) * gamma * x[..., iu] * x[..., ju],
    ]
    return np.concatenate(parts, axis=-1)


class MMDWitness:
    """Sequential kernel-MMD witness (App. C, "RKHS and the Witness"; C.3 kernel).

    g_t = ⟨w_t, φ(·)⟩ in the RKHS of K(x,y) = (γ xᵀy + c)², with ‖g‖_H = ‖w‖₂
    because w always lies in the span of feature-map differences. The edge is
    v_t = g_t(x̃_t) − g_t(ỹ_t) with g_1 = 0, and after round t the witness moves
    by projected averaging
        g_{t+1} = Π_{‖g‖_H ≤ 1}( g_t + (1/t)(K(x̃_t,·) − K(ỹ_t,·)) ).
    The payoff is u_t = tanh(v_t) (Sec. 5.1 "tanh squashing"): tanh is odd, so
    the antisymmetry that makes E[u_t | F_{t-1}] = 0 under H0 is kept.

    ``standardise=True`` (payoff "mmd-std", beyond the paper): the kernel sees
    x̃ = (x − μ_{t−1}) / σ_{t−1}, the z-score of App. A.7 Eq. 7 with the mean and
    population σ of *both* sides of all rounds < t (per coordinate; σ = 1 for a
    constant coordinate; g_1 = 0, so round 1 needs none). The witness step
    after round t uses μ_t, σ_t (rounds ≤ t), which g_{t+1} may. The poly-2
    kernel with γ = 1/p, c = 1 (C.3) presumes inputs on unit scale, as A.7
    makes the features; the scalar score of the online scorer is not
    normalised, and its scale decides the size of the edge: v_t is quadratic
    in the score scale, so small scores give u_t ≈ 0 (no growth) and large ones
    a saturated tanh whose sign is dominated by the x² term (see
    benchmarks/results/mmd_payoff.md). The map x ↦ x̃ is one function of the
    past applied to X_t and Y_t alike, so u_t stays antisymmetric in
    (X_t, Y_t), F_{t-1}-predictable and in [−1, 1]: validity is unchanged.
    ``standardise=False`` (payoff "mmd", the paper's) is the witness on raw inputs.
    Which is faster depends on the scorer: standardising rescues scores on the wrong
    scale (e.g. the paper's Adam scorer's large logits), but it also discards the scale
    that carries the scorer's confidence — early, uncertain scores are small, so the raw
    witness bets little on them. On the weak-signal testbed with the online scorer the
    raw witness decides ~20–26% sooner (benchmarks/results/tiny-pretrain/benchmark.md).
    """

    def __init__(self, dim: int = 1, batch: int | None = None, gamma: float | None = None, c: float = 1.0,
                 standardise: bool = False):
        self.dim, self.batch, self.c = int(dim), batch, float(c)
        self.gamma = 1.0 / self.dim if gamma is None else float(gamma)
        self.standardise = bool(standardise)
        B = 1 if batch is None else batch
        D = poly2_feature_map(np.zeros((1, self.dim)), self.gamma, self.c).shape[-1]
        self.w = np.zeros((B, D))
        self.t = 0  # rounds absorbed so far
        # Running mean and sum of squared deviations (Welford) of past inputs, both sides.
        self.n = 0
        self.mu, self.m2 = np.zeros((B, self.dim)), np.zeros((B, self.dim))

    @property
    def name(self) -> str:
        return "mmd-std" if self.standardise else "mmd"

    @property
    def sd(self) -> np.ndarray:
        """σ of past inputs (population, A.7 Eq. 7); 1 before data or when constant."""
        sd = np.sqrt(self.m2 / max(self.n, 1))
        return np.where(sd > 1e-12, sd, 1.0)

    def _standardised(self, x) -> np.ndarray:
        r = _rows(x, self.batch, self.dim)
        return (r - self.mu) / self.sd if self.standardise else r

    def _diff(self, x, y) -> np.ndarray:
        fx = poly2_feature_map(self._standardised(x), self.gamma, self.c)
        fy = poly2_feature_map(self._standardised(y), self.gamma, self.c)
        return fx - fy  # K(x̃,·) − K(ỹ,·) in feature coordinates

    def witness(self, x) -> np.ndarray:
        """g_t(x̃) for rows x of shape (..., dim) (single stream only)."""
        x = np.asarray(x, dtype=float)
        if self.standardise:
            x = (x - self.mu[0]) / self.sd[0]
        return poly2_feature_map(x, self.gamma, self.c) @ self.w[0]

    def edge(self, x, y):
        """v_t = g_t(x̃_t) − g_t(ỹ_t), using only rounds < t."""
        return _out(np.einsum("bd,bd->b", self.w, self._diff(x, y)), self.batch)

    def payoff(self, x, y):
        """u_t = tanh(v_t) ∈ [-1, 1]."""
        return np.tanh(self.edge(x, y))

    def update(self, x, y) -> None:
        """Absorb round t: μ, σ first, then the witness step on the inputs
        standardised with rounds ≤ t (g_{t+1} may use round t). So round 1
        steps with x̃_1 = −ỹ_1 = ±1 and the payoff only depends on the inputs
        up to a common affine map a·x + b (a > 0)."""
        for r in (_rows(x, self.batch, self.dim), _rows(y, self.batch, self.dim)):
            self.n += 1
            delta = r - self.mu
            self.mu = self.mu + delta / self.n
            self.m2 = self.m2 + delta * (r - self.mu)
        d = self._diff(x, y)
        self.t += 1
        w = self.w + d / self.t
        norm = np.linalg.norm(w, axis=1, keepdims=True)
        self.w = w / np.maximum(norm, 1.0)  # projection onto the unit ball

    def to_dict(self) -> dict:
        return {"name": self.name, "dim": self.dim, "batch": self.batch, "gamma": self.gamma,
                "c": self.c, "standardise": self.standardise, "t": self.t, "w": self.w.tolist(),
                "n": self.n, "mu": self.mu.tolist(), "m2": self.m2.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "MMDWitness":
        # States saved before standardisation existed hold the raw (paper) witness.
        obj = cls(d["dim"], d["batch"], d["gamma"], d["c"], d.get("standardise", False))
        obj.t, obj.w = d["t"], np.asarray(d["w"], dtype=float)
        if "n" in d:  # states saved before standardisation existed have none
            obj.n = int(d["n"])
            obj.mu, obj.m2 = np.asarray(d["mu"], dtype=float), np.asarray(d["m2"], dtype=float)
        return obj


def _insert_sorted(vals: np.ndarray, signs: np.ndarray, v: np.ndarray, sign: float):
    """Insert v[b] (with ``sign``) into each sorted row vals[b] (after equal values)."""
    B, m = vals.shape
    if m == 0:
        return v[:, None].copy(), np.full((B, 1), sign)
    pos = (vals <= v[:, None]).sum(axis=1)
    ar = np.arange(m + 1)[None, :]
    src = np.minimum(ar - (ar > pos[:, None]), m - 1)  # old index feeding each new slot
    at = ar == pos[:, None]
    new_vals = np.where(at, v[:, None], np.take_along_axis(vals, src, axis=1))
    new_signs = np.where(at, sign, np.take_along_axis(signs, src, axis=1))
    return new_vals, new_signs


class KSWitness:
    """One-sided Kolmogorov–Smirnov discrepancy payoff (App. C Eq. 11–13, D.3).

    With our label convention a suspect (member) scores *higher*, so the
    one-sided alternative is F_X ≤ F_Y and we bet on
    sup_c (F̂_Y(c) − F̂_X(c)), i.e. Eq. 13 with the roles oriented to our
    score sign. The threshold c_t is the empirical maximiser over the values
    seen in rounds < t (predictable), and the payoff is
        u_t = 1{X_t > c_t} − 1{Y_t > c_t} ∈ {−1, 0, 1}
    (g_c = indicator class of Eq. 12; already bounded, so no squashing).
    Feature vectors (dim > 1) are first projected on the predictable direction
    mean_{s<t}(X_s − Y_s).
    """

    name = "ks"

    def __init__(self, dim: int = 1, batch: int | None = None):
        self.dim, self.batch = int(dim), batch
        B = 1 if batch is None else batch
        self.xs = np.zeros((B, 0))  # past projected suspect values
        self.ys = np.zeros((B, 0))
        self.direction = np.zeros((B, self.dim))  # running sum of X_s − Y_s
        self._vals = self._signs = None  # see _sorted

    def _project(self, x) -> np.ndarray:
        r = _rows(x, self.batch, self.dim)
        if self.dim == 1:
            return r[:, 0]
        return np.einsum("bp,bp->b", r, self.direction)

    def _sorted(self) -> tuple[np.ndarray, np.ndarray]:
        """Past values sorted per stream, with sign −1 (suspect) / +1 (held-out): kept
        up to date by ``update`` (insertion, O(m) a round instead of a sort), rebuilt
        from xs, ys after a load."""
        if self._vals is None:
            B, m = self.xs.shape
            vals = np.concatenate([self.xs, self.ys], axis=1)
            sign = np.concatenate([-np.ones((B, m)), np.ones((B, m))], axis=1)
            order = np.argsort(vals, axis=1, kind="stable")
            self._vals = np.take_along_axis(vals, order, axis=1)
            self._signs = np.take_along_axis(sign, order, axis=1)
        return self._vals, self._signs

    def threshold(self) -> np.ndarray:
        """c_t = argmax_c (F̂_Y(c) − F̂_X(c)) over past values, shape (B,)."""
        vals, signs = self._sorted()
        B, m = vals.shape
        if m == 0:
            return np.full(B, np.inf)  # no data: u_1 = 0
        diff = np.cumsum(signs, axis=1)
        # Among tied values only the last position is a valid ECDF point (so the order
        # of equal values, and with it the insertion point among them, does not matter).
        last = np.ones_like(vals, dtype=bool)
        last[:, :-1] = vals[:, 1:] != vals[:, :-1]
        diff = np.where(last, diff, -np.inf)
        return vals[np.arange(B), np.argmax(diff, axis=1)]

    def edge(self, x, y):
        c = self.threshold()
        v = (self._project(x) > c).astype(float) - (self._project(y) > c).astype(float)
        return _out(v, self.batch)

    payoff = edge  # already in [-1, 1]

    def update(self, x, y) -> None:
        # Project with the direction of rounds < t before absorbing pair t.
        px, py = self._project(x), self._project(y)
        vals, signs = self._sorted()
        vals, signs = _insert_sorted(vals, signs, px, -1.0)
        self._vals, self._signs = _insert_sorted(vals, signs, py, 1.0)
        self.xs = np.concatenate([self.xs, px[:, None]], axis=1)
        self.ys = np.concatenate([self.ys, py[:, None]], axis=1)
        if self.dim > 1:
            self.direction = self.direction + _rows(x, self.batch, self.dim) - _rows(y, self.batch, self.dim)

    def to_dict(self) -> dict:
        return {"name": self.name, "dim": self.dim, "batch": self.batch, "xs": self.xs.tolist(),
                "ys": self.ys.tolist(), "direction": self.direction.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "KSWitness":
        obj = cls(d["dim"], d["batch"])
        B = 1 if obj.batch is None else obj.batch
        obj.xs = np.asarray(d["xs"], dtype=float).reshape(B, -1)
        obj.ys = np.asarray(d["ys"], dtype=float).reshape(B, -1)
        obj.direction = np.asarray(d["direction"], dtype=float)
        return obj


class DiffPayoff:
    """Fixed-orientation payoff u_t = tanh(a·(X_t − Y_t)) (beyond the paper).

    For scalar membership scores whose sign is fixed by the scorer's labels
    (suspect = 1 ⇒ higher score), the witness direction is known in advance:
    g(s) = s, the linear-kernel witness with the sign of the alternative. It is
    antisymmetric and has no parameters fitted on the data, so it is trivially
    predictable and E[u_t | F_{t-1}] = 0 under H0. Vectors are summed over the
    last axis (a fixed direction) — meaningful for scalar scores above all.
    """

    name = "diff"

    def __init__(self, dim: int = 1, batch: int | None = None, scale: float = 1.0):
        self.dim, self.batch, self.scale = int(dim), batch, float(scale)

    def edge(self, x, y):
        d = _rows(x, self.batch, self.dim) - _rows(y, self.batch, self.dim)
        return _out(self.scale * d.sum(axis=1), self.batch)

    def payoff(self, x, y):
        return np.tanh(self.edge(x, y))

    def update(self, x, y) -> None:  # nothing to learn
        pass

    def to_dict(self) -> dict:
        return {"name": self.name, "dim": self.dim, "batch": self.batch, "scale": self.scale}

    @classmethod
    def from_dict(cls, d: dict) -> "DiffPayoff":
        return cls(d["dim"], d["batch"], d["scale"])


_PAYOFF_CLASSES = {"mmd": MMDWitness, "ks": KSWitness, "diff": DiffPayoff,
                   "mmd-std": functools.partial(MMDWitness, standardise=True)}


def make_payoff(name: str, dim: int = 1, batch: int | None = None):
    """Payoff by name: "mmd" (the paper's kernel-MMD witness), "mmd-std" (the same
    witness on past-standardised inputs), "ks" (App. D.3) or "diff"."""
    if name not in _PAYOFF_CLASSES:
        raise ValueError(f"unknown payoff {name!r}; choose one of {', '.join(PAYOFFS)}")
    return _PAYOFF_CLASSES[name](dim=dim, batch=batch)


def payoff_from_dict(d: dict):
    name = "mmd" if d["name"] == "mmd-std" else d["name"]  # from_dict restores ``standardise``
    return _PAYOFF_CLASSES[name].from_dict(d)


# ---------------------------------------------------------------------------
# Betting strategies (how much we bet). Each exposes `lam`, the stake λ_t for
# the coming round (a function of rounds < t only), and `update(u_t)`.
# ---------------------------------------------------------------------------


def _check_lambda_max(lambda_max: float) -> float:
    if not 0.0 < lambda_max < 1.0:
        raise ValueError(f"lambda_max must lie in (0, 1) so that 1 + λu > 0; got {lambda_max}")
    return float(lambda_max)


class ONS:
    """Online Newton Step staking (App. C.1; Hazan et al. 2007).

    z_t = u_t / (1 + λ_t u_t),  a_t = a_{t-1} + z_t²,
    λ_{t+1} = Π_[−λmax, λmax]( λ_t + 2/(2 − ln 3) · z_t / a_t ),  λ_1 = 0, a_0 = 1.
    """

    name = "ons"

    def __init__(self, lambda_max: float = 0.8, batch: int | None = None):
        self.lambda_max, self.batch = _check_lambda_max(lambda_max), batch
        B = 1 if batch is None else batch
        self.lam = np.zeros(B)
        self.a = np.ones(B)

    def update(self, u) -> None:
        u = np.asarray(u, dtype=float).reshape(self.lam.shape)
        z = u / (1.0 + self.lam * u)
        self.a = self.a + z * z
        step = 2.0 / (2.0 - math.log(3.0)) * z / self.a
        self.lam = np.clip(self.lam + step, -self.lambda_max, self.lambda_max)

    def to_dict(self) -> dict:
        return {"name": self.name, "lambda_max": self.lambda_max, "batch": self.batch,
                "lam": self.lam.tolist(), "a": self.a.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "ONS":
        obj = cls(d["lambda_max"], d["batch"])
        obj.lam, obj.a = np.asarray(d["lam"], dtype=float), np.asarray(d["a"], dtype=float)
        return obj


class Kelly:
    """Approximate (quadratic) Kelly staking, App. C.1 Eq. 14, past rounds only.

    λ_t = clip( Σ_{j<t} u_j / (Σ_{j<t} u_j² + ε), −λmax, λmax ), so λ_1 = 0.
    Eq. 14 as printed sums up to t; using j ≤ t would bet on u_t with u_t
    itself (not predictable), so the sums stop at t − 1. ε (not given in the
    paper) regularises the first rounds: ε = 1 acts like one prior round of
    zero edge and stops a single lucky u_1 from forcing the maximal stake.
    """

    name = "kelly"

    def __init__(self, lambda_max: float = 0.8, batch: int | None = None, eps: float = 1.0):
        self.lambda_max, self.batch, self.eps = _check_lambda_max(lambda_max), batch, float(eps)
        B = 1 if batch is None else batch
        self.s1, self.s2 = np.zeros(B), np.zeros(B)
        self.lam = np.zeros(B)

    def update(self, u) -> None:
        u = np.asarray(u, dtype=float).reshape(self.lam.shape)
        self.s1, self.s2 = self.s1 + u, self.s2 + u * u
        self.lam = np.clip(self.s1 / (self.s2 + self.eps), -self.lambda_max, self.lambda_max)

    def to_dict(self) -> dict:
        return {"name": self.name, "lambda_max": self.lambda_max, "batch": self.batch, "eps": self.eps,
                "s1": self.s1.tolist(), "s2": self.s2.tolist(), "lam": self.lam.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "Kelly":
        obj = cls(d["lambda_max"], d["batch"], d["eps"])
        obj.s1, obj.s2 = np.asarray(d["s1"], dtype=float), np.asarray(d["s2"], dtype=float)
        obj.lam = np.asarray(d["lam"], dtype=float)
        return obj


class Mixture:
    """Uniform mixture over a grid of constant stakes (beyond the paper).

    Each constant stake λ_k ∈ (0, λmax] gives a test martingale
    W^k_t = Π_{s≤t}(1 + λ_k u_s); their average W_t = (1/K) Σ_k W^k_t is again a
    test martingale (a mixture of e-processes is an e-process). It equals a
    single bettor with the predictable stake
        λ_t = Σ_k W^k_{t-1} λ_k / Σ_k W^k_{t-1},
    so it plugs into the same W_t = W_{t-1}(1 + λ_t u_t) update. The grid is
    one-sided because every payoff here is oriented so that u_t > 0 on average
    under the alternative (suspect scores higher). Regret vs. the best
    constant stake is at most log K, with no learning-rate warm-up.
    """

    name = "mixture"

    def __init__(self, lambda_max: float = 0.8, batch: int | None = None, k: int = 10):
        self.lambda_max, self.batch, self.k = _check_lambda_max(lambda_max), batch, int(k)
        B = 1 if batch is None else batch
        self.grid = self.lambda_max * np.arange(1, self.k + 1) / self.k
        self.logw = np.zeros((B, self.k))  # log W^k_{t-1}
        self.lam = self._stake()

    def _stake(self) -> np.ndarray:
        wts = np.exp(self.logw - self.logw.max(axis=1, keepdims=True))
        return (wts @ self.grid) / wts.sum(axis=1)

    def update(self, u) -> None:
        u = np.asarray(u, dtype=float).reshape(self.lam.shape)
        self.logw = self.logw + np.log1p(u[:, None] * self.grid[None, :])
        self.lam = self._stake()

    def to_dict(self) -> dict:
        return {"name": self.name, "lambda_max": self.lambda_max, "batch": self.batch, "k": self.k,
                "logw": self.logw.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "Mixture":
        obj = cls(d["lambda_max"], d["batch"], d["k"])
        obj.logw = np.asarray(d["logw"], dtype=float)
        obj.lam = obj._stake()
        return obj


_STRATEGY_CLASSES = {"ons": ONS, "kelly": Kelly, "mixture": Mixture}


def make_strategy(name: str, lambda_max: float = 0.8, batch: int | None = None):
    """Strategy by name: "ons" (paper default), "kelly" (Eq. 14) or "mixture"."""
    if name not in _STRATEGY_CLASSES:
        raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    return _STRATEGY_CLASSES[name](lambda_max=lambda_max, batch=batch)


def strategy_from_dict(d: dict):
    return _STRATEGY_CLASSES[d["name"]].from_dict(d)


def wealth_path(payoffs, strategy: str = "ons", lambda_max: float = 0.8) -> np.ndarray:
    """Wealth W_1..W_n after each round for payoffs u_1..u_n (Eq. 2/10).

    W_t = W_{t-1}(1 + λ_t u_t), W_0 = 1, λ_t chosen from u_1..u_{t-1}. A 2-D
    input (B, n) is treated as B independent streams.
    """
    u = np.asarray(payoffs, dtype=float)
    if np.any(np.abs(u) > 1.0) or not np.all(np.isfinite(u)):
        raise ValueError("payoffs must be finite and lie in [-1, 1]")
    single = u.ndim == 1
    u2 = u.reshape(1, -1) if single else u
    strat = make_strategy(strategy, lambda_max, batch=u2.shape[0])
    logw = np.zeros(u2.shape)
    acc = np.zeros(u2.shape[0])
    for t in range(u2.shape[1]):
        acc = acc + np.log1p(strat.lam * u2[:, t])
        logw[:, t] = acc
        strat.update(u2[:, t])
    w = np.exp(logw)
    return w[0] if single else w


# ---------------------------------------------------------------------------
# The e-process
# ---------------------------------------------------------------------------


class EProcess:
    """Wealth process W_t with the level-α stopping rule (Sec. 4, App. C.2).

    Rejects at τ = inf{t : W_t ≥ 1/α}; the first crossing time is recorded and
    the process may keep running after it. ``e_value`` is W_τ if it crossed,
    else the current W_t; the anytime-valid p-value is min(1, 1/max_{s≤t} W_s).
    Wealth is kept in log space so long strong-signal runs do not overflow.
    """

    def __init__(self, strategy: str = "ons", lambda_max: float = 0.8, alpha: float = 0.05,
                 batch: int | None = None):
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1); got {alpha}")
        self.alpha, self.batch = float(alpha), batch
        self.strategy = make_strategy(strategy, lambda_max, batch)
        B = 1 if batch is None else batch
        self.t = 0
        self.log_wealth = np.zeros(B)
        self.log_max_wealth = np.zeros(B)  # max over s ≤ t of log W_s, with W_0 = 1
        self.log_stop_wealth = np.full(B, np.nan)
        self.stop_times = np.zeros(B, dtype=int)  # 0 = not crossed yet

    # -- one round ---------------------------------------------------------
    @property
    def lam(self):
        """Stake λ_t for the coming round (from rounds < t)."""
        return _out(self.strategy.lam, self.batch)

    def update(self, u):
        """Bet on payoff u_t ∈ [-1, 1]; returns the new wealth W_t."""
        u = np.asarray(u, dtype=float).reshape(self.log_wealth.shape)
        if np.any(np.abs(u) > 1.0) or not np.all(np.isfinite(u)):
            raise ValueError(f"payoff must be finite and lie in [-1, 1]; got {u}")
        self.t += 1
        self.log_wealth = self.log_wealth + np.log1p(self.strategy.lam * u)
        self.strategy.update(u)
        self.log_max_wealth = np.maximum(self.log_max_wealth, self.log_wealth)
        newly = (self.stop_times == 0) & (self.log_wealth >= math.log(1.0 / self.alpha))
        self.stop_times[newly] = self.t
        self.log_stop_wealth[newly] = self.log_wealth[newly]
        return self.wealth

    # -- read-outs ----------------------------------------------------------
    @property
    def wealth(self):
        return _out(np.exp(self.log_wealth), self.batch)

    @property
    def max_wealth(self):
        return _out(np.exp(self.log_max_wealth), self.batch)

    @property
    def rejected(self):
        r = self.stop_times > 0
        return bool(r[0]) if self.batch is None else r.copy()

    @property
    def stop_time(self):
        """First t with W_t ≥ 1/α (None / 0 when it never crossed)."""
        if self.batch is None:
            return int(self.stop_times[0]) if self.stop_times[0] > 0 else None
        return self.stop_times.copy()

    @property
    def e_value(self):
        return _out(np.exp(np.where(self.stop_times > 0, self.log_stop_wealth, self.log_wealth)), self.batch)

    @property
    def p_value(self):
        return _out(np.minimum(1.0, np.exp(-self.log_max_wealth)), self.batch)

    # -- persistence --------------------------------------------------------
    def to_dict(self) -> dict:
        return {"alpha": self.alpha, "batch": self.batch, "t": self.t,
                "strategy": self.strategy.to_dict(),
                "log_wealth": self.log_wealth.tolist(),
                "log_max_wealth": self.log_max_wealth.tolist(),
                "log_stop_wealth": [None if math.isnan(v) else v for v in self.log_stop_wealth.tolist()],
                "stop_times": self.stop_times.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "EProcess":
        s = d["strategy"]
        obj = cls(s["name"], s["lambda_max"], d["alpha"], d["batch"])
        obj.strategy = strategy_from_dict(s)
        obj.t = int(d["t"])
        obj.log_wealth = np.asarray(d["log_wealth"], dtype=float)
        obj.log_max_wealth = np.asarray(d["log_max_wealth"], dtype=float)
        obj.log_stop_wealth = np.array([np.nan if v is None else v for v in d["log_stop_wealth"]], dtype=float)
        obj.stop_times = np.asarray(d["stop_times"], dtype=int)
        return obj
