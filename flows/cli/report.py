"""`trainspotter report`: the self-contained HTML page of an audit or benchmark run (flows/report.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from trainspotter.errors import InputError
from trainspotter.flows.cli.common import JSON, TRACKING_URI, emit_json


def report_cmd(run_id: str = typer.Argument(..., help="MLflow run id of an audit, or of a benchmark's "
                                                  "parent run."),
           out: Path = typer.Option(Path("report.html"), help="Where to write the HTML page."),
           tracking_uri: Optional[str] = TRACKING_URI,
           json_out: bool = JSON) -> None:
    """Self-contained HTML report of an audit run or a benchmark (its parent run), also
    logged to the run."""
    from mlflow.exceptions import MlflowException

    from trainspotter.flows.report import render_report

    try:
        path = render_report(run_id, out, tracking_uri)
    except MlflowException as e:
        raise InputError(f"run {run_id}: {e.message.splitlines()[0]}") from None
    if json_out:
        return emit_json({"run_id": run_id, "report": str(path.resolve())})
    Console().print(f"report written to {path}")
