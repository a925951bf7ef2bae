"""Benchmark steps as tasks: method metrics (once, or over TDDBench's partitions), method
cost (in this process, or in a fresh one per method), the fixed-n p-value baseline.
(Extraction reuses tasks.extract.extract_chunk, the DI Monte Carlo tasks.simulate.simulate_task.)"""

import hashlib
from pathlib import Path

import pandas as pd
from prefect import task
from prefect.cache_policies import NONE

from trainspotter.backends import load_backend
from trainspotter.evaluation.benchmark import evaluate_method
from trainspotter.evaluation.benchmark_cost import fresh_process_cost, method_costs
from trainspotter.evaluation.tddbench import partition_metrics
from trainspotter.evaluation.benchmark_di import pvalue_baseline
from trainspotter.config import code_digest, fingerprint
from trainspotter.data import read_features
from trainspotter.features.features import FeatureConfig


@task(cache_policy=NONE, task_run_name="method[{name}]")
def evaluate_method_task(name: str, df: pd.DataFrame, labels: list[int], folds: int, seed: int,
                         n_boot: int, population: pd.DataFrame | None = None) -> dict:
    return evaluate_method(name, df, labels, folds=folds, seed=seed, n_boot=n_boot, population=population)


@task(cache_policy=NONE, task_run_name="cost")  # timings are measured, never cached
def method_costs_task(names: list[str], passages: list[dict], labels: list[int], model: str,
                      references: tuple[str, ...], features: FeatureConfig, folds: int, seed: int, repeats: int,
                      bank: list[tuple[str, frozenset[str]]], population: list[dict]) -> dict[str, dict]:
    return method_costs(names, passages, labels, load_backend(model), [load_backend(r) for r in references],
                        features, folds=folds, seed=seed, repeats=repeats,
                        bank=[(load_backend(spec), seen) for spec, seen in bank], population=population)


@task(cache_policy=NONE, task_run_name="surrogate")  # build_surrogate keeps it on disk under its own key
def build_surrogate_task(model: str, student: str, texts: list[str], seed: int) -> str:
    from trainspotter.backends import resolve_spec
    from trainspotter.config import artifacts_root
    from trainspotter.evaluation.query_based import build_surrogate

    return str(build_surrogate(load_backend(model), resolve_spec(student), texts, artifacts_root() / "surrogates",
                               seed=seed))


@task(cache_policy=NONE, task_run_name="partitions[{name}]")
def partition_metrics_task(name: str, df: pd.DataFrame, labels: list[int], parts: list, folds: int, seed: int,
                           population: pd.DataFrame | None = None) -> list[dict]:
    return partition_metrics(name, df, labels, parts, folds=folds, seed=seed, population=population)


@task(cache_policy=NONE, task_run_name="fresh-cost[{name}]")  # timings are measured, never cached
def fresh_cost_task(name: str, passages: list[dict], labels: list[int], model: str, references: tuple[str, ...],
                    features: FeatureConfig, folds: int, seed: int, repeats: int,
                    bank: list[tuple[str, frozenset[str]]], population: list[dict]) -> dict:
    return fresh_process_cost(name, passages, labels, model, list(references), features, folds=folds, seed=seed,
                              repeats=repeats, bank=bank, population=population)


# pvalue_baseline (evaluation.benchmark_di) over di_pvalue (stats.pvalue) and split_features (data).
PVALUE_CODE = ("trainspotter.stats.pvalue", "trainspotter.evaluation.benchmark_di", "trainspotter.data")


def pvalue_cache_key(context, parameters) -> str:
    """The table's content, the trial settings and the code digest."""
    data = hashlib.sha256(Path(parameters["features"]).read_bytes()).hexdigest()
    return "di-pvalue-" + fingerprint(code_digest(*PVALUE_CODE), data,
                                      {k: parameters[k] for k in ("trials", "n_max", "alphas", "seed")})


@task(cache_key_fn=pvalue_cache_key, persist_result=True, task_run_name="di-pvalue[{trials}]")
def pvalue_task(features: str, trials: int, n_max: int | None, alphas: list[float], seed: int) -> dict:
    return pvalue_baseline(read_features(features), trials, n_max, alphas, seed)


@task(cache_policy=NONE, task_run_name="twins-suite[{trials}]")  # seconds of Monte Carlo: not worth a cache
def twins_suite_task(V1, V0, H, public1, public0, columns: list[str], trials: int, alpha: float, seed: int) -> dict:
    from trainspotter.evaluation.twins_suite import run_suite

    return run_suite(V1, V0, H, public1, public0, columns, trials, alpha, seed)


@task(cache_policy=NONE, task_run_name="keyed-suite[{config.testbed}]")  # model answers sampled anew: no cache
def keyed_suite_task(config, folder: str) -> dict:
    from trainspotter.evaluation.keyed_suite_report import run_suite
    from trainspotter.tasks.progress import step

    return run_suite(config, Path(folder), progress=step)
