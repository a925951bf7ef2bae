"""The audit flow: the library audit (trainspotter.audit) with cached feature batches and
one MLflow run, opened when the audit starts and updated after every batch; several suspect
sets (trainspotter.loop.sets): one parent run, a nested run per set."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar

from trainspotter.tasks import settled_imports  # (configures Prefect/MLflow environment first)

with settled_imports():  # what these build lives until exit: no collection walks it again
    import mlflow
    import pandas as pd
    from mlflow.tracking import MlflowClient
    from prefect import flow, get_run_logger
    from prefect.artifacts import create_markdown_artifact

    from trainspotter import __version__
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.backends import SCHEMES, spec_fingerprint
    from trainspotter.config import flatten
    from trainspotter.data import hub_source
    from trainspotter.flows.tracking import (StepLogger, absolute_paths, audit_provenance, git_commit, snapshot_params,
                                             local_artifact, log_audit_outputs, log_dataset, log_sets_outputs,
                                             log_steps, mark_killed_runs, owner_tags, run_name, use_experiment)
    from trainspotter.loop.inputs import keep_checked, read_passages, sides_by_path
    from trainspotter.loop.run import audit
    from trainspotter.loop.sets import AuditSetsConfig, audit_sets
    from trainspotter.record.keys import sign
    from trainspotter.tasks import worker
    from trainspotter.tasks.extract import extract_chunk

__all__ = ["AuditConfig", "AuditSetsConfig", "audit_flow", "audit_on_dask", "audit_runner", "audit_sets_flow", "run_audit",
           "run_audit_on"]

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
# The auditor's Ed25519 private key (``--sign``): the sealed record is signed before it is
# logged; never a flow parameter, which Prefect would store.
SIGN_KEY: ContextVar[object | None] = ContextVar("audit_sign_key", default=None)
# Passages the caller already read, by path (the CLI reads them for its checks), so an audit
# reads each file once; not a flow parameter, which Prefect would store, texts and all.
PASSAGES: ContextVar[Mapping[str, list] | None] = ContextVar("audit_passages", default=None)


def _on_batch(run_id: str, before: int = 0) -> Callable:
    """After every batch: the run's curves grow in MLflow, and the caller's progress bar moves
    (``before``: pairs queried by earlier suspect sets of the same audit)."""
    steps, progress = StepLogger(run_id, STEPS), PROGRESS.get()

    def on_batch(auditor) -> None:
        steps(auditor)
        if progress is not None:
            progress(before + auditor.pairs_queried,
                     float(auditor.test.e_value) if auditor.test is not None else 1.0)

    return on_batch


def _extract_fn(config: AuditConfig, remote: bool) -> Callable[[list[dict], int], list[dict]]:
    """Each batch's features as a cached task; ``remote``: on the flow's task runner."""
    def extract_fn(passages: list[dict], batch_no: int) -> list[dict]:
        args = (passages, config.model, config.reference, config.access, config.features)
        if remote:  # one batch at a time: the test decides after each whether to query more
            return extract_batch.submit(*args, chunk=batch_no, answers=True).result()
        return extract_batch(*args, chunk=batch_no, answers=True)  # answers: for the sealed record

    return extract_fn


def _experiment(name: str, tracking_uri: str | None) -> tuple[str, str]:
    """The audit's MLflow experiment (name, id), after ending runs an earlier kill -9 left RUNNING."""
    experiment = f"audit/{name}"
    experiment_id = use_experiment(experiment, tracking_uri)
    for killed in mark_killed_runs(experiment_id):
        get_run_logger().warning("MLflow run %s of audit %s: its process is gone; marked KILLED", killed, name)
    return experiment, experiment_id


def _sides(config: AuditConfig) -> dict[str, list]:
    """The audit's two sides by path: its files, or a twins folder's public versions and one
    private twin of each. (A flow's code must not name the ContextVars itself: a Dask task
    runner pickles the flow by value, and a ContextVar cannot be pickled.)"""
    return sides_by_path(config, PASSAGES.get())


