"""Re-render the self-contained HTML report of an audit or benchmark run from MLflow."""

from __future__ import annotations

import json
from pathlib import Path

from mlflow.tracking import MlflowClient

from trainspotter.errors import InputError
from trainspotter.flows.tracking import tracking_uri as default_uri
from trainspotter.record.report import html_report, sets_html


def render_report(run_id: str, out: Path, tracking_uri: str | None = None) -> Path:
    """Write ``out`` for an audit run (from its summary.json and wealth.png) or a benchmark
    parent run (from benchmark.md and its ROC and power plots), and log it to the run."""
    out = Path(out)
    if out.is_dir() or not out.parent.is_dir():
        raise InputError(f"--out {out}: " + ("is a folder" if out.is_dir() else f"folder {out.parent} does not exist"))
    uri = default_uri(tracking_uri)
    store = Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None
    if store is not None and not store.is_file():  # MlflowClient would create an empty store
        raise InputError(f"run {run_id}: not found ({store} does not exist: no run was recorded there)")
    client = MlflowClient(uri)
    client.get_run(run_id)  # raises a clear MlflowException for an unknown id
    names = {a.path for a in client.list_artifacts(run_id)}
    fetch = lambda name: Path(client.download_artifacts(run_id, name))  # noqa: E731
    if "benchmark.md" in names:
        from trainspotter.flows.benchmark import benchmark_report_html

        files = {name: fetch(name) for name in sorted(names) if name.endswith(".png")}
        page = benchmark_report_html({"table": fetch("benchmark.md"), **files})
    elif "summary.json" in names:
        summary = json.loads(fetch("summary.json").read_text())
        page = html_report(summary, fetch("wealth.png").read_bytes(), summary.get("feature_weights"))
    elif "sets.json" in names:  # the parent run of an audit of several suspect sets
        page = sets_html(json.loads(fetch("sets.json").read_text()), fetch("wealth.png").read_bytes())
    else:
        raise InputError(f"run {run_id}: neither an audit (summary.json) nor a benchmark "
                         f"(benchmark.md) run")
    out.write_text(page, encoding="utf-8")
    client.log_artifact(run_id, str(out))
    return out
