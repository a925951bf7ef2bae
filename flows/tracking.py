"""MLflow helpers: the embedded store under artifacts/, batched step metrics, git tag."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import mlflow
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from trainspotter.config import artifacts_root

BATCH = 1000  # MLflow accepts at most 1000 metrics per log_batch call


def tracking_uri(uri: str | None = None) -> str:
    """``uri``, else $MLFLOW_TRACKING_URI (a server), else SQLite under artifacts/."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    root = artifacts_root()
    root.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlflow.db'}"


def use_experiment(name: str, uri: str | None = None) -> str:
    """Point MLflow at the store and make sure ``name`` exists with artifacts under artifacts/."""
    uri = tracking_uri(uri)
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.get_experiment_by_name(name)
    if experiment is None:
        folder = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        embedded = uri.startswith("sqlite:///") and uri.endswith(str(artifacts_root() / "mlflow.db"))
        location = (artifacts_root() / "mlruns" / folder).as_uri() if embedded else None
        return mlflow.create_experiment(name, artifact_location=location)
    return experiment.experiment_id


def log_steps(run_id: str, series: dict[str, list[float]], first_step: int = 1) -> None:
    """Per-step metrics (wealth, λ, u, ...) in batches: one call per 1000 values."""
    now = int(time.time() * 1000)
    metrics = [Metric(key, float(v), now, step) for key, values in series.items()
               for step, v in enumerate(values, start=first_step)]
    client = MlflowClient()
    for i in range(0, len(metrics), BATCH):
        client.log_batch(run_id, metrics=metrics[i:i + BATCH])


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