def _read(*paths: str) -> dict[str, list]:
    given = PASSAGES.get()
    return keep_checked(given, {path: read_passages(path, given) for path in dict.fromkeys(paths)})


def _settle_backends(config: AuditConfig) -> None:
    """Import the backend modules of the audit's models (torch and transformers for a local
    one), which the model's fingerprint or first batch would import anyway, as
    ``settled_imports``: without the collector walking what they build, then frozen, so
    that the collections during the batches skip those objects too. Not those of the local
    models while a model worker loads them (``trainspotter.tasks.worker``): this process then
    needs neither torch nor transformers."""
    specs = (config.model, *config.reference, config.placebo)
    modules = {SCHEMES[s.scheme].backend.partition(":")[0] for s in specs
               if s is not None and (s.remote or not worker.active())}
    missing = sorted(m for m in modules if m not in sys.modules)
    if missing:
        with settled_imports():
            for module in missing:
                importlib.import_module(module)


def _log_setup(config: AuditConfig) -> None:
    mlflow.log_params(absolute_paths(flatten(config)) | snapshot_params(config))
    mlflow.set_tags(owner_tags() | {"trainspotter.version": __version__, "git_commit": git_commit(),
                     "model_fingerprint": spec_fingerprint(config.model),
                     "reference_fingerprint": ",".join(spec_fingerprint(r) for r in config.reference) or "none"})


def _audit_in_run(config: AuditConfig, passages: Mapping[str, list], experiment: str, remote: bool,
                  tracking_uri: str | None, before: int = 0):
    """One audit in the active MLflow run: setup, inputs, W_t batch by batch, then metrics and
    outputs. Returns the result and where it is (run id, experiment, artifacts, plot, report)."""
    where = {"run_id": mlflow.active_run().info.run_id, "experiment": experiment}
    _settle_backends(config)
    _log_setup(config)
    for side in ("suspect", "heldout"):
        path = getattr(config, side)
        hub = hub_source(path)  # a dataset named by hub id: MLflow knows its source as the snapshot's URL
        source = f"https://huggingface.co/datasets/{hub['id']}/tree/{hub['commit']}" if hub else path
        log_dataset(pd.DataFrame(passages[path]), side, source, context=side)
    placebo = config.placebo_config
    result = audit(config, extract_fn=_extract_fn(config, remote), on_batch=_on_batch(where["run_id"], before),
                   run_id=where["run_id"], passages=passages,
                   placebo_fn=_extract_fn(placebo, remote) if placebo is not None else None)
    mlflow.log_metrics({k: float(v) for k in METRICS if (v := getattr(result, k)) is not None}
                       | {f"blind_{k}": float(getattr(result.blind, k)) for k in BLIND_METRICS}
                       | ({f"placebo_{k}": float(getattr(result.placebo, k)) for k in BLIND_METRICS}
                          if result.placebo.ran else {})
                       | ({f"match_{k}": float(v) for k, v in result.match.model_dump().items() if v is not None}
                          if result.match is not None else {}))
    if result.usage:  # an API audit's spend (its cached rerun: zeros, served from the cache)
        mlflow.log_metrics({f"api_{k}": float(v) for k, v in result.usage.items() if not isinstance(v, str)})
        mlflow.set_tag("api_served_from", result.usage["served_from"])
    mlflow.set_tags({"verdict": result.verdict, "guard": result.guard or "none"})
    log_steps(where["run_id"], {"blind_wealth": result.blind.wealth, "placebo_wealth": result.placebo.wealth})
    where |= _log_record(result, where["run_id"], tracking_uri)
    where |= {"provenance": audit_provenance(config, passages)}  # in summary.json, the report and the JSON
    return result, where | log_audit_outputs(config, result, where, tracking_uri)


