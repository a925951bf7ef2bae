"""The audit flow: pairs → cached feature extraction in small batches → online
scoring + betting → stop as soon as W_t ≥ 1/α → one MLflow run with the evidence."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from prefect import flow, get_run_logger
from pydantic import BaseModel, Field

import tasks  # noqa: F401  (configures Prefect/MLflow environment first)
from flows.tracking import git_commit, log_steps, use_experiment
from tasks.extract import extract_features
from trainspotter import __version__
from trainspotter.backends import spec_fingerprint
from trainspotter.config import flatten, fingerprint
from trainspotter.data import load_passages, make_pairs
from trainspotter.pvalue import di_pvalue
from trainspotter.report import wealth_plot
from trainspotter.sequential import SequentialTest, TestConfig


class AuditConfig(BaseModel):
    """One audit: which texts, which models, how to test."""

    name: str = "audit"
    suspect: str
    heldout: str
    model: str
    reference: str | None = None
    max_pairs: int | None = Field(None, ge=1)
    batch_pairs: int = Field(16, ge=1)  # pairs queried per task; the test stops between pairs
    seed: int = 0
    test: TestConfig = TestConfig()


def _finite_row(passage: dict, row: dict[str, float], columns: list[str]) -> np.ndarray:
    vec = np.array([row[c] for c in columns], dtype=float)
    if not np.all(np.isfinite(vec)):
        bad = columns[int(np.argmin(np.isfinite(vec)))]
        raise ValueError(f"passage {passage['id']!r}: feature {bad} is {row[bad]} (not finite)")
    return vec


@flow(name="audit", log_prints=False)
def audit_flow(config: AuditConfig, tracking_uri: str | None = None) -> dict:
    """Run one sequential audit and record it in MLflow; returns the summary."""
    logger = get_run_logger()
    suspect, heldout = load_passages(config.suspect), load_passages(config.heldout)
    pairs = make_pairs(suspect, heldout, seed=config.seed, max_pairs=config.max_pairs)
    test: SequentialTest | None = None
    columns: list[str] = []
    rows: list[dict] = []
    queried = 0
    for batch_no, start in enumerate(range(0, len(pairs), config.batch_pairs)):
        batch = pairs[start:start + config.batch_pairs]
        texts = [x["text"] for x, _ in batch] + [y["text"] for _, y in batch]
        feats = extract_features(texts, config.model, config.reference, batch=batch_no)
        queried += len(batch)
        if test is None:
            columns = sorted(feats[0])
            test = SequentialTest(len(columns), config.test)
        for i, (x, y) in enumerate(batch):
            fx, fy = feats[i], feats[len(batch) + i]
            test.update(_finite_row(x, fx, columns), _finite_row(y, fy, columns))
            rows += [{"id": x["id"], "set": "suspect", **fx}, {"id": y["id"], "set": "heldout", **fy}]
            if test.rejected:
                break
        logger.info("pairs %d, wealth %.3g", test.t, test.wealth)
        if test.rejected:
            break
    assert test is not None  # make_pairs returned at least one pair
    features = pd.DataFrame(rows)
    summary = {
        "name": config.name, "reject": bool(test.rejected), "e_value": float(test.e_value),
        "pairs_used": int(test.t), "pairs_queried": queried, "pairs_available": len(pairs),
        "stop_time": test.stop_time, "max_wealth": float(test.max_wealth),
        "p_value": float(test.p_value), "alpha": config.test.alpha, "features": columns,
        "baseline_p_value": _baseline_p_value(features, columns, config.seed),
    }
    summary.update(_track(config, test, features, summary, tracking_uri))
    logger.info("audit %s: reject=%s e=%.3g after %d pairs", config.name, summary["reject"],
                summary["e_value"], summary["pairs_used"])
    return summary


def _baseline_p_value(features: pd.DataFrame, columns: list[str], seed: int) -> float | None:
    """Maini et al.'s fixed-sample DI p-value (BADI App. A.8) on the same pairs, for
    comparison only: its sample size was chosen by the e-process, so unlike the
    e-value it carries no guarantee here. None with fewer than 4 pairs."""
    sides = [features.loc[features["set"] == s, columns].to_numpy() for s in ("suspect", "heldout")]
    if min(len(x) for x in sides) < 4:
        return None
    return di_pvalue(*sides, seed=seed)["p_value"]


def _track(config: AuditConfig, test: SequentialTest, features: pd.DataFrame, summary: dict,
           tracking_uri: str | None) -> dict:
    """One MLflow run per audit: params, per-step series, decision, artifacts."""
    import mlflow

    experiment_id = use_experiment(f"audit/{config.name}", tracking_uri)
    with mlflow.start_run(experiment_id=experiment_id, run_name=config.name) as run:
        mlflow.log_params(flatten(config))
        mlflow.set_tags({
            "trainspotter.version": __version__, "git_commit": git_commit(),
            "model_fingerprint": spec_fingerprint(config.model),
            "reference_fingerprint": spec_fingerprint(config.reference) if config.reference else "none",
            "data_fingerprint": fingerprint(sorted(features["id"])),
        })
        log_steps(run.info.run_id, {
            "wealth": test.history["wealth"], "lambda": test.history["lambda"],
            "payoff_u": test.history["u"], "score_suspect": test.history["score_x"],
            "score_heldout": test.history["score_y"]})
        mlflow.log_metrics({k: float(summary[k]) for k in
                            ("e_value", "pairs_used", "pairs_queried", "max_wealth", "p_value")}
                           | {"reject": float(summary["reject"])})
        if summary["baseline_p_value"] is not None:
            mlflow.log_metric("baseline_p_value", summary["baseline_p_value"])
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            features.to_parquet(out / "features.parquet", index=False)
            wealth_plot(np.array(test.history["wealth"]), config.test.alpha, out / "wealth.png",
                        title=f"{config.name}: W_t (reject={summary['reject']})",
                        stop_time=test.stop_time)
            (out / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json")))
            (out / "summary.json").write_text(json.dumps(summary, indent=1))
            mlflow.log_artifacts(str(out))
        artifact_dir = mlflow.get_artifact_uri()
    local = artifact_dir.removeprefix("file://")
    return {"run_id": run.info.run_id, "experiment": f"audit/{config.name}",
            "artifacts": local, "plot": f"{local}/wealth.png"}
