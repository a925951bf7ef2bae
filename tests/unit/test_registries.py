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


@pytest.mark.parametrize("name", ["online", "paper", "fixed"])
def test_every_scorer_is_made_restored_and_offered(name):
    from trainspotter.flows.cli_common import Scorer
    from trainspotter.stats.scoring import SCORER_REGISTRY, SCORERS, make_scorer, scorer_from_dict
    from trainspotter.stats.sequential import TestConfig

    assert SCORERS == tuple(SCORER_REGISTRY) and name in SCORER_REGISTRY
    scorer = make_scorer(name, 2, signs=[1, -1])
    assert isinstance(scorer, SCORER_REGISTRY[name])
    scorer.update([1.0, 2.0], [0.5, 3.0])
    restored = scorer_from_dict(scorer.to_dict())
    assert type(restored) is type(scorer) and restored.score([1.0, 1.0]) == scorer.score([1.0, 1.0])
    assert name in {s.value for s in Scorer} and TestConfig(scorer=name).scorer == name


EXAMPLES = {"hf": "hf:/models/x?dtype=bfloat16", "testbed": "testbed:tiny/reference",
            "openai": "openai:m@http://127.0.0.1:1/v1?tokenizer=hf:/models/x"}


def test_every_backend_scheme_parses_loads_and_keys_its_cache():
    """A scheme is one SCHEMES entry: its specs parse to it, its backend function exists, its
    code modules exist and are in the extraction cache key, the --model help and the unknown-
    scheme message name it."""
    import importlib

    from trainspotter.backends import SCHEMES, parse_spec
    from trainspotter.errors import InputError
    from trainspotter.flows.cli_common import MODEL
    from trainspotter.tasks.extract import EXTRACT_CODE

    assert set(EXAMPLES) == set(SCHEMES), "give the new scheme an example spec here"
    for name, scheme in SCHEMES.items():
        spec = parse_spec(EXAMPLES[name])
        assert spec.scheme == name and spec.remote == scheme.remote
        module, _, function = scheme.backend.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), scheme.backend
        assert all(importlib.util.find_spec(m) for m in scheme.code) and set(scheme.code) <= set(EXTRACT_CODE)
        assert scheme.backend.partition(":")[0] in scheme.code  # the module that answers is keyed
        assert scheme.syntax in MODEL.help and scheme.syntax.startswith(f"{name}:")
    with pytest.raises(InputError) as e:
        parse_spec("nope:x")
    assert all(name in str(e.value) for name in SCHEMES)


def test_no_code_outside_the_registry_tests_a_scheme_by_name():
    """``spec.scheme == "openai"`` anywhere but backends/spec.py would be a second list of schemes."""
    import re
    from pathlib import Path

    import trainspotter
    import trainspotter.flows
    import trainspotter.tasks

    roots = [Path(trainspotter.__file__).parent, Path(trainspotter.flows.__file__).parent,
             Path(trainspotter.tasks.__file__).parent]
    from trainspotter.backends import SCHEMES

    names = "|".join(SCHEMES)
    pattern = re.compile(rf"scheme\s*(==|!=|in)\s*[(\[]?[\"']({names})[\"']")
    hits = [f"{p}:{i}" for root in roots for p in sorted(root.rglob("*.py")) if p.name != "spec.py"
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []
