"""Testbed building as a task; the library caches the result by config fingerprint."""

from prefect import task
from prefect.cache_policies import NONE

from trainspotter.evaluation.testbed import TestbedConfig, build_testbed


@task(cache_policy=NONE, task_run_name="build-testbed-{config.name}")
def build_testbed_task(config: TestbedConfig, force: bool = False) -> str:
    return str(build_testbed(config, force=force))
