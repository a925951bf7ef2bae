"""MLflow helpers: the embedded store under artifacts/, batched step metrics (also live,
batch by batch, from an audit), logged datasets, artifacts, git tag."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import mlflow
import mlflow.artifacts
import mlflow.data
import numpy as np
import yaml
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from trainspotter import __version__
from trainspotter.config import artifacts_root, fingerprint, flatten
from trainspotter.record.report import html_report, sets_html, sets_wealth_plot, wealth_plot

BATCH = 1000  # MLflow accepts at most 1000 metrics per log_batch call
# The embedded store's first use logs INFO lines ("Creating initial MLflow database tables...",
# 90 columns) on the terminal: nothing a user acts on. Warnings still show.
for _name in ("mlflow.store.db.utils", "alembic"):
    logging.getLogger(_name).setLevel(logging.WARNING)


PATH_PARAMS = ("suspect", "heldout", "twins")  # config fields naming the user's files
SPEC_PARAMS = ("model", "reference", "placebo")  # and model specs, an hf: one naming a folder


def _absolute_spec(spec: str) -> str:
    from trainspotter.hub import is_hub_id

    if not spec.startswith("hf:") or is_hub_id(spec[3:].partition("?")[0]):  # a hub id stays one
        return spec
    path, sep, options = spec[3:].partition("?")
    return f"hf:{os.path.abspath(os.path.expanduser(path))}{sep}{options}"


def absolute_paths(params: dict[str, str]) -> dict[str, str]:
    """MLflow params (``flatten``) with the input files and local model folders as absolute paths
    (one value, or a JSON list of several): a run started from another folder still names the
    files it read."""
    out = dict(params)
    for key, value in params.items():
        fix = os.path.abspath if key in PATH_PARAMS else _absolute_spec if key in SPEC_PARAMS else None
        if fix is not None and value not in ("None", ""):
            out[key] = json.dumps([fix(v) for v in json.loads(value)]) if value.startswith("[") else fix(value)
    return out


def snapshot_params(config) -> dict[str, str]:
    """MLflow params naming the hub snapshot (``ORG/NAME@COMMIT``) of each model named by hub id:
    ``model_snapshot``, ``reference_snapshot`` (a JSON list of several); none for local models."""
    out = {}
    for key in SPEC_PARAMS:
        value = getattr(config, key, None)
        specs = [s for s in (value if isinstance(value, (list, tuple)) else [value]) if s is not None]
        names = [s.snapshot.name for s in specs if getattr(s, "snapshot", None) is not None]
        if names:
            out[f"{key}_snapshot"] = names[0] if len(specs) == 1 else json.dumps(names)
    return out


def run_name(config) -> str:
    """An audit's MLflow run name: what it compared on which model ("audit: mine vs public on
    hf:/models/m"), not the same word for every run of a default --name."""
    sides = (f"twins {Path(config.twins).name}" if getattr(config, "twins", None) else
             f"{Path(config.suspect).stem} vs {Path(config.heldout).stem}")
    return f"{config.name}: {sides} on {config.model.base}"


def tracking_uri(uri: str | None = None) -> str:
    """``uri``, else $MLFLOW_TRACKING_URI (a server), else SQLite under artifacts/."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    root = artifacts_root()
    root.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlflow.db'}"


def use_experiment(name: str, uri: str | None = None) -> str:
    """Point MLflow at the store and make sure ``name`` exists with artifacts under artifacts/."""
    uri = tracking_uri(uri)
    # mlflow.set_tracking_uri also writes $MLFLOW_TRACKING_URI, which tracking_uri() reads as
    # the user's own choice: keep the user's value, so one audit's explicit server does not
    # become every later audit's default in the same process (a notebook).
    user = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    if user is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = user
    # Processes started together on one SQLite store would each create its tables (MLflow's
    # migrations collide: "table _alembic_tmp_... already exists") and each create a missing
    # experiment (the second fails): the first touch of the store is one process at a time.
    with store_lock(uri):
        experiment = mlflow.get_experiment_by_name(name)
        if experiment is not None:
            return experiment.experiment_id
        folder = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        embedded = uri.startswith("sqlite:///") and uri.endswith(str(artifacts_root() / "mlflow.db"))
        location = (artifacts_root() / "mlruns" / folder).as_uri() if embedded else None
        return mlflow.create_experiment(name, artifact_location=location)


def store_lock(uri: str):
    """An inter-process lock beside a SQLite tracking store (``mlflow.db.lock``); none for
    servers (they serialise their own writes)."""
    if not uri.startswith("sqlite:///"):
        return contextlib.nullcontext()
    from filelock import FileLock

    return FileLock(uri.removeprefix("sqlite:///").split("?")[0] + ".lock")


def log_steps(run_id: str, series: dict[str, list[float]], first_step: int = 1) -> None:
    """Per-step metrics (wealth, λ, u, ...) in batches: one call per 1000 values."""
    now = int(time.time() * 1000)
    metrics = [Metric(key, float(v), now, step) for key, values in series.items()
               for step, v in enumerate(values, start=first_step)]
    client = MlflowClient()
    for i in range(0, len(metrics), BATCH):
        client.log_batch(run_id, metrics=metrics[i:i + BATCH])


class StepLogger:
    """``on_batch`` callback of ``trainspotter.audit``: logs the rounds added since its last
    call, so the run's curves grow while the audit queries (and survive a crash).
    ``names`` maps metric names to the Auditor's history keys; steps are global t."""

    def __init__(self, run_id: str, names: dict[str, str]):
        self.run_id, self.names, self.done = run_id, names, 0

    def __call__(self, auditor) -> None:
        history = auditor.history
        log_steps(self.run_id, {name: history[key][self.done:] for name, key in self.names.items()},
                  first_step=auditor.t0 + self.done + 1)
        self.done = len(history["wealth"])


