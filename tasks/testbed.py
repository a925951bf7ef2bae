"""Testbed building as tasks; the library caches the results by config fingerprint."""

from prefect import task
from prefect.cache_policies import NONE

from trainspotter.evaluation.references import build_references
from trainspotter.evaluation.testbed import TestbedConfig, build_testbed


@task(cache_policy=NONE, task_run_name="build-testbed-{config.name}")
def build_testbed_task(config: TestbedConfig, force: bool = False) -> str:
    return str(build_testbed(config, force=force))


@task(cache_policy=NONE, task_run_name="build-references-{config.name}-{k}")
def build_references_task(config: TestbedConfig, k: int, force: bool = False) -> str:
    return str(build_references(config, k, force=force))
