"""The benchmark of per-sample MIA methods and dataset-inference configurations on a
testbed with known members (TDDBench Sec. 3.1, 3.5, App. A.2, A.6; EZ-MIA Sec. 4–5;
BADI Sec. 5.1, App. D). Library side; the flow (flows/benchmark.py) orchestrates.

What is measured:

- **per-sample** (members = 1 vs non-members = 0): ``trainspotter.evaluation.metrics.method_metrics``
  of each method's scores (``trainspotter.evaluation.mia``), all methods scored from one
  table (here, with the configuration and what to extract);
- **cost** (TDDBench Sec. 3.5): time and working memory of each method
  (``trainspotter.evaluation.benchmark_cost``);
- **dataset inference**: the sequential test's Monte Carlo TPR, negative-control FPR and
  stopping times, and the fixed-n p-value baseline (``trainspotter.evaluation.benchmark_di``).

The tables: ``trainspotter.evaluation.benchmark_tables``.
"""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, field_validator, model_validator

from trainspotter.data import load_passages
from trainspotter.errors import FieldError, InputError
from trainspotter.evaluation.metrics import method_metrics, roc
from trainspotter.evaluation.mia import BANK_IN, BANK_LL, BANK_QLL, METHODS, Extraction, merge_extractions, method_scores
from trainspotter.features.features import FEATURE_SETS, FeatureConfig
from trainspotter.presets import check_testbed
from trainspotter.stats.payoffs import PAYOFFS
from trainspotter.stats.strategies import STRATEGIES

__all__ = ["BenchmarkConfig", "DI_ACCESS", "SPLITS", "config_passages", "dataset_method", "split_passages",
           "extraction_plan", "store_table",
           "mia_rows", "evaluate_method", "bank_models", "bank_columns", "BANK_FEATURES", "SHADOW_FEATURES",
           "bank_features", "shadow_model"]

DI_ACCESS = ("gray", "black")
SPLITS = ("member", "nonmember", "heldout")


