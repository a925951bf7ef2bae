"""Build a testbed (tokenizer, splits, reference and target LMs) as a flow."""

from prefect import flow

import trainspotter.tasks  # noqa: F401
from trainspotter.tasks.testbed import build_testbed_task
from trainspotter.evaluation.testbed import PRESETS, TestbedConfig


@flow(name="testbed")
def testbed_flow(name: str = "tiny", force: bool = False, config: TestbedConfig | None = None) -> str:
    return build_testbed_task(config or PRESETS[name], force=force)
