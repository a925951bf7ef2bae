"""One registry entry per concept (issue 37): every entry has each piece derived from it, so
adding a payoff, a backend scheme or a benchmark method is one entry (docs/architecture.md,
"Registries"), and an entry missing a piece fails here."""

import numpy as np
import pytest

from trainspotter.stats.payoffs import PAYOFF_REGISTRY, PAYOFFS, make_payoff, payoff_from_dict


@pytest.mark.parametrize("name", list(PAYOFF_REGISTRY))
def test_every_payoff_is_made_restored_offered_and_described(name):
    from trainspotter.flows.cli_common import PAYOFF_HELP, Payoff

    payoff = make_payoff(name, dim=2)
    assert payoff.name == name
    rng = np.random.default_rng(0)
    for _ in range(5):
        x, y = rng.normal(size=2), rng.normal(size=2)
        u = payoff.payoff(x, y)
        assert -1 <= float(np.asarray(u).ravel()[0]) <= 1
        payoff.update(x, y)
    restored = payoff_from_dict(payoff.to_dict())
    assert restored.name == name and restored.to_dict() == payoff.to_dict()
    x, y = rng.normal(size=2), rng.normal(size=2)
    assert np.allclose(restored.payoff(x, y), payoff.payoff(x, y))
    assert name in {p.value for p in Payoff} and f" {name}" in PAYOFF_HELP
    assert PAYOFFS == tuple(PAYOFF_REGISTRY)


@pytest.mark.parametrize("name", ["ons", "kelly", "mixture"])
def test_every_strategy_is_made_restored_and_offered(name):
    from trainspotter.flows.cli_common import Strategy
    from trainspotter.stats.strategies import STRATEGIES, STRATEGY_REGISTRY, make_strategy, strategy_from_dict

    assert STRATEGIES == tuple(STRATEGY_REGISTRY) and name in STRATEGY_REGISTRY
    strategy = make_strategy(name, 0.5)
    assert strategy.name == name and strategy_from_dict(strategy.to_dict()).to_dict() == strategy.to_dict()
    assert name in {s.value for s in Strategy}
