"""The simulate flow: a parent MLflow run with one child per configuration."""

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient


def test_sweep_has_parent_and_child_runs(tmp_path, monkeypatch):
    import trainspotter.tasks.simulate as task_simulate
    from trainspotter.flows.simulate import simulate_flow
    from trainspotter.tasks.cache import refreshing

    calls = []  # the library function behind the cached task, counted
    library = task_simulate.simulate_many
    monkeypatch.setattr(task_simulate, "simulate_many", lambda *a, **k: calls.append(1) or library(*a, **k))
    from trainspotter.flows.tracking import tracking_uri

    rng = np.random.default_rng(3)
    n = 120
    df = pd.concat([pd.DataFrame(rng.normal(size=(n, 3)) + [1.5, 0, 0], columns=list("abc")).assign(set="suspect"),
                    pd.DataFrame(rng.normal(size=(n, 3)), columns=list("abc")).assign(set="heldout")])
    path = tmp_path / "shifted.parquet"
    df.to_parquet(path, index=False)
    results = simulate_flow(str(path), strategies=["ons", "kelly"], payoffs=["mmd"], trials=16, n_max=100)
    assert [r["configuration"] for r in results] == ["ons/mmd", "kelly/mmd"]
    client = MlflowClient(tracking_uri())
    parent = results[0]["parent_run_id"]
    for r in results:
        run = client.get_run(r["run_id"])
        assert run.data.tags["mlflow.parentRunId"] == parent
        assert run.data.params["strategy"] == r["configuration"].split("/")[0]
        assert run.data.metrics["tpr"] == pytest.approx(r["tpr"]) and r["tpr"] >= 0.75
        power = sorted(client.get_metric_history(r["run_id"], "power"), key=lambda m: m.step)
        assert len(power) == 100 and power[-1].value == pytest.approx(r["tpr"])
    assert "power.png" in {a.path for a in client.list_artifacts(parent)}
    assert len(calls) == 1  # both configurations in one pass
    # a second identical sweep is served from the task cache: same numbers, no simulation
    again = simulate_flow(str(path), strategies=["ons", "kelly"], payoffs=["mmd"], trials=16, n_max=100)
    assert [a["tpr"] for a in again] == [r["tpr"] for r in results] and len(calls) == 1
    # --refresh recomputes them (same seed: same numbers)
    with refreshing(True):
        fresh = simulate_flow(str(path), strategies=["ons", "kelly"], payoffs=["mmd"], trials=16, n_max=100)
    assert [a["tpr"] for a in fresh] == [r["tpr"] for r in results] and len(calls) == 2
