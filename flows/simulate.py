"""Monte Carlo sweep over test configurations: one MLflow parent run per flow run,
one child run per configuration (BADI Sec. 5.1, App. D.4–D.5)."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import mlflow
from prefect import flow

import trainspotter.tasks  # noqa: F401
from trainspotter.flows.tracking import git_commit, log_steps, use_experiment
from trainspotter.tasks.simulate import simulate_task
from trainspotter import __version__
from trainspotter.config import flatten
from trainspotter.data import read_features
from trainspotter.report import power_plot
from trainspotter.stats.sequential import TestConfig, split_features


@flow(name="simulate")
def simulate_flow(features: str, strategies: list[str] = ("ons",), payoffs: list[str] = ("mmd",),
                  alpha: float = 0.05, lambda_max: float = 0.8, trials: int = 200,
                  n_max: int | None = None, null: bool = False, seed: int = 0,
                  tracking_uri: str | None = None) -> list[dict]:
    split_features(read_features(features))  # bad tables fail here, before any run is opened
    configs = [TestConfig(alpha=alpha, strategy=s, payoff=p, lambda_max=lambda_max, seed=seed)
               for s, p in itertools.product(strategies, payoffs)]
    experiment = use_experiment(f"simulate/{Path(features).stem}", tracking_uri)
    results = []
    with mlflow.start_run(experiment_id=experiment, run_name="sweep") as parent:
        mlflow.log_params({"features": features, "trials": trials, "n_max": n_max, "null": null,
                           "seed": seed, "configurations": len(configs)})
        mlflow.set_tags({"trainspotter.version": __version__, "git_commit": git_commit()})
        for config, res in zip(configs, simulate_task(features, configs, trials, n_max, null, seed)):
            label = f"{config.strategy}/{config.payoff}"
            with mlflow.start_run(experiment_id=experiment, run_name=label, nested=True) as child:
                mlflow.log_params(flatten(config))
                rate = "fpr" if null else "tpr"
                mlflow.log_metrics({rate: res[rate], "trials": res["trials"], "pairs": res["pairs"]}
                                   | ({"mean_stop": res["mean_stop"], "std_stop": res["std_stop"]}
                                      if res["mean_stop"] is not None else {}))
                log_steps(child.info.run_id, {"power": res["power_curve"]})
            results.append({"configuration": label, "run_id": child.info.run_id,
                            **{k: res[k] for k in ("tpr", "fpr", "mean_stop", "std_stop", "trials", "pairs")},
                            "power_curve": res["power_curve"]})
        with tempfile.TemporaryDirectory() as tmp:
            plot = power_plot({r["configuration"]: r["power_curve"] for r in results},
                              Path(tmp) / "power.png", title=f"Sequential power ({'null' if null else 'alternative'})")
            mlflow.log_artifact(str(plot))
    for r in results:
        r["parent_run_id"] = parent.info.run_id
    return results
