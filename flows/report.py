"""Re-render the self-contained HTML report of any audit run from MLflow."""

from __future__ import annotations

import json
from pathlib import Path

from mlflow.tracking import MlflowClient

from flows.tracking import tracking_uri as default_uri
from trainspotter.report import html_report


def render_report(run_id: str, out: Path, tracking_uri: str | None = None) -> Path:
    """Write ``out`` from the run's summary.json and wealth.png, and log it to the run."""
    client = MlflowClient(default_uri(tracking_uri))
    client.get_run(run_id)  # raises a clear MlflowException for an unknown id
    summary = json.loads(Path(client.download_artifacts(run_id, "summary.json")).read_text())
    png = Path(client.download_artifacts(run_id, "wealth.png")).read_bytes()
    out.write_text(html_report(summary, png, summary.get("feature_weights")), encoding="utf-8")
    client.log_artifact(run_id, str(out))
    return out
