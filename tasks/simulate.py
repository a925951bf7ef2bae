"""Monte Carlo evaluation of test configurations on one features table as a cached task."""

import hashlib
from pathlib import Path

from prefect import task

from trainspotter.auditing.tables import simulate_many
from trainspotter.config import code_digest, fingerprint
from trainspotter.data import read_features
from trainspotter.stats.sequential import TestConfig

# The library code a Monte Carlo result depends on (table reading, test, betting, scoring,
# the features' member-like directions the scorer is constrained to: tables passes them in,
# orientation reads them from the catalogue, whose prediction-vector widths come from
# backends.base).
SIMULATE_CODE = ("trainspotter.auditing.tables", "trainspotter.stats.simulation", "trainspotter.stats.sequential",
                 "trainspotter.stats.streams", "trainspotter.stats.payoffs", "trainspotter.stats.strategies",
                 "trainspotter.stats.eprocess", "trainspotter.stats.scoring", "trainspotter.stats.adam_scorer",
                 "trainspotter.stats.newton_scorer", "trainspotter.stats.fixed_scorer", "trainspotter.stats.quantiles",
                 "trainspotter.stats.oriented_qp", "trainspotter.features.orientation", "trainspotter.data",
                 "trainspotter.features.catalog", "trainspotter.backends.base", "trainspotter.hub",
                 "trainspotter.hub_data")  # data reads hub datasets through these


def simulate_cache_key(context, parameters) -> str:
    """The table's content, the configuration, the trial settings and the code digest."""
    data = hashlib.sha256(Path(parameters["features"]).read_bytes()).hexdigest()
    return "simulate-" + fingerprint(code_digest(*SIMULATE_CODE), data, parameters["configs"],
                                     {k: parameters[k] for k in ("trials", "n_max", "null", "seed", "alphas")})


@task(cache_key_fn=simulate_cache_key, persist_result=True, task_run_name="simulate[{trials}x{n_max}]")
def simulate_task(features: str, configs: list[TestConfig], trials: int, n_max: int | None, null: bool,
                  seed: int, alphas: tuple[float, ...] = ()) -> list[dict]:
    """One result per configuration, all on the same trial streams (paired)."""
    return simulate_many(read_features(features), configs, trials=trials, n_max=n_max, null=null, seed=seed,
                         alphas=alphas)