class BenchmarkConfig(BaseModel):
    """One benchmark run; the defaults are the full benchmark."""

    testbed: str = "tiny"
    # default: every method the testbed's models allow (model- and learning-based need reference_models)
    methods: tuple[str, ...] = tuple(METHODS)
    # The reference models of the reference features (RefL, EZ, with two or more the *_refs_*
    # ones): model specs; () = the testbed's own reference, testbed:NAME/reference.
    reference: tuple[str, ...] = ()
    # The model-based methods' bank: the testbed's first k OUT and k IN reference models
    # (trainspotter.testbeds.reference_models; pre-training testbeds); 0 = none.
    reference_models: int = Field(0, ge=0)
    trials: int = Field(200, ge=1)  # Monte Carlo trials per DI configuration (BADI: 1000)
    null_trials: int | None = Field(None, ge=1)  # negative-control (FPR) trials; None = trials
    n_max: int | None = Field(None, ge=4)  # pairs per trial; None = all available
    alphas: tuple[float, ...] = (0.05, 0.01)
    strategies: tuple[str, ...] = STRATEGIES
    payoffs: tuple[str, ...] = PAYOFFS
    di_access: tuple[str, ...] = DI_ACCESS  # () = no DI configurations
    lambda_max: float = Field(0.8, gt=0.0, lt=1.0)
    limit: int | None = Field(None, ge=4)  # passages per split (first ones); None = all
    n_boot: int = Field(1000, ge=0)
    folds: int = Field(5, ge=2)  # cross-fitting of the scoring-model methods
    cost_samples: int = Field(32, ge=0)  # subsample for time/memory (half members); 0 = skip
    cost_repeats: int = Field(3, ge=1)  # interleaved timing rounds; the fastest counts
    partitions: int = Field(5, ge=2)  # --suite tddbench: random partitions (trainspotter.evaluation.tddbench)
    chunk_size: int = Field(64, ge=1)  # passages per cached extraction task
    seed: int = 0
    features: FeatureConfig = FeatureConfig()
    out: str | None = None  # default $TRAINSPOTTER_ARTIFACTS/benchmark-results/<testbed>/ (flows/benchmark.default_out)
    # A published membership benchmark instead of a testbed (trainspotter.evaluation.benchmark_dataset):
    # hf:ORG/NAME[:CONFIG][/SPLIT][@REVISION], its members and non-members, scored by ``model``.
    dataset: str | None = None
    model: str | None = None  # the target with ``dataset`` (a testbed's own otherwise)
    text_column: str | None = None
    label_column: str | None = None

    @field_validator("testbed")
    @classmethod
    def _testbed(cls, v):
        return check_testbed(v)

    @field_validator("methods")
    @classmethod
    def _methods(cls, v):
        bad = [m for m in v if m not in METHODS]
        if bad or not v:
            raise ValueError(f"unknown method(s) {', '.join(map(repr, bad)) or '(none given)'}; "
                             f"choose from {', '.join(METHODS)}")
        return tuple(dict.fromkeys(v))

    @field_validator("strategies", "payoffs", "di_access")
    @classmethod
    def _subset(cls, v, info):
        allowed, what = {"strategies": (STRATEGIES, "strategy"), "payoffs": (PAYOFFS, "payoff"),
                         "di_access": (DI_ACCESS, "access")}[info.field_name]
        bad = [x for x in v if x not in allowed]
        if bad:
            raise ValueError(f"unknown {what}(s) {', '.join(map(repr, bad))}; choose from {', '.join(allowed)}")
        return tuple(dict.fromkeys(v))

    @field_validator("alphas")
    @classmethod
    def _alphas(cls, v):
        if not v or any(not 0 < a < 1 for a in v):
            raise ValueError("alphas must lie in (0, 1)")
        return tuple(dict.fromkeys(v))

    @field_validator("cost_samples")
    @classmethod
    def _cost(cls, v):
        if 0 < v < 4:
            raise ValueError("cost_samples: 0 (skip) or at least 4 (2 members + 2 non-members)")
        return v

    @model_validator(mode="after")
    def _dataset(self):
        """With ``dataset``: a ``model`` to score, no DI (no held-out passages) and only the methods
        that need the target alone, or with ``reference`` a reference model too."""
        if self.dataset is None:
            for name in ("model", "text_column", "label_column"):
                if getattr(self, name) is not None:
                    raise FieldError(name, "applies to a benchmark of a dataset (--dataset hf:ORG/NAME...)")
            return self
        if self.model is None:
            raise FieldError("model", "missing: the target model that scores the dataset's members and non-members")
        if self.di_access and "di_access" in self.model_fields_set:
            raise FieldError("di_access", "dataset inference needs held-out passages, which a dataset of members "
                                          "and non-members lacks; give none")
        if self.reference_models:
            raise FieldError("reference_models", "the reference bank is a testbed's; a dataset has none")
        self.di_access = ()
        unfit = [m for m in self.methods if not dataset_method(m, bool(self.reference))]
        if unfit and "methods" in self.model_fields_set:
            fit = ", ".join(m for m in METHODS if dataset_method(m, bool(self.reference)))
            raise FieldError("methods", f"{', '.join(unfit)} need a testbed (a reference bank, a population or a "
                                        f"surrogate) or a --reference model; on a dataset choose from {fit}")
        self.methods = tuple(m for m in self.methods if m not in unfit)
        return self

    @model_validator(mode="after")
    def _bank(self):
        """Without a reference bank the default is every other method; asking for a
        model-based or learning-based one (whose shadow model is the bank's in-0) then is an
        error naming the option."""
        banked = [m for m in self.methods if METHODS[m].extraction.uses_bank]
        if banked and not self.reference_models:
            if "methods" in self.model_fields_set:
                raise ValueError(f"method(s) {', '.join(banked)} need reference models: set reference_models "
                                 f"(--reference-models K: the testbed's K OUT and K IN models)")
            self.methods = tuple(m for m in self.methods if m not in banked)
        return self

    @property
    def references(self) -> tuple[str, ...]:
        """The reference model specs of the reference features (a dataset's: those given)."""
        return self.reference or (() if self.dataset else (f"testbed:{self.testbed}/reference",))

    @property
    def target(self) -> str:
        """The model scored: ``model`` on a dataset, else the testbed's target."""
        return self.model if self.dataset else f"testbed:{self.testbed}"

    @property
    def subject(self) -> str:
        """What is benchmarked, in a path or an experiment name: the testbed, or ``datasets/ORG_NAME_…``."""
        if self.dataset is None:
            return self.testbed
        return "datasets/" + re.sub(r"[^A-Za-z0-9._-]+", "_", self.dataset.removeprefix("hf:")).strip("_")