def _log_record(result, run_id: str, tracking_uri: str | None) -> dict:
    """The sealed record (trainspotter.record), signed with ``SIGN_KEY`` when set, as the
    run's record.json; returns where it is (``record``) and whether it is signed."""
    record, key = result.record, SIGN_KEY.get()
    if key is not None:
        sign(record, key)
    mlflow.log_text(json.dumps(record), "record.json")
    mlflow.set_tag("record_digest", result.record_digest)
    path = local_artifact(mlflow.get_artifact_uri(), run_id, "record.json", tracking_uri)
    return {"record": path, "record_signed": key is not None}


def _artifact_key(name: str) -> str:
    return "audit-" + "".join(c if c.isalnum() else "-" for c in name.lower())


@flow(name="audit", log_prints=False)
def audit_flow(config: AuditConfig, tracking_uri: str | None = None, remote: bool = False) -> dict:
    """Run one sequential audit (or continue a recurring one) and record it in MLflow.
    ``remote``: each batch's features are computed by the flow's task runner (a Dask
    cluster, see ``run_audit``) while the test, the ledger and MLflow stay here."""
    experiment, experiment_id = _experiment(config.name, tracking_uri)
    passages = _sides(config)
    # The run exists from the start; leaving the block on an exception ends it FAILED (re-raised).
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name(config)):
        result, where = _audit_in_run(config, passages, experiment, remote, tracking_uri)
    summary = result.model_dump() | where
    create_markdown_artifact(key=_artifact_key(config.name), markdown=_markdown(summary),
                             description=f"audit {config.name}")
    get_run_logger().info("audit %s: %s, e=%.3g after %d pairs (blind e=%.3g)", config.name, result.verdict,
                          result.e_value, result.pairs_used, result.blind.e_value)
    return summary


@flow(name="audit-sets", log_prints=False)
def audit_sets_flow(config: AuditSetsConfig, tracking_uri: str | None = None, remote: bool = False) -> dict:
    """Several suspect sets against one held-out set, decided by e-BH at FDR level α
    (``trainspotter.loop.sets.audit_sets``): one parent MLflow run holding the decision, and
    inside it one nested run per set (MLflow's ``mlflow.parentRunId`` tag), each recorded
    as a single audit is."""
    experiment, experiment_id = _experiment(config.name, tracking_uri)
    passages = _read(config.heldout, *config.suspect)
    label_of, where, queried = dict(zip(config.suspect, config.labels)), {}, 0

    def run_set(set_config: AuditConfig, data: Mapping[str, list]):
        nonlocal queried
        label = label_of[set_config.suspect]
        with mlflow.start_run(experiment_id=experiment_id, run_name=label, nested=True):
            mlflow.set_tag("trainspotter.set", label)
            result, where[label] = _audit_in_run(set_config, data, experiment, remote, tracking_uri, queried)
        queried += result.pairs_queried
        return result

    with mlflow.start_run(experiment_id=experiment_id, run_name=config.name) as parent:
        _log_setup(config)
        result = audit_sets(config, run_set=run_set, passages=passages)
        client = MlflowClient()
        for s in result.sets:  # e-BH's decision, also on each set's own run
            client.set_tag(where[s.label]["run_id"], "ebh_verdict", s.verdict)
            client.log_metric(where[s.label]["run_id"], "ebh_e_value", s.e_value)
        mlflow.log_metrics({"sets": len(result.sets), "rejections": result.rejections}
                           | {f"e_value.{s.label}": s.e_value for s in result.sets})
        summary = result.model_dump()
        for s in summary["sets"]:
            s |= where[s["label"]]
        summary |= {"run_id": parent.info.run_id, "experiment": experiment}
        summary |= log_sets_outputs(config, result, summary, tracking_uri)
    create_markdown_artifact(key=_artifact_key(config.name), markdown=_sets_markdown(summary),
                             description=f"audit {config.name}: {len(result.sets)} suspect sets")
    get_run_logger().info("audit %s: e-BH at FDR %g rejected %d of %d sets", config.name, result.alpha,
                          result.rejections, len(result.sets))
    return summary


