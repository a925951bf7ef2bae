"""The keyed audit as a flow (``trainspotter keyed audit``): one run of ``trainspotter.keyed.run``
in one MLflow run (its settings, the verdict, the e-value, units, budget and the random-key rank,
and the sealed record as record.json). The flow's parameters are the config alone: paths and a
model spec, never the release's secret or key, which are read from the folder inside the run."""

from __future__ import annotations

import json
from contextvars import ContextVar

from trainspotter.tasks import settled_imports  # (configures Prefect/MLflow environment first)

with settled_imports():
    import mlflow
    from prefect import flow, get_run_logger

    from trainspotter import __version__
    from trainspotter.config import flatten
    from trainspotter.flows.tracking import git_commit, local_artifact, mark_killed_runs, owner_tags, use_experiment
    from trainspotter.keyed.audit import KeyedAuditConfig
    from trainspotter.keyed.run import audit_release

__all__ = ["keyed_audit_flow"]

# ``progress(spent, budget)`` after every batch, set by the caller (not a flow parameter)
PROGRESS: ContextVar = ContextVar("keyed_progress", default=None)


@flow(name="keyed-audit", log_prints=False)
def keyed_audit_flow(config: KeyedAuditConfig, tracking_uri: str | None = None) -> dict:
    name = config.name or "keyed"
    experiment_id = use_experiment(f"keyed/{name}", tracking_uri)
    mark_killed_runs(experiment_id)
    with mlflow.start_run(experiment_id=experiment_id, run_name=name) as run:
        mlflow.log_params(flatten(config))
        mlflow.set_tags(owner_tags() | {"trainspotter.version": __version__, "git_commit": git_commit(),
                                        "kind": "keyed"})
        result = audit_release(config, progress=PROGRESS.get())
        record = result.pop("record")
        mlflow.log_metrics({k: float(result[k]) for k in ("e_value", "p_value", "units_total", "units_this_run",
                                                          "spent_this_run", "spent_total")}
                           | ({"rank_p_value": result["rank"]["p_value"]} if result["rank"] else {}))
        mlflow.set_tags({"verdict": result["verdict"], "record_digest": record["digest"]})
        mlflow.log_text(json.dumps(record), "record.json")
        path = local_artifact(mlflow.get_artifact_uri(), run.info.run_id, "record.json", tracking_uri)
    get_run_logger().info("keyed audit %s: %s, e=%.3g after %d units", name, result["verdict"], result["e_value"],
                          result["units_total"])
    return result | {"run_id": run.info.run_id, "record": path, "record_digest": record["digest"]}
