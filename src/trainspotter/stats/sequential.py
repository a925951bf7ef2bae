"""The sequential dataset-inference test: online scorer → payoff → e-process.

BADI paper Sec. 4 and Sec. 5.1 ("Scoring Model and Two-sample Testing by
Betting"), App. A.4, C. One round t, in this order (everything that touches
pair t is fitted on pairs < t):

1. score X_t, Y_t with the scorer fitted on pairs < t (A.4; ``config.scorer``
   picks the paper's Adam refit or the O(1)-per-round online fit),
2. payoff u_t from the witness fitted on rounds < t (App. C, tanh squashing),
3. W_t = W_{t-1}(1 + λ_t u_t) with the stake λ_t chosen from rounds < t,
4. only then update strategy, witness and scorer with pair t.

One-sided by construction (``TestConfig.oriented``, beyond the paper): BADI's scorer learns
its direction from the labels, so it separates the two sets whichever way they differ —
held-out passages that are *more* member-like than the suspect ones (members leaking into
the held-out set, App. D.6) would raise the wealth and read as "trained on". With
``oriented`` the scorer's weights keep the known member-like direction of every catalogued
feature (``signs``: the caller reads them from the feature catalogue), so the score s is non-decreasing in each of
them. If the held-out scores then stochastically dominate the suspect ones (a polluted
held-out set: Y ~ (1−ρ)N + ρM with s(M) ≥_st s(N)), a payoff that is non-decreasing in
s(X_t) − s(Y_t) — ``diff`` (tanh) and ``ks`` — has E[u_t | F_{t−1}] ≤ 0, the wealth is a
supermartingale and P(sup W ≥ 1/α) ≤ α still holds: pollution costs power, not validity.
``mmd`` learns its own witness direction and is not one-sided.

Sub-pairs (twins with k > 2 variants per passage, issue 35; ``round_payoff``): a round may hold
m sub-pairs (x_j, y_j), e.g. a passage's public version against each of its k − 1 = m private
variants. Its payoff is the mean of the sub-pairs' payoffs,

    u_t = (1/m) Σ_j φ_t(x_j, y_j),

with φ_t the payoff of the scorer and witness of rounds < t, bet on once; afterwards the witness
and the scorer absorb the m sub-pairs one by one (they are past data then). Validity (STAMP,
Rastogi, Maini & Pruthi, ICML 2025, Sec. 3: the public version is drawn uniformly among the k
variants, independently of the model; BADI Sec. 4, the e-process W_t = W_{t−1}(1 + λ_t u_t)):
φ_t is fixed by rounds < t and antisymmetric, φ_t(a, b) = −φ_t(b, a), for every payoff here (each
is an odd function of w(a) − w(b) for a witness w: ``diff`` tanh(s(a) − s(b)), ``mmd``
tanh(g(a) − g(b)), ``ks`` 1{a > c} − 1{b > c}). Under H0, given the past and the multiset of the
k variants, the public index i is uniform, so

    E[u_t | F_{t−1}, variants] = (1/k) Σ_i (1/(k−1)) Σ_{j≠i} φ_t(x_i, x_j) = 0

(the terms cancel in antisymmetric pairs), and |u_t| ≤ 1: the wealth stays a test martingale.
Twin-dependent features (f(version | its twin)) give each ordered pair its own rows; the
argument holds per ordered pair. Averaging the private *feature rows* first and betting once is
not valid for a nonlinear scorer or payoff (the mean row is not one of the exchangeable
variants), so it is not offered.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pydantic

from trainspotter.data import pair_indices
from trainspotter.presets import DEFAULT_PRESET, TEST_PRESETS
from trainspotter.stats.eprocess import EProcess, EProcessConfig
from trainspotter.stats.payoffs import PAYOFFS, make_payoff, payoff_from_dict
from trainspotter.stats.scoring import SCORERS, make_scorer, scorer_from_dict

__all__ = ["TestConfig", "TestResult", "SequentialTest", "min_pairs_to_reject", "round_payoff", "run_test",
           "signs_of", "sub_pairs"]

_DEFAULT = TEST_PRESETS[DEFAULT_PRESET]


def signs_of(config: "TestConfig", signs) -> list[int] | None:
    """The scorer's orientation constraints: ``signs`` (each feature's member-like direction,
    +1/−1, 0 = learned) when ``config.oriented``, else none."""
    return [int(s) for s in signs] if config.oriented and signs is not None else None


def min_pairs_to_reject(config: "TestConfig") -> int:
    """The fewest pairs after which a fresh test can possibly reject: every round multiplies
    the wealth by 1 + λ_t u_t ≤ 1 + λ_max (|λ_t| ≤ λ_max, |u_t| ≤ 1), so W_t ≥ 1/α needs
    t ≥ log(1/α) / log(1 + λ_max)."""
    return math.ceil(math.log(1 / config.alpha) / math.log1p(config.lambda_max) - 1e-12)


def sub_pairs(x, y, n_features: int, batch: int | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """A round's sub-pairs: one row each (``(p,)``, batch ``(B, p)``) is one sub-pair; ``(m, p)``
    (batch ``(B, m, p)``) is m of them, the j-th being rows ``[..., j, :]``."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    one = (n_features,) if batch is None else (batch, n_features)
    if x.shape == one and y.shape == one:
        return [x], [y]
    if x.ndim == len(one) + 1 and x.shape == y.shape and x.shape[:-2] == one[:-1] and x.shape[-1] == n_features \
            and x.shape[-2] >= 1:
        return [x[..., j, :] for j in range(x.shape[-2])], [y[..., j, :] for j in range(y.shape[-2])]
    many = "(" + "".join(f"{b}, " for b in one[:-1]) + f"m, {n_features})"
    raise ValueError(f"expected rows of shape {one} or {many} (m sub-pairs), got {x.shape} and {y.shape}")


