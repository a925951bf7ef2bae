"""The audit flow logging to a real `mlflow server` process (the compose setup's tracking
server): artifacts go through the server's artifact proxy (``mlflow-artifacts:`` URIs), and
the paths the flow returns for the report and plot are local files, not URIs stripped of
a scheme."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

MLFLOW = str(Path(sys.executable).parent / "mlflow")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    log = open(home / "server.log", "w")
    proc = subprocess.Popen([MLFLOW, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                             "--backend-store-uri", f"sqlite:///{home / 'mlflow.db'}",
                             "--artifacts-destination", str(home / "store")],
                            env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("mlflow server did not start: " + (home / "server.log").read_text()[-2000:])
        yield url, home
    finally:
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
def test_audit_logs_to_a_tracking_server(server, mini_testbed, artifacts):
    from trainspotter.flows.audit import AuditConfig, audit_flow

    url, home = server
    config = AuditConfig(name="server-audit", suspect=str(mini_testbed / "member.jsonl"),
                         heldout=str(mini_testbed / "heldout.jsonl"), model="testbed:mini",
                         reference="testbed:mini/reference")
    result = audit_flow(config, tracking_uri=url)
    assert result["reject"] and result["artifacts"].startswith("mlflow-artifacts:")
    report = Path(result["report"])  # downloaded from the server: a real local file, kept with the run
    assert report.parent == artifacts / "downloads" / result["run_id"]
    assert report.is_file() and "<html" in report.read_text().lower()
    assert Path(result["plot"]).read_bytes()[:4] == b"\x89PNG"
    client = MlflowClient(url)
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED"
    assert {"report.html", "wealth.png", "features.parquet"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    # the server stored them under its own artifacts destination, not in the client's artifacts/
    assert list((home / "store").rglob("report.html"))
    steps = client.get_metric_history(run.info.run_id, "wealth")
    assert len(steps) == result["pairs_used"]
    # the explicit server does not become the process's default for later audits
    from trainspotter.flows.tracking import tracking_uri

    assert "MLFLOW_TRACKING_URI" not in os.environ and tracking_uri().startswith("sqlite:///")
    # the features table is a logged input whose source is the server's download address of it
    import json

    feats = next(d.dataset for d in run.inputs.dataset_inputs if d.dataset.name == "features")
    source = json.loads(feats.source)["url"]
    with urllib.request.urlopen(source, timeout=30) as r:
        assert r.read()[:4] == b"PAR1"  # the Parquet file itself
