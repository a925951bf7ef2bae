"""Build a testbed (tokenizer, splits, reference and target LMs; with ``references`` K, also
the K OUT and K IN reference models of a pre-training testbed) as a flow."""

from prefect import flow

import trainspotter.tasks  # noqa: F401
from trainspotter.tasks.testbed import build_references_task, build_testbed_task
from trainspotter.testbeds.reference_models import check_request
from trainspotter.testbeds.build import PRESETS, TestbedConfig


@flow(name="testbed")
def testbed_flow(name: str = "tiny", force: bool = False, config: TestbedConfig | None = None,
                 references: int = 0) -> str:
    config = config or PRESETS[name]
    if references:
        check_request(config, references)  # before building the base
    path = build_testbed_task(config, force=force)
    if references:
        build_references_task(config, references, force=force)
    return path