def _mean(values: list):
    """(1/m) Σ_j values[j]; one value is returned as it is (single-pair rounds stay bit-identical)."""
    return values[0] if len(values) == 1 else sum(values) / len(values)


def round_payoff(payoff, sx: list, sy: list):
    """u_t = (1/m) Σ_j φ_t(sx_j, sy_j) with the witness of rounds < t (module docstring: the mean of
    the sub-pairs' payoffs keeps E[u_t | F_{t−1}] = 0 under a uniform draw of the public version)."""
    return _mean([payoff.payoff(a, b) for a, b in zip(sx, sy)])


class TestConfig(EProcessConfig):
    """Settings of one sequential test (flat, so they flatten into MLflow params): the e-process's
    (α, strategy, λ_max: ``EProcessConfig``, checked there) and the scorer's and payoff's. Defaults:
    the default preset's test (trainspotter.presets), as audit/test/simulate use it."""

    __test__ = False  # not a pytest class

    payoff: str = _DEFAULT["payoff"]
    scorer: str = "online"  # "online" (NewtonScorer, O(1) per round) or "paper" (A.4 Adam refit)
    lr: float = pydantic.Field(0.01, gt=0.0)        # paper scorer only
    epochs: int = pydantic.Field(30, ge=0)          # paper scorer only
    ridge: float = pydantic.Field(2.0, gt=0.0)      # online scorer only: ρ = ridge·features
    trim: float = pydantic.Field(0.025, ge=0.0, lt=0.5)
    seed: int = 0
    # Keep each catalogued feature's member-like direction (module docstring): one-sided.
    oriented: bool = True

    @pydantic.field_validator("scorer", "payoff")
    @classmethod
    def _known(cls, v: str, info: pydantic.ValidationInfo) -> str:
        names = {"scorer": SCORERS, "payoff": PAYOFFS}[info.field_name]
        if v not in names:
            raise ValueError(f"unknown {info.field_name} {v!r}; choose one of {', '.join(names)}")
        return v


