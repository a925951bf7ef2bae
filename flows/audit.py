"""The audit flow: the library audit (trainspotter.audit) with cached feature batches and
one MLflow run, opened when the audit starts and updated after every batch."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import mlflow
import pandas as pd
from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

import trainspotter.tasks  # noqa: F401  (configures Prefect/MLflow environment first)
from trainspotter.flows.tracking import (StepLogger, git_commit, log_audit_outputs, log_dataset, log_steps, mark_killed_runs,
                            owner_tags, use_experiment)
from trainspotter.tasks.extract import extract_chunk
from trainspotter import __version__
from trainspotter.audit import AuditConfig, audit
from trainspotter.backends import spec_fingerprint
from trainspotter.config import flatten
from trainspotter.data import load_passages

__all__ = ["AuditConfig", "audit_flow", "audit_on_dask", "run_audit"]

# An audit queries one batch at a time, so the "model-calls" concurrency tag would only add a
# server round trip (~0.4 s) per batch.
extract_batch = extract_chunk.with_options(tags=set(), task_run_name="features[{chunk}]")
STEPS = {"wealth": "wealth", "lambda": "lambda", "payoff_u": "u", "score_suspect": "score_x",
         "score_heldout": "score_y"}
METRICS = ("e_value", "pairs_used", "pairs_this_run", "pairs_queried", "wealth_start", "max_wealth",
           "p_value", "reject", "model_reject", "baseline_p_value")
BLIND_METRICS = ("fired", "e_value", "max_wealth", "p_value", "pairs_used")
# ``progress(pairs queried, e-value)`` after every batch, set in the caller's process: a
# flow parameter is pickled to Dask workers, a progress bar cannot be (see flows/extract.py).
PROGRESS: ContextVar[Callable[[int, float], None] | None] = ContextVar("audit_progress", default=None)


def _on_batch(run_id: str) -> Callable:
    """After every batch: the run's curves grow in MLflow, and the caller's progress bar moves."""
    steps, progress = StepLogger(run_id, STEPS), PROGRESS.get()

    def on_batch(auditor) -> None:
        steps(auditor)
        if progress is not None:
            progress(auditor.pairs_queried, float(auditor.test.e_value) if auditor.test is not None else 1.0)

    return on_batch


@flow(name="audit", log_prints=False)
def audit_flow(config: AuditConfig, tracking_uri: str | None = None, remote: bool = False) -> dict:
    """Run one sequential audit (or continue a recurring one) and record it in MLflow.
    ``remote``: each batch's features are computed by the flow's task runner (a Dask
    cluster, see ``run_audit``) while the test, the ledger and MLflow stay here."""
    def extract_fn(passages: list[dict], batch_no: int) -> list[dict]:
        args = (passages, config.model, config.reference, config.access, config.features)
        if remote:  # one batch at a time: the test decides after each whether to query more
            return extract_batch.submit(*args, chunk=batch_no).result()
        return extract_batch(*args, chunk=batch_no)

    experiment = f"audit/{config.name}"
    experiment_id = use_experiment(experiment, tracking_uri)
    for killed in mark_killed_runs(experiment_id):  # an earlier run of this audit died by kill -9
        get_run_logger().warning("MLflow run %s of audit %s: its process is gone; marked KILLED", killed,
                                 config.name)
    # The run exists from the start; leaving the block on an exception ends it FAILED (re-raised).
    with mlflow.start_run(experiment_id=experiment_id, run_name=config.name) as run:
        where = {"run_id": run.info.run_id, "experiment": experiment}
        mlflow.log_params(flatten(config))
        mlflow.set_tags(owner_tags() | {"trainspotter.version": __version__, "git_commit": git_commit(),
                         "model_fingerprint": spec_fingerprint(config.model),
                         "reference_fingerprint": spec_fingerprint(config.reference) if config.reference else "none"})
        for side in ("suspect", "heldout"):
            path = getattr(config, side)
            log_dataset(pd.DataFrame(load_passages(path)), side, path, context=side)
        result = audit(config, extract_fn=extract_fn, on_batch=_on_batch(where["run_id"]), run_id=where["run_id"])
        mlflow.log_metrics({k: float(v) for k in METRICS if (v := getattr(result, k)) is not None}
                           | {f"blind_{k}": float(getattr(result.blind, k)) for k in BLIND_METRICS})
        mlflow.set_tag("verdict", result.verdict)
        log_steps(where["run_id"], {"blind_wealth": result.blind.wealth})
        where |= log_audit_outputs(config, result, where, tracking_uri)
    summary = result.model_dump() | where
    create_markdown_artifact(key="audit-" + "".join(c if c.isalnum() else "-" for c in config.name.lower()),
                             markdown=_markdown(summary), description=f"audit {config.name}")
    get_run_logger().info("audit %s: %s, e=%.3g after %d pairs (blind e=%.3g)", config.name, result.verdict,
                          result.e_value, result.pairs_used, result.blind.e_value)
    return summary


def run_audit(config: AuditConfig, tracking_uri: str | None = None, dask_address: str | None = None,
              progress: Callable[[int, float], None] | None = None) -> dict:
    """The audit flow; with ``dask_address`` each batch is extracted on that Dask cluster
    (checked first, ``check_dask_audit``) and the sequential test stays in this process.
    Cached batches are read, not recomputed, wherever they were computed, as long as the
    workers share this process's Prefect result storage. ``progress(pairs queried,
    e-value)`` is called in this process after every batch."""
    flow_, remote = audit_flow, dask_address is not None
    if remote:
        from trainspotter.flows.extract import dask_runner

        check_dask_audit(config, dask_address)
        flow_ = audit_flow.with_options(task_runner=dask_runner(dask_address))
    token = PROGRESS.set(progress)
    try:
        return flow_(config, tracking_uri, remote=remote)
    finally:
        PROGRESS.reset(token)


@flow(name="audit-on-dask", log_prints=False)
def audit_on_dask(config: AuditConfig, dask_address: str, tracking_uri: str | None = None) -> dict:
    """``run_audit`` on the Dask cluster at ``dask_address`` as a flow of its own (the audit
    flow is its subflow), for a deployment: a deployment cannot choose its flow's task runner."""
    return run_audit(config, tracking_uri, dask_address)


def check_dask_audit(config: AuditConfig, dask_address: str) -> None:
    """InputError unless the audit can run its batches on the Dask scheduler at
    ``dask_address``: one answers, with workers, and no model is an API model (its query
    budget and usage meter live in the process that queries it)."""
    from trainspotter.flows.extract import check_local_models, check_scheduler

    check_local_models("--dask-address", config.model, config.reference)
    check_scheduler(dask_address)


def _markdown(s: dict) -> str:
    baseline = "n/a" if s["baseline_p_value"] is None else f"{s['baseline_p_value']:.3g}"
    return "\n".join([
        f"# Audit `{s['name']}`: {s['verdict']}", "", s["explanation"], "", "| quantity | value |", "|---|---|",
        f"| e-value | {s['e_value']:.4g} |", f"| anytime-valid p-value | {s['p_value']:.4g} |",
        f"| blind e-value (pairs) | {s['blind']['e_value']:.4g} ({s['blind']['pairs_used']}) |",
        f"| pairs used (this run) | {s['pairs_used']} ({s['pairs_this_run']}) |",
        f"| wealth at start of run | {s['wealth_start']:.4g} |", f"| α | {s['alpha']} |",
        f"| fixed-n DI p-value (comparison) | {baseline} |", f"| MLflow run | `{s['run_id']}` |", "",
        s["baseline_note"]])