def dataset_method(name: str, reference: bool) -> bool:
    """Whether method ``name`` runs on a dataset's members and non-members: it reads only the target
    (and the reference, where one is given), no bank, population or surrogate."""
    m = METHODS[name]
    e = m.extraction
    return not (e.uses_bank or e.surrogate or m.needs_population or (e.reference and not reference)
                or (e.estimator == "petal" and not reference))


def config_passages(config: BenchmarkConfig, split: str) -> list[dict]:
    """The first ``limit`` passages of one split: the testbed's (``split_passages``) or the dataset's
    (``benchmark_dataset.dataset_splits``: member and nonmember)."""
    if config.dataset is None:
        return split_passages(config.testbed, split, config.limit)
    from trainspotter.evaluation.benchmark_dataset import dataset_splits

    return dataset_splits(config.dataset, config.text_column, config.label_column)[0][split][:config.limit]


# ---------------------------------------------------------------- what to extract

def split_passages(testbed: str, split: str, limit: int | None = None) -> list[dict]:
    """The first ``limit`` passages of one testbed split, as {id, text}."""
    from trainspotter.testbeds.build import split_path

    return [{"id": p["id"], "text": p["text"]} for p in load_passages(split_path(testbed, split))[:limit]]


def extraction_plan(config: BenchmarkConfig) -> tuple[tuple[str, ...], list[tuple[str, bool, FeatureConfig, bool]]]:
    """The splits to extract and the extractions that cover every selected method and DI
    access, each (access, with reference, feature config, rename to petal_*): one
    sigmoid-estimator extraction for all of them, plus a PETAL-estimator one when PETAL
    is selected. Held-out passages matter to DI and are RMIA's population."""
    needs = [METHODS[m].extraction for m in config.methods]
    needs += [Extraction(a, reference=True, perturbations=True, sequence=a == "black") for a in config.di_access]
    main = merge_extractions(needs)
    petal = next((n for n in needs if n.estimator == "petal"), None)
    plan = []
    if main is not None:
        access, ref, pert, seq, vectors = main
        plan.append((access, ref, config.features.model_copy(
            update={"perturbations": config.features.perturbations and pert, "sequence": seq,
                    "prediction_vectors": vectors}), False))
    if petal is not None:
        plan.append(("black", True, petal.config(config.features), True))
    population = any(METHODS[m].needs_population for m in config.methods)
    return (SPLITS if config.di_access or population else SPLITS[:2]), plan


# The bank models' extraction: the mean token log-likelihood ℓ = −log gray_ppl is all the
# model-based methods read; one forward pass per passage and model.
BANK_FEATURES = FEATURE_SETS["lean"]


# The shadow model's extraction (learning-based methods): its prediction vectors and criteria.
SHADOW_FEATURES = BANK_FEATURES.model_copy(update={"metric_criteria": True, "prediction_vectors": True})


