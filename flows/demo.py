"""The demo: on a built-in testbed, audit members vs held-out (H0 false: must reject)
and non-members vs held-out (negative control, H0 true: must not reject)."""

from prefect import flow

from trainspotter.flows.audit import AuditConfig, audit_flow
from trainspotter.flows.testbed import testbed_flow
from trainspotter.stats.sequential import TestConfig
from trainspotter.evaluation.testbed import PRESETS, split_path

CASES = (("members", "member"), ("negative-control", "nonmember"))


@flow(name="demo")
def demo_flow(testbed: str = "tiny", alpha: float = 0.05, seed: int = 0,
              max_pairs: int | None = None, tracking_uri: str | None = None) -> list[dict]:
    testbed_flow(testbed, config=PRESETS[testbed])
    results = []
    for label, split in CASES:
        config = AuditConfig(
            name=f"demo-{testbed}-{label}", suspect=str(split_path(testbed, split)),
            heldout=str(split_path(testbed, "heldout")), model=f"testbed:{testbed}",
            reference=f"testbed:{testbed}/reference", max_pairs=max_pairs, seed=seed,
            test=TestConfig(alpha=alpha, seed=seed))
        results.append({"set": label, "suspect_split": split, **audit_flow(config, tracking_uri)})
    return results
