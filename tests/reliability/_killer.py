"""`trainspotter` with fault injection, for the kill -9 tests (test code only, never the product).

    python tests/reliability/_killer.py audit --suspect ... --ledger

``$KILL_AT=STAGE:N`` sends SIGKILL to this very process (no cleanup, no atexit, no
finally) at the N-th (1-based) occurrence of STAGE:

- ``query``: inside the N-th model query (library ``extract`` of one batch), after the
  model has been run but before its rows are returned, so that batch is not finished;
- ``batch``: between batches, right after the N-th per-batch MLflow step logging;
- ``save``: inside the N-th ledger save, after the temp file is written, before its rename;
- ``mlflow``: inside the audit's final MLflow logging (the N-th ``mlflow.log_artifacts``,
  after the ledger save and the final metrics).

Without ``$KILL_AT`` nothing is killed. Either way every model query that completes appends
one line to ``$QUERY_LOG``: the JSON list of the passage ids it scored.
"""

from __future__ import annotations

import json
import os
import signal
import sys


def main() -> None:
    import mlflow

    import trainspotter.flows.tracking as tracking
    import trainspotter.loop.ledger
    import trainspotter.tasks.worker as task_extract
    from trainspotter.flows.cli import main as cli_main

    stage, _, n = (os.environ.get("KILL_AT") or "none:0").partition(":")
    n, seen = int(n), {"query": 0, "batch": 0, "save": 0, "mlflow": 0}
    log = os.environ["QUERY_LOG"]

    def at(point: str) -> None:
        seen[point] += 1
        if point == stage and seen[point] == n:
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    # The batches are computed in this process (no model worker: tasks/worker.py), so that a
    # kill inside a query kills the command itself; the worker's own end is tests/flows/test_model_worker.py's.
    os.environ["TRAINSPOTTER_MODEL_WORKER"] = "0"
    extract = task_extract.extract_rows

    def killing_extract(passages, *args, **kwargs):
        rows = extract(passages, *args, **kwargs)
        at("query")
        with open(log, "a") as f:
            f.write(json.dumps([p["id"] for p in passages]) + "\n")
        return rows

    task_extract.extract_rows = killing_extract

    step = tracking.StepLogger.__call__

    def killing_step(self, auditor):
        step(self, auditor)
        at("batch")

    tracking.StepLogger.__call__ = killing_step

    class KillingOs:  # trainspotter.loop.ledger's `os`, with a replace that can be killed in
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def replace(src, dst):
            at("save")
            os.replace(src, dst)

    trainspotter.loop.ledger.os = KillingOs()

    log_artifacts = mlflow.log_artifacts

    def killing_log_artifacts(*args, **kwargs):
        at("mlflow")
        return log_artifacts(*args, **kwargs)

    mlflow.log_artifacts = killing_log_artifacts
    sys.argv = ["trainspotter", *sys.argv[1:]]
    cli_main()


if __name__ == "__main__":
    main()
