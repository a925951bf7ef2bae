"""Monte Carlo evaluation of one test configuration as a cached task."""

import hashlib
from pathlib import Path

from prefect import task

from trainspotter.config import code_digest, fingerprint
from trainspotter.data import read_features
from trainspotter.stats.simulation import simulate
from trainspotter.stats.sequential import TestConfig


# The library code a Monte Carlo result depends on (table reading, test, betting, scoring).
SIMULATE_CODE = ("trainspotter.stats.simulation", "trainspotter.stats.sequential",
                 "trainspotter.stats.betting", "trainspotter.stats.scoring", "trainspotter.data")


def simulate_cache_key(context, parameters) -> str:
    """The table's content, the configuration, the trial settings and the code digest."""
    data = hashlib.sha256(Path(parameters["features"]).read_bytes()).hexdigest()
    return "simulate-" + fingerprint(code_digest(*SIMULATE_CODE), data, parameters["config"],
                                     {k: parameters[k] for k in ("trials", "n_max", "null", "seed")})


@task(cache_key_fn=simulate_cache_key, persist_result=True, task_run_name="simulate[{config.strategy}/{config.payoff}]")
def simulate_task(features: str, config: TestConfig, trials: int, n_max: int | None, null: bool,
                  seed: int) -> dict:
    return simulate(read_features(features), config, trials=trials, n_max=n_max, null=null, seed=seed)
