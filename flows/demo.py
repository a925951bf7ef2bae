"""The demo: on a built-in testbed, audit members vs held-out (H0 false: must reject)
and non-members vs held-out (negative control, H0 true: must not reject). Each stage reports
its progress (``tasks.progress.step``): the testbed build, then each audit's pairs and e-value."""

from prefect import flow

from trainspotter.data import load_passages
from trainspotter.flows.audit import PROGRESS, AuditConfig, audit_flow
from trainspotter.flows.testbed import testbed_flow
from trainspotter.stats.sequential import TestConfig
from trainspotter.testbeds.build import PRESETS, split_path
from trainspotter.tasks.progress import step

CASES = (("members", "member"), ("negative-control", "nonmember"))


@flow(name="demo")
def demo_flow(testbed: str = "tiny", alpha: float = 0.05, seed: int = 0,
              max_pairs: int | None = None, tracking_uri: str | None = None) -> list[dict]:
    testbed_flow(testbed, config=PRESETS[testbed])
    results = []
    heldout = str(split_path(testbed, "heldout"))
    for label, split in CASES:
        config = AuditConfig(
            name=f"demo-{testbed}-{label}", suspect=str(split_path(testbed, split)),
            heldout=heldout, model=f"testbed:{testbed}",
            reference=f"testbed:{testbed}/reference", max_pairs=max_pairs, seed=seed,
            test=TestConfig(alpha=alpha, seed=seed))
        total = min(len(load_passages(config.suspect)), len(load_passages(heldout)), max_pairs or float("inf"))
        # (the demo never runs on Dask: its flow may set the audit's progress variable itself)
        token = PROGRESS.set(lambda done, e, what=f"auditing {label}: pairs queried", total=total:
                             step(what, min(done, total), total, f"e-value {e:.3g}"))
        try:
            results.append({"set": label, "suspect_split": split, **audit_flow(config, tracking_uri)})
        finally:
            PROGRESS.reset(token)
    return results
