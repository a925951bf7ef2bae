"""mark_killed_runs: a RUNNING MLflow run whose process is gone from this host ends KILLED;
a live process's run, or another host's, is left alone."""

import os
import socket
import subprocess
import sys

import mlflow
from mlflow.tracking import MlflowClient

from trainspotter.flows.tracking import mark_killed_runs


def test_only_runs_of_dead_processes_on_this_host_are_marked(tmp_path, monkeypatch):
    previous = mlflow.get_tracking_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
    try:
        _check_marking(tmp_path)
    finally:  # the rest of the session's tests use their own store
        mlflow.set_tracking_uri(previous)


def _check_marking(tmp_path):
    client = MlflowClient()
    experiment = client.create_experiment("audit/killed", artifact_location=(tmp_path / "a").as_uri())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = socket.gethostname()
    owners = {"dead": (here, dead.pid), "alive": (here, os.getpid()), "elsewhere": ("another-host", dead.pid)}
    runs = {}
    for name, (host, pid) in owners.items():
        runs[name] = client.create_run(experiment, tags={"trainspotter.host": host, "trainspotter.pid": str(pid)})
    untagged = client.create_run(experiment)  # a run from before the tags: nothing to check
    finished = client.create_run(experiment, tags={"trainspotter.host": here, "trainspotter.pid": str(dead.pid)})
    client.set_terminated(finished.info.run_id)

    assert mark_killed_runs(experiment) == [runs["dead"].info.run_id]
    status = lambda run: client.get_run(run.info.run_id).info.status  # noqa: E731
    assert {name: status(run) for name, run in runs.items()} == {
        "dead": "KILLED", "alive": "RUNNING", "elsewhere": "RUNNING"}
    assert status(untagged) == "RUNNING" and status(finished) == "FINISHED"
    assert mark_killed_runs(experiment) == []  # nothing left to mark
