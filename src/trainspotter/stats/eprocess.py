"""Two-sample testing by betting: the wealth process (e-process) and its stopping rule.

BADI paper, Sec. 4 and App. C. One round t sees a pair Z_t = (X_t, Y_t)
(suspect, held-out). A *payoff* (witness) fitted on rounds < t turns it into a
bounded score u_t ∈ [-1, 1] with E[u_t | F_{t-1}] = 0 under H0 (the witness is
antisymmetric in X_t, Y_t, which are exchangeable under H0). A *strategy* picks
the stake λ_t from rounds < t, and the wealth is W_t = W_{t-1}(1 + λ_t u_t)
(Eq. 2/10 with the linearised payoff S_t = 1 + λ_t u_t). Since |λ_t| < 1 and
|u_t| ≤ 1, W_t > 0 and it is a test martingale under H0, so by Ville's
inequality P(sup_t W_t ≥ 1/α) ≤ α (App. C.2).

Payoffs live in trainspotter.stats.payoffs, strategies in trainspotter.stats.strategies;
shapes (B independent streams, ``batch=None`` for one) in trainspotter.stats.streams.
"""

from __future__ import annotations

import math

import numpy as np
import pydantic

from trainspotter.presets import DEFAULT_PRESET, TEST_PRESETS
from trainspotter.stats.strategies import STRATEGIES, make_strategy, strategy_from_dict
from trainspotter.stats.streams import per_stream

__all__ = ["EProcess", "EProcessConfig", "nest_test_settings", "wealth_path"]


class EProcessConfig(pydantic.BaseModel):
    """What every e-process here is set by: the level α (reject at the first t with W_t ≥ 1/α), the
    strategy that chooses each stake λ_t from rounds < t, and the stake's bound λ_max ∈ (0, 1), which
    keeps every factor 1 + λ_t u_t > 0 for |u_t| ≤ 1 (Sec. 4, App. C.2). The one place these are
    checked: an option, a config file or a library call enters here, and what is built from it
    (``EProcess.of``, ``stats.sequential.TestConfig``, a keyed audit's test) takes it as it is."""

    alpha: float = pydantic.Field(0.05, gt=0.0, lt=1.0)
    strategy: str = TEST_PRESETS[DEFAULT_PRESET]["strategy"]
    lambda_max: float = pydantic.Field(TEST_PRESETS[DEFAULT_PRESET]["lambda_max"], gt=0.0, lt=1.0)

    @pydantic.field_validator("strategy")
    @classmethod
    def _known_strategy(cls, v: str) -> str:
        if v not in STRATEGIES:
            raise ValueError(f"unknown strategy {v!r}; choose one of {', '.join(STRATEGIES)}")
        return v


def nest_test_settings(data):
    """A config's settings of one shape, before validation: flat ``alpha``/``strategy``/``lambda_max``
    (how keyed audits and suites were written before they took an ``EProcessConfig``, in records and
    YAML files that must still load) moved into its ``test``."""
    if isinstance(data, dict) and (flat := {k: data[k] for k in EProcessConfig.model_fields if k in data}):
        test = dict(data.get("test") or {}) if not isinstance(data.get("test"), EProcessConfig) \
            else data["test"].model_dump()
        data = {k: v for k, v in data.items() if k not in flat} | {"test": test | flat}
    return data


def wealth_path(payoffs, strategy: str = "ons", lambda_max: float = 0.8) -> np.ndarray:
    """Wealth W_1..W_n after each round for payoffs u_1..u_n (Eq. 2/10).

    W_t = W_{t-1}(1 + λ_t u_t), W_0 = 1, λ_t chosen from u_1..u_{t-1}. A 2-D
    input (B, n) is treated as B independent streams. ``strategy`` and ``lambda_max`` are checked
    as every e-process's are (``EProcessConfig``).
    """
    u = np.asarray(payoffs, dtype=float)
    if np.any(np.abs(u) > 1.0) or not np.all(np.isfinite(u)):
        raise ValueError("payoffs must be finite and lie in [-1, 1]")
    EProcessConfig(strategy=strategy, lambda_max=lambda_max)
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




class EProcess:
    """Wealth process W_t with the level-α stopping rule (Sec. 4, App. C.2).

    Rejects at τ = inf{t : W_t ≥ 1/α}; the first crossing time is recorded and
    the process may keep running after it. ``e_value`` is W_τ if it crossed,
    else the current W_t; the anytime-valid p-value is min(1, 1/max_{s≤t} W_s).
    Wealth is kept in log space so long strong-signal runs do not overflow.
    """

    def __init__(self, strategy: str = "ons", lambda_max: float = 0.8, alpha: float = 0.05,
                 batch: int | None = None):
        """Settings given one by one are checked as ``EProcessConfig`` checks them; a config that was
        checked already is taken as it is by ``EProcess.of``."""
        self._start(EProcessConfig(strategy=strategy, lambda_max=lambda_max, alpha=alpha), batch)

    @classmethod
    def of(cls, config: EProcessConfig, batch: int | None = None) -> "EProcess":
        """A fresh e-process with ``config``'s settings (any ``EProcessConfig``: a ``TestConfig`` too)."""
        obj = cls.__new__(cls)
        obj._start(config, batch)
        return obj

    def _start(self, config: EProcessConfig, batch: int | None) -> None:
        self.alpha, self.batch = float(config.alpha), batch
        self.strategy = make_strategy(config.strategy, config.lambda_max, batch)
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
        return per_stream(self.strategy.lam, self.batch)

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
        return per_stream(np.exp(self.log_wealth), self.batch)

    @property
    def max_wealth(self):
        return per_stream(np.exp(self.log_max_wealth), self.batch)

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
        return per_stream(np.exp(np.where(self.stop_times > 0, self.log_stop_wealth, self.log_wealth)), self.batch)

    @property
    def p_value(self):
        return per_stream(np.minimum(1.0, np.exp(-self.log_max_wealth)), self.batch)

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
        obj = cls.__new__(cls)
        obj.alpha, obj.batch = float(d["alpha"]), d["batch"]
        obj.strategy = strategy_from_dict(s)
        obj.t = int(d["t"])
        obj.log_wealth = np.asarray(d["log_wealth"], dtype=float)
        obj.log_max_wealth = np.asarray(d["log_max_wealth"], dtype=float)
        obj.log_stop_wealth = np.array([np.nan if v is None else v for v in d["log_stop_wealth"]], dtype=float)
        obj.stop_times = np.asarray(d["stop_times"], dtype=int)
        return obj
