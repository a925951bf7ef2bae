"""One registry entry per concept (issue 37): every entry has each piece derived from it, so
adding a payoff, a backend scheme or a benchmark method is one entry (docs/architecture.md,
"Registries"), and an entry missing a piece fails here."""

import numpy as np
import pytest

from trainspotter.stats.payoffs import PAYOFF_REGISTRY, PAYOFFS, make_payoff, payoff_from_dict


@pytest.mark.parametrize("name", list(PAYOFF_REGISTRY))
def test_every_payoff_is_made_restored_offered_and_described(name):
    from trainspotter.flows.cli.common import PAYOFF_HELP, Payoff

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
    from trainspotter.flows.cli.common import Strategy
    from trainspotter.stats.strategies import STRATEGIES, STRATEGY_REGISTRY, make_strategy, strategy_from_dict

    assert STRATEGIES == tuple(STRATEGY_REGISTRY) and name in STRATEGY_REGISTRY
    strategy = make_strategy(name, 0.5)
    assert strategy.name == name and strategy_from_dict(strategy.to_dict()).to_dict() == strategy.to_dict()
    assert name in {s.value for s in Strategy}


@pytest.mark.parametrize("name", ["online", "paper", "fixed"])
def test_every_scorer_is_made_restored_and_offered(name):
    from trainspotter.flows.cli.common import Scorer
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
    from trainspotter.flows.cli.common import MODEL
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


# The orientation rules as they were before the directions moved into the catalogue entries
# (features/orientation.py at e9959ea), written out once: the derived directions must agree.
OLD_RULES = [(r"^(gray|black|petal)_twin_(lp|ref_diff|match)$", +1), (r"_ppl$", -1), (r"_ref_(ratio|diff)$", -1), (r"_refs_diff$", -1),
             (r"_refs_(lira|token_lira|rmia)$", +1), (r"_zlib_ratio$", +1), (r"_min_kp?p?_\d+$", +1),
             (r"_strip_k_\d+$", +1), (r"_pert_(ratio|diff)_", +1), (r"_ez$", +1), (r"^black_seq_bertscore", +1),
             (r"_match_rate$", +1), (r"_ref_(match|seq)_diff$", +1), (r"_(conf|true_p|top_p_1|margin)$", +1),
             (r"_pert_match_rate_", +1), (r"_(ent|ment)$", -1)]


def _old_direction(column: str) -> int:
    import re

    return next((sign for pattern, sign in OLD_RULES if re.search(pattern, column)), 0)


def _every_feature():
    from trainspotter.features.catalog import EVERY_COLUMN, catalog

    return catalog(EVERY_COLUMN, "both")


def test_every_feature_entry_has_access_models_direction_and_help():
    """A feature is one catalogue entry: its access (the prefix of its name), the models it needs,
    its member-like direction (0 only for the learning-based inputs, whose sign is learned), a
    definition and a source; every perturbation kind has its description."""
    from trainspotter.features.catalog import _KIND_TEXT
    from trainspotter.features.perturb import KINDS

    specs = _every_feature()
    assert len({s.name for s in specs}) == len(specs)
    for s in specs:
        assert s.access in ("gray", "black") and s.name.startswith(f"{s.access}_"), s
        assert s.models[0] == "target" and set(s.models) <= {"target", "reference", "references"}, s
        assert s.direction in (-1, 0, 1) and s.definition.strip() and s.source.strip(), s
        assert (s.direction == 0) == (s.name.startswith("gray_pv_") or
                                      (s.name.startswith("gray_top_p_") and s.name != "gray_top_p_1")), s
        assert s.as_dict()["direction"] == s.direction
    assert tuple(_KIND_TEXT) == KINDS


