"""Betting strategies: how much to stake on each round (BADI App. C.1).

Each strategy exposes ``lam``, the stake λ_t for the coming round (a function of rounds
< t only), and ``update(u_t)``. |λ_t| ≤ λ_max < 1 keeps the wealth 1 + λ_t u_t > 0 for
every payoff u_t ∈ [-1, 1]. Shapes: trainspotter.stats.streams.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["STRATEGIES", "STRATEGY_REGISTRY", "ONS", "Kelly", "Mixture", "make_strategy", "strategy_from_dict"]


class ONS:
    """Online Newton Step staking (App. C.1; Hazan et al. 2007).

    z_t = u_t / (1 + λ_t u_t),  a_t = a_{t-1} + z_t²,
    λ_{t+1} = Π_[−λmax, λmax]( λ_t + 2/(2 − ln 3) · z_t / a_t ),  λ_1 = 0, a_0 = 1.
    """

    name = "ons"

    def __init__(self, lambda_max: float = 0.8, batch: int | None = None):
        self.lambda_max, self.batch = float(lambda_max), batch
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
        self.lambda_max, self.batch, self.eps = float(lambda_max), batch, float(eps)
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
        self.lambda_max, self.batch, self.k = float(lambda_max), batch, int(k)
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


# The one list of strategies (name -> class with lambda_max, batch and from_dict); the CLI's
# choices and the benchmark's defaults are derived from it.
STRATEGY_REGISTRY = {"ons": ONS, "kelly": Kelly, "mixture": Mixture}
STRATEGIES = tuple(STRATEGY_REGISTRY)


def make_strategy(name: str, lambda_max: float = 0.8, batch: int | None = None):
    """Strategy by name: "ons" (paper default), "kelly" (Eq. 14) or "mixture"."""
    if name not in STRATEGY_REGISTRY:
        raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    return STRATEGY_REGISTRY[name](lambda_max=lambda_max, batch=batch)


def strategy_from_dict(d: dict):
    return STRATEGY_REGISTRY[d["name"]].from_dict(d)
