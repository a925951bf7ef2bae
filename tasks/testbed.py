"""Testbed building as tasks; the library caches the results by config fingerprint."""

from prefect import task
from prefect.cache_policies import NONE

from trainspotter.testbeds.reference_models import build_references
from trainspotter.testbeds.build import TestbedConfig, build_testbed
from trainspotter.tasks.progress import step


def _training(name: str):
    """The builders' ``progress(stage, step, steps)`` as the caller's progress lines."""
    return lambda stage, i, total: step(f"testbed {name}: training the {stage}", i, total)


@task(cache_policy=NONE, task_run_name="build-testbed-{config.name}")
def build_testbed_task(config: TestbedConfig, force: bool = False) -> str:
    step(f"testbed {config.name}", 0)  # built already, or building: the training lines follow
    path = str(build_testbed(config, force=force, progress=_training(config.name)))
    step(f"testbed {config.name}", 1, 1)
    return path


@task(cache_policy=NONE, task_run_name="build-references-{config.name}-{k}")
def build_references_task(config: TestbedConfig, k: int, force: bool = False) -> str:
    return str(build_references(config, k, force=force, progress=_training(config.name)))
