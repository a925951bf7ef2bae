"""The recurring-audit deployment on a real Prefect server on 127.0.0.1 (SQLite):
two triggered runs with new data in between; the second continues the first's wealth."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).parent / "prefect")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("prefect-server")
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "true"}
    env.pop("PREFECT_LOCAL_STORAGE_PATH", None)
    log = open(home / "server.log", "w")
    proc = subprocess.Popen([PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("Prefect server did not start: " + (home / "server.log").read_text()[-2000:])
    worker = None
    try:
        run = lambda *a: subprocess.run([PREFECT, *a], env=env, cwd=ROOT, capture_output=True,  # noqa: E731
                                        text=True, timeout=300)
        out = run("work-pool", "create", "local-pool", "--type", "process")
        assert out.returncode == 0, out.stdout + out.stderr
        out = run("--no-prompt", "deploy", "--all", "--prefect-file", "deployments/prefect.yaml")
        assert out.returncode == 0, out.stdout + out.stderr
        worker = subprocess.Popen([PREFECT, "worker", "start", "--pool", "local-pool"], env=env, cwd=ROOT,
                                  stdout=open(home / "worker.log", "w"), stderr=subprocess.STDOUT,
                                  start_new_session=True)
        yield env, run
    finally:
        for p in (worker, proc):
            if p is not None:
                os.killpg(p.pid, 9)
                p.wait(timeout=30)


@pytest.mark.slow
def test_scheduled_audit_continues_wealth(server, mini_testbed, tmp_path):
    from mlflow.tracking import MlflowClient

    from trainspotter.flows.tracking import tracking_uri
    from trainspotter.loop.ledger import load_ledger

    env, run = server
    inspect = run("deployment", "inspect", "audit/recurring-audit")
    assert "0 3 * * *" in inspect.stdout and "local-pool" in inspect.stdout, inspect.stdout
    suspect = tmp_path / "suspect.jsonl"
    rows = (mini_testbed / "nonmember.jsonl").read_text().splitlines()
    suspect.write_text("\n".join(rows[:20]) + "\n")  # the first batch of "new data"
    params = {"config": {"name": "scheduled", "suspect": str(suspect),
                         "heldout": str(mini_testbed / "heldout.jsonl"), "model": "testbed:mini",
                         "reference": "testbed:mini/reference", "ledger": True,
                         "test": {"alpha": 0.01}}}
    trigger = ["deployment", "run", "audit/recurring-audit", "--params", json.dumps(params),
               "--watch", "--watch-timeout", "240"]
    first = run(*trigger)
    assert first.returncode == 0 and "Completed" in first.stdout, first.stdout + first.stderr
    w1 = load_ledger("scheduled")["runs"][-1]
    with suspect.open("a") as f:  # new data arrives between the scheduled runs
        f.write("\n".join(rows[20:35]) + "\n")
    second = run(*trigger)
    assert second.returncode == 0 and "Completed" in second.stdout, second.stdout + second.stderr
    ledger = load_ledger("scheduled")
    w2 = ledger["runs"][-1]
    assert len(ledger["runs"]) == 2 and w1["pairs_added"] == 20 and w2["pairs_added"] == 15
    assert w2["wealth_start"] == pytest.approx(w1["wealth_end"])  # W2 starts where W1 ended
    assert w2["pairs_total"] == 35
    client = MlflowClient(tracking_uri())
    for r in ledger["runs"]:
        assert client.get_run(r["run_id"]).data.metrics["pairs_this_run"] == r["pairs_added"]
