"""Payoffs (witnesses): what the betting test bets on (BADI Sec. 4, App. C).

A payoff fitted on rounds < t turns the pair Z_t = (X_t, Y_t) (suspect, held-out) into a
bounded score u_t ∈ [-1, 1] with E[u_t | F_{t-1}] = 0 under H0: the witness is
antisymmetric in X_t, Y_t, which are exchangeable under H0. ``edge`` / ``payoff`` read
round t with the state of rounds < t; ``update`` absorbs round t afterwards. Shapes:
trainspotter.stats.streams.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from trainspotter.stats.streams import per_stream, stream_rows

__all__ = ["PAYOFFS", "PAYOFF_REGISTRY", "Payoff", "PayoffEntry", "payoffs_help", "poly2_feature_map", "MMDWitness",
           "KSWitness", "DiffPayoff", "make_payoff", "payoff_from_dict"]


class Payoff(Protocol):
    """What the sequential test needs of a payoff (module docstring): u_t of round t from the
    state of rounds < t, then the update with round t; a state that survives a ledger."""

    name: str

    def payoff(self, x, y) -> np.ndarray: ...

    def update(self, x, y) -> None: ...

    def to_dict(self) -> dict: ...


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
        r = stream_rows(x, self.batch, self.dim)
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
        return per_stream(np.einsum("bd,bd->b", self.w, self._diff(x, y)), self.batch)

    def payoff(self, x, y):
        """u_t = tanh(v_t) ∈ [-1, 1]."""
        return np.tanh(self.edge(x, y))

    def update(self, x, y) -> None:
        """Absorb round t: μ, σ first, then the witness step on the inputs
        standardised with rounds ≤ t (g_{t+1} may use round t). So round 1
        steps with x̃_1 = −ỹ_1 = ±1 and the payoff only depends on the inputs
        up to a common affine map a·x + b (a > 0)."""
        for r in (stream_rows(x, self.batch, self.dim), stream_rows(y, self.batch, self.dim)):
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
        r = stream_rows(x, self.batch, self.dim)
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
        return per_stream(v, self.batch)

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
            step = stream_rows(x, self.batch, self.dim) - stream_rows(y, self.batch, self.dim)
            self.direction = self.direction + step

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
        d = stream_rows(x, self.batch, self.dim) - stream_rows(y, self.batch, self.dim)
        return per_stream(self.scale * d.sum(axis=1), self.batch)

    def payoff(self, x, y):
        return np.tanh(self.edge(x, y))

    def update(self, x, y) -> None:  # nothing to learn
        pass

    def to_dict(self) -> dict:
        return {"name": self.name, "dim": self.dim, "batch": self.batch, "scale": self.scale}

    @classmethod
    def from_dict(cls, d: dict) -> "DiffPayoff":
        return cls(d["dim"], d["batch"], d["scale"])


@dataclass(frozen=True)
class PayoffEntry:
    """One payoff: how to make it (``dim``, ``batch``), how to restore its saved state, and
    its help text (CLI choices and help are derived from ``PAYOFF_REGISTRY``)."""

    make: Callable[..., Payoff]
    load: Callable[[dict], Payoff]
    help: str = ""


# The one list of payoffs; adding one is one entry here (plus its class).
PAYOFF_REGISTRY: dict[str, PayoffEntry] = {
    "mmd": PayoffEntry(MMDWitness, MMDWitness.from_dict, "the paper's kernel-MMD witness"),
    "ks": PayoffEntry(KSWitness, KSWitness.from_dict, "one-sided KS"),
    "diff": PayoffEntry(DiffPayoff, DiffPayoff.from_dict),
    # from_dict restores ``standardise`` from the saved state
    "mmd-std": PayoffEntry(functools.partial(MMDWitness, standardise=True), MMDWitness.from_dict,
                           "the same witness on standardised scores"),
}
PAYOFFS = tuple(PAYOFF_REGISTRY)


def payoffs_help() -> str:
    """'mmd (the paper's ...), ks (one-sided KS), diff or mmd-std (...)' for help texts."""
    items = [f"{n} ({e.help})" if e.help else n for n, e in PAYOFF_REGISTRY.items()]
    return ", ".join(items[:-1]) + " or " + items[-1]


def make_payoff(name: str, dim: int = 1, batch: int | None = None) -> Payoff:
    """Payoff by name (``PAYOFF_REGISTRY``): "mmd" (the paper's kernel-MMD witness), "mmd-std"
    (the same witness on past-standardised inputs), "ks" (App. D.3) or "diff"."""
    if name not in PAYOFF_REGISTRY:
        raise ValueError(f"unknown payoff {name!r}; choose one of {', '.join(PAYOFFS)}")
    return PAYOFF_REGISTRY[name].make(dim=dim, batch=batch)


def payoff_from_dict(d: dict) -> Payoff:
    return PAYOFF_REGISTRY[d["name"]].load(d)