def test_orientation_is_the_catalogues_and_agrees_with_the_old_rules():
    """directions() reads each column's entry: for every catalogued column (under every named set
    and every option), its benchmark twin petal_*, any Min-K%/STRIP-K% percent, and a column outside
    the catalogue, it gives what the regex rules gave before."""
    from trainspotter.features.catalog import catalog
    from trainspotter.features.features import FEATURE_SETS, FeatureConfig
    from trainspotter.features.orientation import direction, directions

    specs = _every_feature() + [s for c in (*FEATURE_SETS.values(), FeatureConfig(min_k=(0.05, 0.37), strip_k=(0.3,)))
                                for s in catalog(c, "both")]
    assert all(direction(s.name) == s.direction for s in specs)
    black = [s.name for s in specs if s.access == "black" and not s.name.startswith("black_seq")]
    names = ([s.name for s in specs] + ["petal_" + n.removeprefix("black_") for n in black]
             + ["gray_min_k_3", "black_strip_k_45", "gray_min_kpp_99", "my_own_column", "gray", "petal_top_p_1"])
    assert directions(names) == [_old_direction(n) for n in names]


def test_every_named_feature_set_is_catalogued():
    """Each named set (FEATURE_SETS) yields columns of the catalogue with every piece; the full set
    holds every entry but the opt-in ones (prediction vectors, a twins audit's positions)."""
    from trainspotter.features.catalog import catalog
    from trainspotter.features.extract import feature_columns
    from trainspotter.features.features import FEATURE_SETS

    every = {s.name for s in _every_feature()}
    for name, config in FEATURE_SETS.items():
        columns = feature_columns(config, "both", 2)
        assert columns and set(columns) <= {s.name for s in catalog(config, "both")}, name
        assert {s.name for s in catalog(config, "both")} <= every | {s.name for s in catalog(config)}, name
    full = {s.name for s in catalog(FEATURE_SETS["full"], "both")}
    opt_in = {n for n in every - full if n.startswith(("gray_top_p_", "gray_pv_", "gray_twin_", "black_twin_"))}
    assert every - full == opt_in


def test_every_testbed_is_one_entry_with_a_description_and_a_recipe():
    """A testbed is one TESTBEDS entry: its description is in ``testbed --help``, its recipe sets
    only TestbedConfig fields and is made into the PRESETS config of its name, and the one name
    check (check_testbed) knows it."""
    from typer.testing import CliRunner

    from trainspotter.testbeds.build import PRESETS, TestbedConfig
    from trainspotter.flows.cli import app
    from trainspotter.presets import TESTBEDS, check_testbed

    assert list(TESTBEDS) == list(PRESETS)
    output = CliRunner().invoke(app, ["testbed", "--help"], terminal_width=200).output
    squashed = " ".join(output.replace("│", " ").split())
    for name, testbed in TESTBEDS.items():
        assert len(testbed.description) > 20 and set(testbed.recipe) <= set(TestbedConfig.model_fields) - {"name"}
        assert PRESETS[name].name == name and check_testbed(name) == name
        assert all(getattr(PRESETS[name], k) == v for k, v in testbed.recipe.items()), name
        assert " ".join(f"{name}: {testbed.description}".split()) in squashed


def test_every_method_is_in_the_light_index_and_the_help_without_sklearn():
    """A per-sample method is one METHODS entry whose paradigm and TDDBench name come from the
    light index (METHOD_INDEX, same names, same order); --methods lists each, and the CLI module
    that says so imports neither the methods nor sklearn."""
    import subprocess
    import sys

    from trainspotter.evaluation.method_index import METHOD_INDEX, PARADIGMS
    from trainspotter.evaluation.mia import METHODS
    from trainspotter.flows.cli.benchmark import METHOD_HELP

    assert list(METHODS) == list(METHOD_INDEX)
    for name, method in METHODS.items():
        assert (method.paradigm, method.tddbench) == METHOD_INDEX[name] and method.paradigm in PARADIGMS
        assert (f" {name} ({method.tddbench})" if method.tddbench else f" {name}") in f" {METHOD_HELP}".replace(":", ": ")
        assert method.label and method.source and method.columns and callable(method.score), name
    probe = ("import sys, trainspotter.flows.cli.benchmark; "
             "print(sorted(m for m in ('sklearn', 'trainspotter.evaluation.mia') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "[]"