def audit_runner(config: AuditConfig, dask_address: str | None = None):
    """The audit flow (for an ``AuditSetsConfig``, the flow of several suspect sets); with
    ``dask_address``, on a task runner that extracts each batch on that Dask cluster, after the one
    check of it (``check_dask_audit``), while the sequential test stays in this process."""
    flow_ = audit_sets_flow if isinstance(config, AuditSetsConfig) else audit_flow
    if dask_address is None:
        return flow_
    from trainspotter.flows.extract import dask_runner

    check_dask_audit(config, dask_address)
    return flow_.with_options(task_runner=dask_runner(dask_address))


def run_audit(config: AuditConfig, tracking_uri: str | None = None, dask_address: str | None = None,
              progress: Callable[[int, float], None] | None = None,
              passages: Mapping[str, list] | None = None, sign_key=None) -> dict:
    """The audit flow on its runner (``audit_runner``). Cached batches are read, not recomputed,
    wherever they were computed, as long as the workers share this process's Prefect result
    storage. ``progress(pairs queried, e-value)`` is called in this process after every batch;
    ``passages``: files already read, by path; ``sign_key``: an Ed25519 private key that signs each
    sealed record (``trainspotter.record.load_private_key``)."""
    return run_audit_on(audit_runner(config, dask_address), config, tracking_uri, dask_address is not None,
                        progress, passages, sign_key)


def run_audit_on(flow_, config: AuditConfig, tracking_uri: str | None = None, remote: bool = False,
                 progress: Callable[[int, float], None] | None = None,
                 passages: Mapping[str, list] | None = None, sign_key=None) -> dict:
    """``run_audit`` on a runner made (and its cluster checked) already, ``remote`` when it is a Dask
    cluster's: the CLI checks before its progress bar starts."""
    progress_token, passages_token, key_token = PROGRESS.set(progress), PASSAGES.set(passages), SIGN_KEY.set(sign_key)
    try:
        return flow_(config, tracking_uri, remote=remote)
    finally:
        SIGN_KEY.reset(key_token)
        PASSAGES.reset(passages_token)
        PROGRESS.reset(progress_token)


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

    check_local_models("--dask-address", config.model, *config.reference, config.placebo)
    check_scheduler(dask_address)


def _markdown(s: dict) -> str:
    baseline = "n/a" if s["baseline_p_value"] is None else f"{s['baseline_p_value']:.3g}"
    return "\n".join([
        f"# Audit `{s['name']}`: {s['verdict']}", "", s["explanation"], "", "| quantity | value |", "|---|---|",
        f"| e-value | {s['e_value']:.4g} |", f"| anytime-valid p-value | {s['p_value']:.4g} |",
        f"| blind e-value (pairs) | {s['blind']['e_value']:.4g} ({s['blind']['pairs_used']}) |",
        f"| pairs used (this run) | {s['pairs_used']} ({s['pairs_this_run']}) |",
        f"| wealth at start of run | {s['wealth_start']:.4g} |", f"| α | {s['alpha']} |",
        f"| fixed-n DI p-value (comparison) | {baseline} |", f"| MLflow run | `{s['run_id']}` |",
        f"| sealed record (sha256) | `{s['record_digest']}`: `trainspotter verify {s['record']}` |", "",
        s["baseline_note"]])


def _sets_markdown(s: dict) -> str:
    rows = [f"| {x['label']} | {x['result']['pairs_used']} | {x['result']['e_value']:.4g} | "
            f"{'yes' if x['result']['blind']['fired'] else 'no'} | {x['verdict']} | `{x['run_id']}` |" for x in s["sets"]]
    return "\n".join([
        f"# Audit `{s['name']}`: {len(s['sets'])} suspect sets, e-BH at FDR α = {s['alpha']:g}", "",
        s["explanation"], "", "| set | pairs | e-value | blind check fired | decision | MLflow run |",
        "|---|---|---|---|---|---|", *rows, "", f"Parent MLflow run `{s['run_id']}`."])