def owner_tags() -> dict[str, str]:
    """Which process runs this MLflow run (``mark_killed_runs`` reads them)."""
    import socket

    return {"trainspotter.host": socket.gethostname(), "trainspotter.pid": str(os.getpid())}


def mark_killed_runs(experiment_id: str) -> list[str]:
    """Runs of the experiment still RUNNING whose process is gone from this host (a kill -9
    leaves no chance to end them): end them KILLED, and return their ids. A run whose pid is
    alive, or now belongs to a process started after the run, is told apart by the
    process's start time; runs of other hosts are left as they are (nothing to check)."""
    import socket

    import psutil

    client, host, killed = MlflowClient(), socket.gethostname(), []
    for run in client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'"):
        tags = run.data.tags
        if tags.get("trainspotter.host") != host or not tags.get("trainspotter.pid", "").isdigit():
            continue
        try:
            alive = psutil.Process(int(tags["trainspotter.pid"])).create_time() <= run.info.start_time / 1000 + 1
        except psutil.NoSuchProcess:
            alive = False
        if not alive:
            client.set_terminated(run.info.run_id, status="KILLED")
            killed.append(run.info.run_id)
    return killed


def log_dataset(df, name: str, source: str, context: str) -> None:
    """Record a table as an input of the active run (name, digest, schema; not the data)."""
    with warnings.catch_warnings():  # MLflow registers its local-file source twice and says so
        warnings.filterwarnings("ignore", "The specified dataset source can be interpreted")
        dataset = mlflow.data.from_pandas(df, source=source, name=name)
    mlflow.log_input(dataset, context=context)


def local_artifact(artifact_uri: str, run_id: str, path: str, uri: str | None = None) -> str:
    """A local path of one artifact: the file in the store itself for a file store; for a
    server or cloud store a copy under artifacts/downloads/<run id>/ (MLflow's own download
    would land in a fresh temporary folder that nobody cleans up or finds again)."""
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    parsed = urlparse(artifact_uri)
    if parsed.scheme in ("", "file"):
        return str(Path(url2pathname(parsed.path)) / path)
    dst = artifacts_root() / "downloads" / run_id
    dst.mkdir(parents=True, exist_ok=True)
    return mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=path, dst_path=str(dst),
                                               tracking_uri=tracking_uri(uri))


def dataset_source(artifact_uri: str, uri: str | None = None):
    """A dataset source MLflow can resolve for an artifact: the URI itself for file and cloud
    stores; for a tracking server's proxied ``mlflow-artifacts:`` URIs (which no resolver
    reads), the server's HTTP download address of the same file."""
    from urllib.parse import urlparse

    from mlflow.data.http_dataset_source import HTTPDatasetSource

    parsed = urlparse(artifact_uri)
    if parsed.scheme != "mlflow-artifacts":
        return artifact_uri
    server = f"http://{parsed.netloc}" if parsed.netloc else tracking_uri(uri).rstrip("/")
    return HTTPDatasetSource(f"{server}/api/2.0/mlflow-artifacts/artifacts{parsed.path}")