def shadow_model(bank: list[tuple[str, frozenset[str]]]) -> tuple[str, frozenset[str]]:
    """The learning-based methods' shadow model: the bank's first IN model, ``in-0``."""
    return bank[len(bank) // 2]


def bank_models(testbed: str, k: int) -> list[tuple[str, frozenset[str]]]:
    """The reference bank of the model-based methods: (model spec, ids of the candidates it
    trained on) of the testbed's ``out-0..out-(k-1)`` then ``in-0..in-(k-1)``; bank index j
    is the position in this list. InputError naming the build command when one is missing."""
    from trainspotter.testbeds.reference_models import KINDS, load_reference_manifest

    models = (load_reference_manifest(testbed) or {}).get("models", {})
    bank = []
    for kind in KINDS:
        for i in range(k):
            entry = models.get(f"{kind}-{i}")
            if entry is None:
                raise InputError(f"testbed {testbed!r}: reference model {kind}-{i} is not built; run "
                                 f"`trainspotter testbed build {testbed} --references {k}`")
            bank.append((f"testbed:{testbed}/{kind}-{i}", frozenset(entry.get("candidates_in", ()))))
    return bank


def bank_features(features: FeatureConfig | None = None) -> FeatureConfig:
    """What each bank model extracts: ``BANK_FEATURES``, plus the perturbed variants of
    ``features``' kinds when given (Query-ref reads the bank on them)."""
    if features is None or not features.perturbations:
        return BANK_FEATURES
    return BANK_FEATURES.model_copy(update={"perturbations": True, "perturbation_kinds": features.perturbation_kinds})


def bank_columns(ids: list[str], bank_ppl: list[np.ndarray], bank: list[tuple[str, frozenset[str]]],
                 bank_tables: list[pd.DataFrame] | None = None) -> pd.DataFrame:
    """``bank_ll_<j>`` = −log PPL of each passage under bank model j and ``bank_in_<j>`` = 1
    where model j trained on it (the columns ``trainspotter.evaluation.mia`` reads); with each
    model's extraction ``bank_tables`` holding ``gray_pert_diff_<kind>``, also
    ``bank_qll_<kind>_<j>`` = ℓ of the perturbed variant under model j (Query-ref)."""
    cols = {}
    for j, (ppl, (_, seen)) in enumerate(zip(bank_ppl, bank)):
        cols[f"{BANK_LL}{j}"] = -np.log(np.asarray(ppl, dtype=float))
        cols[f"{BANK_IN}{j}"] = np.array([int(i in seen) for i in ids])
        for c in (bank_tables[j].columns if bank_tables else ()):
            if str(c).startswith("gray_pert_diff_"):
                kind = str(c).removeprefix("gray_pert_diff_")
                cols[f"{BANK_QLL}{kind}_{j}"] = cols[f"{BANK_LL}{j}"] - bank_tables[j][c].to_numpy(dtype=float)
    return pd.DataFrame(cols)


def store_table(df: pd.DataFrame, folder: Path) -> str:
    """Write a table under a name from its content (tasks that key on the file's bytes
    then hit their cache for an unchanged table)."""
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    data = buf.getvalue()
    path = Path(folder) / f"{hashlib.sha256(data).hexdigest()[:16]}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_bytes(data)
    return str(path)


# ---------------------------------------------------------------- per-sample methods

def mia_rows(table: pd.DataFrame) -> tuple[pd.DataFrame, list[int]]:
    """The member (label 1) and non-member (label 0) rows of the features table."""
    mia = table[table["split"].isin(["member", "nonmember"])].reset_index(drop=True)
    return mia, (mia["split"] == "member").astype(int).tolist()


def evaluate_method(name: str, df: pd.DataFrame, labels, folds: int = 5, seed: int = 0,
                    n_boot: int = 1000, population: pd.DataFrame | None = None) -> dict:
    """Scores of one method on the member/non-member rows of ``df`` -> ``method_metrics``
    and the ROC points ({"metrics", "fpr", "tpr", "scores"}). ``population``: passages no
    model trained on (RMIA's; the held-out rows)."""
    scores = method_scores(name, df, labels, folds, seed, population=population)
    bad = int((~np.isfinite(scores)).sum())
    if bad:
        raise ValueError(f"method {name!r}: {bad} of {len(scores)} scores are NaN or infinite "
                         f"(a feature column of {', '.join(METHODS[name].columns)} is missing values)")
    fpr, tpr, _ = roc(labels, scores)
    return {"metrics": method_metrics(labels, scores, n_boot=n_boot, seed=seed),
            "fpr": fpr.tolist(), "tpr": tpr.tolist(), "scores": scores.tolist()}