@dataclass
class TestResult:
    """Outcome of ``SequentialTest.run`` (per-step arrays are per round)."""

    __test__ = False

    reject: bool
    e_value: float
    pairs_used: int
    max_wealth: float
    p_value: float
    stop_time: int | None
    alpha: float
    wealth: np.ndarray = field(repr=False)
    lam: np.ndarray = field(repr=False)
    u: np.ndarray = field(repr=False)
    score_x: np.ndarray = field(repr=False)
    score_y: np.ndarray = field(repr=False)

    def summary(self) -> dict:
        """The scalar fields, JSON-able."""
        d = asdict(self)
        return {k: v for k, v in d.items() if not isinstance(v, np.ndarray)}

    def to_dict(self) -> dict:
        d = self.summary()
        for k in ("wealth", "lam", "u", "score_x", "score_y"):
            d[k] = getattr(self, k).tolist()
        return d


class SequentialTest:
    """Online BADI test over pairs (suspect row x, held-out row y).

    ``batch=B`` runs B independent streams at once (used by the Monte Carlo
    evaluation); then ``update`` takes rows of shape (B, p) and the read-outs
    are arrays. The default ``batch=None`` is the single audit stream.
    ``keep_history=False`` skips the per-round history (memory flat in n).
    ``signs``: each feature's member-like direction (+1/−1, 0 = learned), kept by the
    scorer when ``config.oriented``.
    """

    __test__ = False

    def __init__(self, n_features: int, config: TestConfig | None = None, batch: int | None = None,
                 keep_history: bool = True, signs=None):
        self.config = config = config or TestConfig()
        self.n_features, self.batch, self.keep_history = int(n_features), batch, keep_history
        self.scorer = make_scorer(config.scorer, n_features, lr=config.lr, epochs=config.epochs,
                                  ridge=config.ridge, trim=config.trim, seed=config.seed, batch=batch,
                                  signs=signs_of(config, signs))
        self.payoff = make_payoff(config.payoff, dim=1, batch=batch)  # witness on scalar scores
        self.eprocess = EProcess.of(config, batch)
        self.history: dict[str, list] = {k: [] for k in ("wealth", "lambda", "u", "score_x", "score_y")}

    def update(self, x, y) -> dict:
        """One round with pair t = (x, y); returns what happened in it. Rows ``(p,)`` (batch
        ``(B, p)``) are one pair; ``(m, p)`` (batch ``(B, m, p)``) are m sub-pairs of one round, bet
        on with the mean of their payoffs (module docstring); its ``score_x``/``score_y`` are then
        the sub-pairs' mean scores."""
        xs, ys = sub_pairs(x, y, self.n_features, self.batch)
        sx = [self.scorer.score(r) for r in xs]               # 1. scorer of pairs < t
        sy = [self.scorer.score(r) for r in ys]
        u = round_payoff(self.payoff, sx, sy)                 # 2. witness of rounds < t
        lam = self.eprocess.lam                               #    stake of rounds < t
        wealth = self.eprocess.update(u)                      # 3. W_t, then strategy update
        for a, b in zip(sx, sy):                              # 4. absorb round t's sub-pairs
            self.payoff.update(a, b)
        for a, b in zip(xs, ys):
            self.scorer.update(a, b)
        step = {"t": self.t, "score_x": _mean(sx), "score_y": _mean(sy), "u": u, "lambda": lam, "wealth": wealth}
        if self.keep_history:
            for k in self.history:
                self.history[k].append(step[k])
        return step

    def run(self, X, Y, stop_on_reject: bool = True) -> TestResult:
        """Feed pairs (X[i], Y[i]) in order (``(n, m, p)``: m sub-pairs a round); stop at the first
        crossing if asked."""
        X = np.asarray(X, dtype=float)
        Y = np.asarray(Y, dtype=float)
        if self.batch is not None:
            raise ValueError("run() is for a single stream; use update() with batch rows")
        if X.ndim == 1:  # scalar scores
            X, Y = X[:, None], Y[:, None]
        if X.shape != Y.shape or X.ndim not in (2, 3) or X.shape[-1] != self.n_features:
            raise ValueError(f"X and Y must both be (n, {self.n_features}) or (n, m, {self.n_features}) (m "
                             f"sub-pairs a round); got {X.shape} and {Y.shape}")
        if not self.keep_history:
            raise ValueError("run() reports the per-round history; create the test with keep_history=True")
        start = len(self.history["wealth"])
        for i in range(X.shape[0]):
            if stop_on_reject and self.rejected:
                break
            self.update(X[i], Y[i])
        h = {k: np.asarray(v[start:], dtype=float) for k, v in self.history.items()}
        return TestResult(reject=self.rejected, e_value=self.e_value, pairs_used=self.t,
                          max_wealth=self.max_wealth, p_value=self.p_value, stop_time=self.stop_time,
                          alpha=self.config.alpha, wealth=h["wealth"], lam=h["lambda"], u=h["u"],
                          score_x=h["score_x"], score_y=h["score_y"])

    # -- read-outs (delegated to the e-process) -------------------------------
    t = property(lambda self: self.eprocess.t)
    rejected = property(lambda self: self.eprocess.rejected)
    stop_time = property(lambda self: self.eprocess.stop_time)
    wealth = property(lambda self: self.eprocess.wealth)
    max_wealth = property(lambda self: self.eprocess.max_wealth)
    e_value = property(lambda self: self.eprocess.e_value)
    p_value = property(lambda self: self.eprocess.p_value)

    # -- persistence: continuing from a saved state equals never stopping -----
    def to_dict(self) -> dict:
        hist = {k: [np.asarray(v).tolist() for v in vs] for k, vs in self.history.items()}
        return {"n_features": self.n_features, "batch": self.batch, "config": self.config.model_dump(),
                "scorer": self.scorer.to_dict(), "payoff": self.payoff.to_dict(),
                "eprocess": self.eprocess.to_dict(), "history": hist}

    @classmethod
    def from_dict(cls, d: dict) -> "SequentialTest":
        # States saved before ``scorer`` existed were made by the paper scorer, and before
        # ``oriented`` existed by an unconstrained one.
        config = TestConfig(**{"scorer": d["scorer"].get("kind", "paper"), "oriented": False, **d["config"]})
        obj = cls.__new__(cls)  # not __init__: a fixed scorer cannot be made without the columns' directions
        obj.config, obj.n_features, obj.batch, obj.keep_history = config, int(d["n_features"]), d["batch"], True
        obj.scorer = scorer_from_dict(d["scorer"])
        obj.payoff = payoff_from_dict(d["payoff"])
        obj.eprocess = EProcess.from_dict(d["eprocess"])
        conv = (lambda v: v) if d["batch"] is None else np.asarray
        obj.history = {k: [conv(v) for v in vs] for k, vs in d["history"].items()}
        return obj


def run_test(S: np.ndarray, H: np.ndarray, config: TestConfig | None = None, signs=None) -> dict:
    """Run the sequential test on suspect rows ``S`` and held-out rows ``H`` (n, p); JSON-able
    summary (``signs``: the columns' member-like directions, ``SequentialTest``).

    Rows are paired as an audit with seed ``config.seed`` pairs the passages they came from
    (``data.pair_indices``: each side shuffled by its own seeded generator, then zipped), so the
    rows of an audit's files (each side's rows in file order) give that audit's e-value;
    pairs = min(#suspect, #heldout). Stops at the first crossing.
    """
    config = config or TestConfig()
    S, H = np.asarray(S, dtype=float), np.asarray(H, dtype=float)
    pairs = np.array(pair_indices(len(S), len(H), config.seed), dtype=int).reshape(-1, 2)
    S, H = S[pairs[:, 0]], H[pairs[:, 1]]
    n = len(pairs)
    test = SequentialTest(S.shape[1], config, signs=signs)
    res = test.run(S, H, stop_on_reject=True)
    out = res.summary()
    out.update({"pairs_available": n, "n_suspect": int(len(S)), "n_heldout": int(len(H)),
                "final_wealth": float(test.wealth), "config": config.model_dump()})
    return out
