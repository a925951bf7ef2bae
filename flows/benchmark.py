"""The benchmark flow (GitHub issue 6): per-sample MIA methods and DI configurations on a
testbed with known members. One MLflow parent run per flow run (experiment
``benchmark/<testbed>``), one nested child run per method and per DI configuration;
the Markdown table, ROC and power plots and a JSON summary go to the parent run and to
an output folder (default ``benchmarks/results/<testbed>/``). What is measured: see
trainspotter.evaluation.benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
from prefect import flow, get_run_logger

import trainspotter.tasks  # noqa: F401  (configures Prefect/MLflow environment first)
from trainspotter.flows.tracking import git_commit, log_steps, use_experiment
from trainspotter.tasks.benchmark import (build_surrogate_task, evaluate_method_task, fresh_cost_task,
                                         method_costs_task, partition_metrics_task, pvalue_task)
from trainspotter.tasks.extract import extract_chunk
from trainspotter.tasks.simulate import simulate_task
from trainspotter.tasks.testbed import build_references_task, build_testbed_task
from trainspotter import __version__
from trainspotter.backends import load_backend
from trainspotter.evaluation.benchmark import (BANK_FEATURES, SHADOW_FEATURES, BenchmarkConfig, bank_columns,
                                               bank_features, bank_models, extraction_plan, mia_rows, shadow_model,
                                               split_passages, store_table)
from trainspotter.evaluation.learning_based import shadow_columns
from trainspotter.evaluation.benchmark_cost import cost_subsample
from trainspotter.evaluation.benchmark_di import (best_valid, compare_configurations, di_configs, di_frame, di_row,
                                                  pvalue_row)
from trainspotter.evaluation.benchmark_tables import header_line, render_markdown
from trainspotter.config import artifacts_root, flatten
from trainspotter.errors import InputError
from trainspotter.evaluation.mia import METHODS, as_petal
from trainspotter.evaluation.tddbench import partitions, render_tddbench, summarise
from trainspotter.report import benchmark_html, power_plot, roc_plot
from trainspotter.evaluation.testbed import PRESETS

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"  # the repository's folder


def _extract(passages, model, reference, access, features, chunk_size) -> pd.DataFrame:
    """Cached chunks (data + models' weights + config + library version key each one)."""
    rows = [row for k in range(0, len(passages), chunk_size)
            for row in extract_chunk(passages[k:k + chunk_size], model, reference, access, features,
                                     chunk=k // chunk_size)]
    return pd.DataFrame(rows).drop(columns=["id", "set"], errors="ignore")


def _uses(config: BenchmarkConfig, what: str) -> bool:
    """Whether a selected method's extraction has ``what`` (an ``Extraction`` flag)."""
    return any(getattr(METHODS[m].extraction, what) for m in config.methods)


def _bank(config: BenchmarkConfig) -> list[tuple[str, frozenset[str]]]:
    """The model-based methods' reference bank, whose in-0 is the learning-based methods'
    shadow model (built if needed), or [] when neither is selected."""
    if not _uses(config, "uses_bank"):
        return []
    build_references_task(PRESETS[config.testbed], config.reference_models)
    return bank_models(config.testbed, config.reference_models)


def features_table(config: BenchmarkConfig, bank: list[tuple[str, frozenset[str]]] | None = None) -> pd.DataFrame:
    """id, split and every feature the selected methods and DI accesses need
    (``extraction_plan``), one cached extraction per planned pass and split; with a reference
    bank (``_bank``, built here unless given), each bank model's ``bank_ll_<j>``/``bank_in_<j>``
    and, for the learning-based methods, the shadow model's ``shadow_*`` columns; for
    Query-transfer, ``transfer_ll`` under the surrogate distilled on the held-out passages."""
    target, references = f"testbed:{config.testbed}", config.references
    splits, plan = extraction_plan(config)
    bank = _bank(config) if bank is None else bank
    surrogate = None
    if _uses(config, "surrogate"):
        texts = [p["text"] for p in split_passages(config.testbed, "heldout", config.limit)]
        surrogate = "hf:" + build_surrogate_task(target, references[0], texts, config.seed)
    parts = []
    for split in splits:
        ps = split_passages(config.testbed, split, config.limit)
        part = [pd.DataFrame({"id": [p["id"] for p in ps], "split": split})]
        for access, with_reference, features, petal in plan:
            df = _extract(ps, target, references if with_reference else (), access, features, config.chunk_size)
            part.append(as_petal(df) if petal else df)
        ids = [p["id"] for p in ps]
        if bank and _uses(config, "bank"):
            features = bank_features(config.features if _uses(config, "bank_queries") else None)
            tables = [_extract(ps, spec, (), "gray", features, config.chunk_size) for spec, _ in bank]
            part.append(bank_columns(ids, [t["gray_ppl"] for t in tables], bank, tables))
        if bank and _uses(config, "shadow"):
            spec, seen = shadow_model(bank)
            part.append(shadow_columns(_extract(ps, spec, (), "gray", SHADOW_FEATURES, config.chunk_size), ids, seen))
        if surrogate:
            ppl = _extract(ps, surrogate, (), "gray", BANK_FEATURES, config.chunk_size)["gray_ppl"]
            part.append(pd.DataFrame({"transfer_ll": -np.log(ppl.to_numpy(dtype=float))}))
        parts.append(pd.concat(part, axis=1))
    return pd.concat(parts, ignore_index=True)


def _log_metrics(values: dict) -> None:
    mlflow.log_metrics({k: float(v) for k, v in values.items()
                        if isinstance(v, (int, float)) and v is not None and np.isfinite(v)})


def _methods(config, table, bank, experiment, logger) -> tuple[list[dict], dict]:
    """Per-sample: members (1) vs non-members (0), every selected method scored from the one
    table; cost on a seeded subsample (half members); one child run per method."""
    mia, labels = mia_rows(table)
    population = table[table["split"] == "heldout"].reset_index(drop=True)
    costs: dict[str, dict] = {}
    if config.cost_samples:
        sub, sub_labels, pop = cost_subsample(config)
        costs = method_costs_task(list(config.methods), sub, sub_labels, f"testbed:{config.testbed}",
                                  config.references, config.features, config.folds, config.seed,
                                  config.cost_repeats, bank, pop)
    rows, curves = [], {}
    for name in config.methods:
        method = METHODS[name]
        res = evaluate_method_task(name, mia, labels, config.folds, config.seed, config.n_boot,
                                   population if method.needs_population else None)
        with mlflow.start_run(experiment_id=experiment, run_name=f"method/{name}", nested=True) as child:
            mlflow.log_params({"kind": "method", "method": name, "access": method.access,
                               "columns": ",".join(method.columns), "source": method.source,
                               **{f"extraction.{k}": v for k, v in vars(method.extraction).items()}})
            _log_metrics(res["metrics"] | costs.get(name, {}))
        curves[method.label] = (res["fpr"], res["tpr"])
        rows.append({"method": name, "label": method.label, "access": method.access,
                     "run_id": child.info.run_id, "metrics": res["metrics"], "cost": costs.get(name)})
        logger.info("%s: AUROC %.3f", name, res["metrics"]["auroc"])
    return rows, curves


PAPER = "ons/mmd"  # BADI's configuration, the baseline every saving is measured against


def _di(config, table, experiment, logger) -> tuple[list[dict], dict]:
    """Per access: the sequential test's TPR (members vs held-out) and FPR (non-members vs
    held-out) of every strategy × payoff at every α from one Monte Carlo pass per side, and
    the fixed-n p-value baseline; one child run each."""
    folder = artifacts_root() / "benchmark" / config.testbed
    tests = di_configs(config)
    rows, power = [], {}
    for access in config.di_access:
        pos = store_table(di_frame(table, "member", access), folder)
        neg = store_table(di_frame(table, "nonmember", access), folder)
        tprs = simulate_task(pos, tests, config.trials, config.n_max, False, config.seed, config.alphas)
        fprs = simulate_task(neg, tests, config.null_trials or config.trials, config.n_max, False, config.seed,
                             config.alphas)
        for test, tpr, fpr in zip(tests, tprs, fprs):
            for alpha in config.alphas:
                rows.append(di_row(access, test, alpha, tpr, fpr))
                power.setdefault((access, alpha), {})[rows[-1]["test"]] = tpr["by_alpha"][str(alpha)]["power_curve"]
        pv_pos = pvalue_task(pos, config.trials, config.n_max, list(config.alphas), config.seed)
        pv_neg = pvalue_task(neg, config.null_trials or config.trials, config.n_max, list(config.alphas), config.seed)
        rows += [pvalue_row(access, alpha, pv_pos, pv_neg) for alpha in config.alphas]
        logger.info("DI %s-box: %d sequential configurations × %d levels + the p-value baseline", access,
                    len(tests), len(config.alphas))
    compare_configurations(rows, PAPER, seed=config.seed)
    for row in rows:
        row.pop("stop_times", None)  # per-trial detail: used for the paired savings, not stored
        label = f"di/{row['access']}/{row['test']}/a={row['alpha']:g}"
        with mlflow.start_run(experiment_id=experiment, run_name=label, nested=True) as child:
            mlflow.log_params({"kind": "di" if row["payoff"] else "di-pvalue", "access": row["access"],
                               "test": row["test"], "alpha": row["alpha"], "trials": row["trials"],
                               "null_trials": row["null_trials"], "n_max": config.n_max})
            _log_metrics({k: row.get(k) for k in ("tpr", "fpr", "fpr_binom_p", "mean_pairs", "mean_stop",
                                                  "std_stop", "saving", "pairs", "trials")})
            if row["payoff"]:
                log_steps(child.info.run_id, {"power": power[(row["access"], row["alpha"])][row["test"]]})
        row["run_id"] = child.info.run_id
    return rows, power


def benchmark_report_html(files: dict[str, Path]) -> str:
    """The benchmark's HTML page from its Markdown table and PNG figures."""
    figures = [(path.stem.replace("_", " "), path.read_bytes()) for path in files.values()
               if path.suffix == ".png"]
    return benchmark_html(files["table"].read_text(), figures)


def _prepare(config: BenchmarkConfig) -> tuple[list[tuple[str, frozenset[str]]], pd.DataFrame, Path, str]:
    """What both benchmark flows start from: the testbed (built if needed), the reference bank
    (built once, read by the extraction and the cost), the features table (cached), the
    output folder (created) and the target's device."""
    if config.testbed not in PRESETS:
        raise InputError(f"unknown testbed {config.testbed!r}; choose from {', '.join(PRESETS)}")
    build_testbed_task(PRESETS[config.testbed])
    bank = _bank(config)
    table = features_table(config, bank)
    out = Path(config.out) if config.out else RESULTS / config.testbed
    out.mkdir(parents=True, exist_ok=True)
    return bank, table, out, str(getattr(load_backend(f"testbed:{config.testbed}"), "device", "cpu"))


def _log_parent(config: BenchmarkConfig, device: str) -> None:
    """The parent run's parameters (the whole configuration) and tags."""
    mlflow.log_params(flatten(config.model_dump(exclude={"out"})))
    mlflow.set_tags({"trainspotter.version": __version__, "git_commit": git_commit(), "device": device})


@flow(name="benchmark")
def benchmark_flow(config: BenchmarkConfig, tracking_uri: str | None = None) -> dict:
    """Build/load the testbed, extract (cached), score and time every method, run the DI
    configurations, log everything to MLflow and write the report folder."""
    logger = get_run_logger()
    bank, table, out, device = _prepare(config)
    header = header_line(config, git_commit(), device)
    experiment = use_experiment(f"benchmark/{config.testbed}", tracking_uri)
    with mlflow.start_run(experiment_id=experiment, run_name="benchmark") as parent:
        _log_parent(config, device)
        methods, curves = _methods(config, table, bank, experiment, logger)
        di, power = _di(config, table, experiment, logger)
        n1 = int((table["split"] == "member").sum())
        n0 = int((table["split"] == "nonmember").sum())
        files = {"table": out / "benchmark.md", "roc": out / "roc.png", "summary": out / "results.json"}
        best = [b for b in (best_valid(di, alpha) for alpha in config.alphas) if b is not None]
        files["table"].write_text(render_markdown(f"Benchmark: testbed `{config.testbed}`", header, methods, di,
                                                  best))
        roc_plot(curves, files["roc"], title=f"ROC, {n1} members vs {n0} non-members ({config.testbed})",
                 n_nonmembers=n0, n_members=n1)
        for (access, alpha), curve in power.items():  # one plot per access and α
            files[f"power_{access}_a{alpha:g}"] = power_plot(
                curve, out / f"power_{access}_a{alpha:g}.png",
                title=f"Sequential power, {access}-box features, α = {alpha:g} (members vs held-out)")
        summary = {"header": header, "config": config.model_dump(mode="json"), "parent_run_id": parent.info.run_id,
                   "methods": methods, "di": di, "best_valid": best}
        files["summary"].write_text(json.dumps(summary, indent=1, default=str))
        files["report"] = out / "report.html"
        files["report"].write_text(benchmark_report_html(files), encoding="utf-8")
        for path in files.values():
            mlflow.log_artifact(str(path))
    return summary | {"out": str(out), "files": {k: str(v) for k, v in files.items()}}


@flow(name="tddbench")
def tddbench_flow(config: BenchmarkConfig, tracking_uri: str | None = None) -> dict:
    """TDDBench's protocol (trainspotter.evaluation.tddbench): every method over
    ``config.partitions`` random partitions of the candidates (mean ± std of the ten metrics),
    its cost in a fresh process per method, one table per paradigm; an MLflow parent run
    (experiment ``tddbench/<testbed>``) with a child run per method; ``tddbench.md`` and
    ``tddbench.json`` in the output folder."""
    logger = get_run_logger()
    bank, table, out, device = _prepare(config)
    mia, labels = mia_rows(table)
    population = table[table["split"] == "heldout"].reset_index(drop=True)
    parts = partitions(labels, config.partitions, config.seed)
    header = header_line(config, git_commit(), device)
    sub, sub_labels, pop = cost_subsample(config) if config.cost_samples else ([], [], [])
    experiment = use_experiment(f"tddbench/{config.testbed}", tracking_uri)
    rows = []
    with mlflow.start_run(experiment_id=experiment, run_name="tddbench") as parent:
        _log_parent(config, device)
        for name in config.methods:
            method = METHODS[name]
            per = partition_metrics_task(name, mia, labels, parts, config.folds, config.seed,
                                         population if method.needs_population else None)
            summary = summarise(per)
            cost = None
            if config.cost_samples:
                cost = fresh_cost_task(name, sub, sub_labels, f"testbed:{config.testbed}", config.references,
                                       config.features, config.folds, config.seed, config.cost_repeats, bank,
                                       pop if method.needs_population else [])
            with mlflow.start_run(experiment_id=experiment, run_name=f"method/{name}", nested=True) as child:
                mlflow.log_params({"kind": "method", "method": name, "paradigm": method.paradigm,
                                   "tddbench": method.tddbench or "", "access": method.access})
                _log_metrics({f"{k}_{stat}": v[stat] for k, v in summary.items() for stat in ("mean", "std")}
                             | (cost or {}))
            rows.append({"method": name, "label": method.label, "tddbench": method.tddbench,
                         "paradigm": method.paradigm, "access": method.access, "run_id": child.info.run_id,
                         "summary": summary, "partitions": per, "cost": cost})
            logger.info("%s: AUROC %.3f ± %.3f", name, summary["auroc"]["mean"], summary["auroc"]["std"])
        members = int(np.asarray(labels)[parts[0][0]].sum())
        n_eval = (members, len(parts[0][0]) - members)
        files = {"table": out / "tddbench.md", "summary": out / "tddbench.json"}
        files["table"].write_text(render_tddbench(f"TDDBench protocol: testbed `{config.testbed}`", header, rows,
                                                  config.partitions, n_eval))
        summary = {"header": header, "config": config.model_dump(mode="json"), "parent_run_id": parent.info.run_id,
                   "partitions": [e.tolist() for e, _ in parts],  # evaluation rows of "ids"; the rest trained
                   "ids": mia["id"].tolist(), "methods": rows}
        files["summary"].write_text(json.dumps(summary, indent=1, default=str))
        for path in files.values():
            mlflow.log_artifact(str(path))
    return summary | {"out": str(out), "files": {k: str(v) for k, v in files.items()}}
