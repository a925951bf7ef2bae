"""The audit flow: pairs → cached feature extraction in small batches → online
scoring + betting → stop as soon as W_t ≥ 1/α → one MLflow run with the evidence."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import yaml
from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from pydantic import BaseModel, Field

import tasks  # noqa: F401  (configures Prefect/MLflow environment first)
from flows.tracking import git_commit, log_steps, use_experiment
from tasks.extract import extract_chunk

# An audit queries one batch at a time, so the "model-calls" concurrency tag would only add a
# server round trip (~0.4 s) per batch.
extract_batch = extract_chunk.with_options(tags=set(), task_run_name="features[{chunk}]")
from tasks.usage import UsageMeter
from trainspotter import __version__
from trainspotter.backends import spec_fingerprint
from trainspotter.config import flatten, fingerprint
from trainspotter.data import load_passages, make_pairs
from trainspotter.errors import BudgetExhausted, InputError
from trainspotter.features.features import FEATURE_SETS, FeatureConfig
from trainspotter.ledger import check_setup, load_ledger, new_ledger, save_ledger
from trainspotter.stats.pvalue import di_pvalue
from trainspotter.report import html_report, wealth_plot
from trainspotter.stats.sequential import SequentialTest, TestConfig


class AuditConfig(BaseModel):
    """One audit: which texts, which models, how to test."""

    name: str = "audit"
    suspect: str
    heldout: str
    model: str
    reference: str | None = None
    access: Literal["gray", "black", "both"] = "gray"  # black: greedy tokens only (label-only APIs)
    features: FeatureConfig = FEATURE_SETS["lean"]
    max_pairs: int | None = Field(None, ge=1)
    batch_pairs: int = Field(16, ge=1)  # pairs queried per task; the test stops between pairs
    seed: int = 0
    ledger: bool = False  # continue the stored e-process of audit `name` (recurring audits)
    test: TestConfig = TestConfig()


def _columns(rows: list[dict], logger) -> list[str]:
    """Feature columns of the test, fixed on the first batch: those finite there (e.g. EZ is
    NaN throughout when target and reference tokenise differently). Said, not silent."""
    names = [c for c in rows[0] if c not in ("id", "set")]
    keep = [c for c in names if all(np.isfinite(r[c]) for r in rows)]
    if len(keep) < len(names):
        logger.warning("features not finite on the first batch, left out of the test: %s",
                       ", ".join(sorted(set(names) - set(keep))))
    if not keep:
        raise InputError("no feature is finite on the first batch of pairs")
    return keep


def _finite_row(passage: dict, row: dict[str, float], columns: list[str]) -> np.ndarray:
    vec = np.array([row[c] for c in columns], dtype=float)
    if not np.all(np.isfinite(vec)):
        bad = columns[int(np.argmin(np.isfinite(vec)))]
        raise ValueError(f"passage {passage['id']!r}: feature {bad} is {row[bad]} (not finite)")
    return vec


@flow(name="audit", log_prints=False)
def audit_flow(config: AuditConfig, tracking_uri: str | None = None) -> dict:
    """Run one sequential audit (or continue a recurring one) and record it in MLflow."""
    logger = get_run_logger()
    suspect, heldout = load_passages(config.suspect), load_passages(config.heldout)
    setup = {"reference": config.reference, "access": config.access,
             "features": config.features.model_dump(mode="json"), "test": config.test.model_dump()}
    ledger = (load_ledger(config.name) or new_ledger(config.name, setup)) if config.ledger else None
    test: SequentialTest | None = None
    columns: list[str] = []
    if ledger is not None:
        check_setup(ledger, setup)
        # Only pairs never bet on before may enter the continued e-process.
        used = {side: set(ids) for side, ids in ledger["used"].items()}
        suspect = [p for p in suspect if p["id"] not in used["suspect"]]
        heldout = [p for p in heldout if p["id"] not in used["heldout"]]
        if ledger["state"] is not None:
            test, columns = SequentialTest.from_dict(ledger["state"]), ledger["columns"]
    t0, w0 = (test.t, test.wealth) if test else (0, 1.0)
    pairs = make_pairs(suspect, heldout, seed=config.seed, max_pairs=config.max_pairs)
    rows: list[dict] = []
    queried, stopped_by = 0, "data"
    meter = UsageMeter([config.model, config.reference])
    for batch_no, start in enumerate(range(0, len(pairs), config.batch_pairs)):
        if test is not None and test.rejected:
            break  # evidence reached 1/α: stop querying (stopped_by is set below)
        batch = pairs[start:start + config.batch_pairs]
        passages = [{"id": p["id"], "text": p["text"]} for p in [x for x, _ in batch] + [y for _, y in batch]]
        try:
            feats = extract_batch(passages, config.model, config.reference, config.access,
                                  config.features, chunk=batch_no)
        except BudgetExhausted as e:
            stopped_by = "budget"
            logger.warning("query budget reached after %d pairs: %s", queried, e)
            break
        queried += len(batch)
        if test is None:
            columns = _columns(feats, logger)
            test = SequentialTest(len(columns), config.test)
        for i, (x, y) in enumerate(batch):
            fx, fy = feats[i], feats[len(batch) + i]
            test.update(_finite_row(x, fx, columns), _finite_row(y, fy, columns))
            rows += [fx | {"set": "suspect"}, fy | {"set": "heldout"}]
            if test.rejected:
                break
        logger.info("pairs %d, wealth %.3g", test.t, test.wealth)
    if test is not None and test.rejected:
        stopped_by = "rejected"
    if test is None:
        raise InputError(f"audit {config.name!r}: no pairs to test" if stopped_by == "data" else
                         f"audit {config.name!r}: the query budget ran out before the first pair")
    features = pd.DataFrame(rows, columns=["id", "set", *columns])
    summary = {
        "name": config.name, "reject": bool(test.rejected), "e_value": float(test.e_value),
        "pairs_used": int(test.t), "pairs_this_run": int(test.t - t0), "pairs_queried": queried,
        "pairs_available": t0 + len(pairs), "stop_time": test.stop_time, "stopped_by": stopped_by,
        "wealth_start": float(w0), "wealth": float(test.wealth), "max_wealth": float(test.max_wealth),
        "p_value": float(test.p_value), "alpha": config.test.alpha, "features": columns,
        "baseline_p_value": _baseline_p_value(features, columns, config.seed),
        # logistic weights on normalised features after the last pair (App. A.5)
        "feature_weights": dict(zip(columns, test.scorer.theta[0, :-1].tolist())),
        **meter.report(queried, len(pairs) - queried),
    }
    summary.update(_track(config, test, t0, features, summary, tracking_uri))
    if ledger is not None:
        _record(ledger, config, test, columns, features, summary)
        summary["ledger"] = str(save_ledger(ledger))
    create_markdown_artifact(key=_artifact_key(config.name), markdown=_markdown(summary),
                             description=f"audit {config.name}")
    logger.info("audit %s: reject=%s e=%.3g after %d pairs", config.name, summary["reject"],
                summary["e_value"], summary["pairs_used"])
    return summary


def _artifact_key(name: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    return "audit-" + "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


def _markdown(s: dict) -> str:
    decision = "**reject H0**: evidence that the suspect set was trained on" if s["reject"] \
        else "no rejection: not enough evidence (yet)"
    baseline = "n/a" if s["baseline_p_value"] is None else f"{s['baseline_p_value']:.3g}"
    return "\n".join([
        f"# Audit `{s['name']}`", "", decision, "",
        "| quantity | value |", "|---|---|",
        f"| e-value | {s['e_value']:.4g} |", f"| anytime-valid p-value | {s['p_value']:.4g} |",
        f"| pairs used (this run) | {s['pairs_used']} ({s['pairs_this_run']}) |",
        f"| wealth at start of run | {s['wealth_start']:.4g} |", f"| α | {s['alpha']} |",
        f"| fixed-n DI p-value (comparison) | {baseline} |",
        f"| MLflow run | `{s['run_id']}` |"])


def _record(ledger: dict, config: AuditConfig, test: SequentialTest, columns: list[str],
            features: pd.DataFrame, summary: dict) -> None:
    """Store the continued state, the pairs consumed and one history row."""
    ledger["state"], ledger["columns"] = test.to_dict(), columns
    for side in ("suspect", "heldout"):
        ledger["used"][side] += features.loc[features["set"] == side, "id"].tolist()
    ledger["runs"].append({
        "run_id": summary["run_id"], "finished": time.time(), "model": config.model,
        "model_fingerprint": spec_fingerprint(config.model), "pairs_added": summary["pairs_this_run"],
        "pairs_total": summary["pairs_used"], "wealth_start": summary["wealth_start"],
        "wealth_end": summary["wealth"], "reject": summary["reject"], "e_value": summary["e_value"]})


def _baseline_p_value(features: pd.DataFrame, columns: list[str], seed: int) -> float | None:
    """Maini et al.'s fixed-sample DI p-value (BADI App. A.8) on the same pairs, for
    comparison only: its sample size was chosen by the e-process, so unlike the
    e-value it carries no guarantee here. None with fewer than 4 pairs."""
    sides = [features.loc[features["set"] == s, columns].to_numpy() for s in ("suspect", "heldout")]
    if min(len(x) for x in sides) < 4:
        return None
    return di_pvalue(*sides, seed=seed)["p_value"]


def _track(config: AuditConfig, test: SequentialTest, t0: int, features: pd.DataFrame,
           summary: dict, tracking_uri: str | None) -> dict:
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
        # This run's rounds t0+1..t (a continued audit keeps counting from the ledger).
        log_steps(run.info.run_id, {
            name: test.history[key][t0:] for name, key in (
                ("wealth", "wealth"), ("lambda", "lambda"), ("payoff_u", "u"),
                ("score_suspect", "score_x"), ("score_heldout", "score_y"))}, first_step=t0 + 1)
        mlflow.log_metrics({k: float(summary[k]) for k in
                            ("e_value", "pairs_used", "pairs_this_run", "pairs_queried",
                             "wealth_start", "max_wealth", "p_value")}
                           | {"reject": float(summary["reject"])})
        if summary["baseline_p_value"] is not None:
            mlflow.log_metric("baseline_p_value", summary["baseline_p_value"])
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            features.to_parquet(out / "features.parquet", index=False)
            wealth_plot(np.array(test.history["wealth"]), config.test.alpha, out / "wealth.png",
                        title=f"{config.name}: W_t (reject={summary['reject']})",
                        stop_time=test.stop_time, run_start=t0)
            (out / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json")))
            where = {"run_id": run.info.run_id, "experiment": f"audit/{config.name}"}
            (out / "summary.json").write_text(json.dumps(summary | where, indent=1))
            (out / "report.html").write_text(html_report(
                summary | where, (out / "wealth.png").read_bytes(), summary["feature_weights"]))
            mlflow.log_artifacts(str(out))
        local = mlflow.get_artifact_uri().removeprefix("file://")
    return where | {"artifacts": local, "plot": f"{local}/wealth.png",
                    "report": f"{local}/report.html"}
