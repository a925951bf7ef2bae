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
    """``config``: the recipe, with ``references`` checked for it already (``check_request``; the CLI
    checks before any output); without it, preset ``name``'s, checked here before anything is built."""
    if config is None:
        config = check_request(name, references) if references else PRESETS[name]
    path = build_testbed_task(config, force=force)
    if references:
        build_references_task(config, references, force=force)
    return path