def log_audit_outputs(config, result, where: dict, uri: str | None = None) -> dict:
    """An audit's outputs in the active run: features.parquet (also a logged input),
    wealth.png, config.yaml, summary.json, report.html; returns where they are."""
    summary, features = result.model_dump(exclude={"history"}) | where, result.features_table()
    mlflow.set_tag("data_fingerprint", fingerprint(sorted(features["id"])))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        features.to_parquet(out / "features.parquet", index=False)
        wealth_plot(np.array(result.wealth_path()), result.alpha, out / "wealth.png",
                    title=f"{config.name}: {result.verdict}", stop_time=result.stop_time,
                    run_start=result.pairs_used - result.pairs_this_run, blind=np.array(result.blind.wealth),
                    placebo=np.array(result.placebo.wealth))
        (out / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json")))
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        (out / "report.html").write_text(html_report(summary, (out / "wealth.png").read_bytes(),
                                                     result.feature_weights))
        mlflow.log_artifacts(str(out))
    artifacts = mlflow.get_artifact_uri()
    log_dataset(features, "features", dataset_source(f"{artifacts}/features.parquet", uri), context="features")
    local = {k: local_artifact(artifacts, where["run_id"], name, uri) for k, name in
             (("plot", "wealth.png"), ("report", "report.html"))}
    return {"artifacts": artifacts} | local


def log_sets_outputs(config, result, summary: dict, uri: str | None = None) -> dict:
    """An audit of several suspect sets, in the active (parent) run: config.yaml, sets.json
    (the e-BH decision, every set's result less its history, and its run), wealth.png (every
    set's W_t), report.html; returns where they are."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        wealth = {s.label: s.result.wealth_path() for s in result.sets}
        sets_wealth_plot(wealth, result.alpha, out / "wealth.png", title=f"{config.name}: e-BH at FDR {result.alpha:g}")
        (out / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json")))
        sets = [s | {"result": {k: v for k, v in s["result"].items() if k != "history"}} for s in summary["sets"]]
        (out / "sets.json").write_text(json.dumps(summary | {"sets": sets}, indent=1))
        (out / "report.html").write_text(sets_html(summary, (out / "wealth.png").read_bytes()))
        mlflow.log_artifacts(str(out))
    artifacts, run_id = mlflow.get_artifact_uri(), mlflow.active_run().info.run_id
    return {"artifacts": artifacts} | {k: local_artifact(artifacts, run_id, name, uri) for k, name in
                                       (("plot", "wealth.png"), ("report", "report.html"))}


def audit_provenance(config, passages: dict[str, list]) -> dict:
    """What an audit's report must name to be checked or redone: the models (spec as given,
    fingerprint and a hub model's snapshot), each input file (sha256 and passage count), access,
    the feature set, the test settings, α, seed, trainspotter version and git commit."""
    from trainspotter.config import file_sha256
    from trainspotter.features.features import FEATURE_SETS

    test = config.test
    return {
        "model": _named(config.model),
        "references": [_named(r) for r in config.reference],
        "inputs": [{"side": side, "path": str(getattr(config, side)), "sha256": file_sha256(getattr(config, side)),
                    "passages": len(passages[getattr(config, side)])} for side in ("suspect", "heldout")],
        "access": config.access,
        "feature_set": next((name for name, f in FEATURE_SETS.items() if f == config.features), "custom"),
        "test": {"preset": config.preset, "strategy": test.strategy, "payoff": test.payoff,
                 "lambda_max": test.lambda_max, "scorer": test.scorer, "oriented": test.oriented,
                 "batch_pairs": config.batch_pairs, "max_pairs": config.max_pairs,
                 "shift_check": config.shift_check, "ledger": config.ledger},
        "alpha": test.alpha, "seed": config.seed, "version": __version__, "git_commit": git_commit(),
    }


def _named(spec) -> dict:
    """A model as the report names it: the spec as given, its fingerprint and, named by hub id,
    the snapshot it resolved to (``ORG/NAME@COMMIT``)."""
    snapshot = spec.snapshot.name if spec.snapshot is not None else None
    return {"spec": spec.text, "fingerprint": spec.fingerprint} | ({"snapshot": snapshot} if snapshot else {})


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def suite_header(config) -> str:
    """A suite's results header: the testbed, the code and the whole config (``out`` left out)."""
    return (f"testbed `{config.testbed}` · git {git_commit()[:12]} · trainspotter {__version__} · "
            f"config {json.dumps(config.model_dump(mode='json', exclude={'out'}), separators=(',', ':'))}")


def log_suite_run(config, res: dict, header: str, files: dict, experiment: str, run_name: str,
                  metrics: dict[str, float], uri: str | None = None) -> dict:
    """Write a suite's summary (``files["summary"]``) and log its config, metrics and every file
    of ``files`` as one MLflow run; returns the summary with the run id and the files' paths."""
    summary = {"header": header, "config": config.model_dump(mode="json")} | res
    files["summary"].write_text(json.dumps(summary, indent=1))
    with mlflow.start_run(experiment_id=use_experiment(experiment, uri), run_name=run_name) as run:
        mlflow.log_params(flatten(config.model_dump(exclude={"out"})))
        mlflow.set_tags({"trainspotter.version": __version__, "git_commit": git_commit()})
        mlflow.log_metrics(metrics)
        for path in files.values():
            mlflow.log_artifact(str(path))
    return summary | {"run_id": run.info.run_id, "files": {k: str(p) for k, p in files.items()}}
