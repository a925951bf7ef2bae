"""Per-sample membership-inference methods as score functions of a features table
(TDDBench App. A.2; EZ-MIA Sec. 4 baselines; BADI Sec. 5.1 baselines, App. B.1–B.2).

Every method maps a features DataFrame (columns as in ``trainspotter.features.catalog.catalog``)
to one score per row, oriented so that **higher = more member-like**. ``METHODS`` holds,
per method, the access level, the feature columns it reads, the score function and the
minimal extraction it needs (``Extraction``), so a benchmark can (a) score every method
from one full features table and (b) time each method on its own minimal extraction.

PETAL reads a separate feature set: black-box columns extracted with
``FeatureConfig(estimator="petal")`` (the reference model as surrogate) and renamed
``black_*`` -> ``petal_*`` by ``as_petal``, so they sit beside the sigmoid-estimated
``black_*`` columns in one table without being mistaken for them.

The aggregated scoring-model methods (``scoring_gray``, ``scoring_black``) are
cross-fitted: a standardised logistic regression fitted on the other folds scores each
fold (stratified K-fold), so no sample is ever scored by a model that saw its label.

The model-based methods (TDDBench App. A.1.3; ``trainspotter.features.model_based``) read
a bank of m reference models, ``Extraction(bank=True)``: per reference j the columns
``bank_ll_<j>`` (the passage's mean token log-likelihood ℓ = −log PPL under reference j) and
``bank_in_<j>`` (1 if reference j trained on the passage, else 0), beside the target's
``gray_ppl``. RMIA (``needs_population``) also takes ``population``: a table with the same
columns whose rows are passages no model trained on.

TDDBench's other algorithms (Table 3, App. A.1): the metric-based ones read the per-passage
criteria of ``trainspotter.features.features.prediction_row`` (and ``black_match_rate`` for
Metric-corr); the learning-based ones (``trainspotter.evaluation.learning_based``) read the
target's prediction vectors and a shadow model's (``shadow_*``, ``Extraction(shadow=True)``).
Every method has a ``paradigm`` (TDDBench's four, or ``llm`` for the language-model attacks)
and, where TDDBench names it, its TDDBench name. Methods that fit something (``fits``) take a
``train`` table (and ``train_labels``) of rows they are not scored on; without one they
cross-fit over folds of the scored rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from trainspotter.errors import InputError
from trainspotter.evaluation import learning_based
from trainspotter.evaluation.method_index import METHOD_INDEX
from trainspotter.evaluation.mia_scores import (  # noqa: F401  (bank_arrays, cross_fit, ... are this module's names too)
    AUGMENT_COLUMNS, BANK_COLUMNS, BANK_IN, BANK_LL, BANK_QLL, NEIGHBOR_COLUMNS, PETAL_PREFIX, QUERY_REF_COLUMNS,
    adv_score, augment_score, bank_arrays, baseline_score, columns_matching, conf_score, corr_score, cross_fit,
    crossfit_folds, ent_score, ez_score, lira_offline_score, lira_online_score, loss_score, ment_score,
    min_k_score, min_kpp_score, model_calibration_score, model_fpr_score, model_loss_score, neighbor_score,
    petal_score, qrm_score, query_ref_score, refl_score, rmia_score, scoring_pipeline, transfer_score,
    zlib_score)
from trainspotter.features.features import FeatureConfig

__all__ = ["Extraction", "Method", "METHODS", "method_scores", "method_columns", "crossfit_folds",
           "cross_fit", "as_petal", "PETAL_PREFIX", "BANK_LL", "BANK_IN", "BANK_QLL", "bank_arrays", "merge_extractions"]



@dataclass(frozen=True)
class Extraction:
    """The least feature extraction a method needs (``trainspotter.features.extract.extract``)."""

    access: Literal["gray", "black"]
    reference: bool = False  # needs the reference model
    perturbations: bool = False  # needs the six perturbed variants
    sequence: bool = False  # needs suffix generation (black-box sequence features)
    estimator: Literal["sigmoid", "petal"] = "sigmoid"  # black-box probability estimator
    bank: bool = False  # needs the reference bank's bank_ll_<j>, bank_in_<j> columns
    shadow: bool = False  # needs the shadow model's (in-0's) shadow_* columns
    bank_queries: bool = False  # needs the bank on the perturbed variants too (bank_qll_<kind>_<j>)
    surrogate: bool = False  # needs the surrogate distilled from the target (transfer_ll), no target extraction
    vectors: bool = False  # needs the prediction vectors (FeatureConfig.prediction_vectors)

    @property
    def uses_bank(self) -> bool:
        """Needs the testbed's reference bank: its columns, or its in-0 as shadow model."""
        return self.bank or self.shadow

    def config(self, base: FeatureConfig | None = None) -> FeatureConfig:
        """``base`` (default: the full set) with only what this extraction needs switched on."""
        base = base or FeatureConfig()
        return base.model_copy(update={"perturbations": base.perturbations and self.perturbations,
                                       "sequence": self.sequence and self.access == "black",
                                       "estimator": self.estimator, "prediction_vectors": self.vectors})


def merge_extractions(needs: list[Extraction]) -> tuple[str, bool, bool, bool, bool] | None:
    """One sigmoid-estimator extraction covering ``needs``: (access, reference,
    perturbations, sequence, prediction vectors), or None if nothing is needed (PETAL's own
    set aside, and the surrogate's, which reads no target feature)."""
    needs = [n for n in needs if n.estimator != "petal" and not n.surrogate]
    if not needs:
        return None
    accesses = {n.access for n in needs}
    access = accesses.pop() if len(accesses) == 1 else "both"
    return (access, any(n.reference for n in needs), any(n.perturbations for n in needs),
            any(n.sequence for n in needs), any(n.vectors for n in needs))


@dataclass(frozen=True)
class Method:
    """One per-sample method: ``score(df, labels, folds, seed, population)`` -> scores,
    higher = member; a ``fits`` method also takes ``train=``, ``train_labels=``."""

    name: str
    label: str  # display name
    access: Literal["gray", "black"]
    columns: tuple[str, ...]  # feature columns read (fnmatch patterns)
    extraction: Extraction
    score: Callable[..., np.ndarray]
    source: str
    needs_labels: bool = False  # cross-fitted: fits on the labels of the other folds
    needs_population: bool = False  # reads ``population``, passages no model trained on
    paradigm: str = "llm"  # TDDBench's metric, learning, model, query; llm: the LM attacks
    tddbench: str | None = None  # TDDBench's name of the algorithm (Table 3)
    fits: bool = False  # fits a model: scores rows it did not fit on (``train``, or cross-fitted)


def method_columns(method: Method, df: pd.DataFrame) -> list[str]:
    """The table's columns matching the method's patterns; InputError if one matches none."""
    return columns_matching(df, method.columns, method.name)


def _learn(inputs: str):
    def score(df, labels=None, folds=5, seed=0, population=None, train=None, train_labels=None) -> np.ndarray:
        if train is not None:
            return learning_based.fit_score(train, df, inputs, seed)
        out = np.full(len(df), np.nan)  # out-of-fold, folds stratified by the shadow's membership
        for tr, te in crossfit_folds(df[learning_based.SHADOW_IN], folds, seed):
            out[te] = learning_based.fit_score(df.iloc[tr], df.iloc[te], inputs, seed)
        return out

    score.__doc__ = (f"Learn-{inputs} (``trainspotter.evaluation.learning_based``): P(member) from TDDBench's "
                     f"auxiliary classifier trained on the shadow model's Learn-{inputs} inputs of ``train`` "
                     f"(else of the other folds) against its known membership.")
    return score


def _scoring(access: str):
    def score(df, labels=None, folds=5, seed=0, population=None, train=None, train_labels=None) -> np.ndarray:
        columns = method_columns(METHODS[f"scoring_{access}"], df)
        if train is None:
            if labels is None:
                raise ValueError(f"scoring_{access} is cross-fitted and needs the labels")
            return cross_fit(df[columns], labels, folds, seed)
        def X(d):  # inf -> NaN, which the pipeline's imputer fills (as cross_fit)
            values = d[columns].to_numpy(dtype=float)
            return np.where(np.isfinite(values), values, np.nan)

        return scoring_pipeline(seed).fit(X(train), np.asarray(train_labels).astype(int)).decision_function(X(df))

    score.__doc__ = (f"The aggregated scoring model on every {access}_* column (BADI Sec. 3, "
                     f"App. A.4, here batch): the logit of ``scoring_pipeline`` fitted on ``train`` "
                     f"(else out-of-fold, ``cross_fit``).")
    return score


def _m(name, label, access, columns, extraction, score, source, needs_labels=False, needs_population=False,
       fits=False) -> Method:
    """A METHODS entry; its paradigm and TDDBench name come from the index (``method_index``)."""
    paradigm, tddbench = METHOD_INDEX[name]
    return Method(name, label, access, tuple(columns), extraction, score, source, needs_labels, needs_population,
                  paradigm, tddbench, fits)


_SHADOW = Extraction("gray", shadow=True, vectors=True)
_LEARN_SOURCE = {"original": "Shokri et al. 2017", "top3": "Salem et al. 2019", "sorted": "Salem et al. 2019",
                 "label": "Nasr et al. 2018", "merge": "Amit et al. 2024"}


_G, _B = "gray", "black"
_BANK = BANK_COLUMNS
METHODS: dict[str, Method] = {m.name: m for m in [
    _m("loss", "LOSS", _G, ["gray_ppl"], Extraction(_G), loss_score, "Yeom et al. 2018"),
    _m("metric_conf", "Metric-conf", _G, ["gray_conf"], Extraction(_G), conf_score, "Song et al. 2019"),
    _m("metric_corr", "Metric-corr", _B, ["black_match_rate"], Extraction(_B), corr_score,
       "Leino & Fredrikson 2020"),
    _m("metric_ent", "Metric-ent", _G, ["gray_ent"], Extraction(_G), ent_score, "Shokri et al. 2017"),
    _m("metric_ment", "Metric-ment", _G, ["gray_ment"], Extraction(_G), ment_score, "Song & Mittal 2021, Eq. 5"),
    *[_m(f"learn_{k}", f"Learn-{k}", _G, cols + [learning_based.SHADOW_PREFIX + c for c in cols]
         + [learning_based.SHADOW_IN], _SHADOW, _learn(k), f"{_LEARN_SOURCE[k]}; TDDBench Sec. 3",
         fits=True) for k, cols in learning_based.INPUTS.items()],
    _m("zlib", "Zlib", _G, ["gray_zlib_ratio"], Extraction(_G), zlib_score, "Carlini et al. 2021"),
    _m("min_k", "Min-K%", _G, ["gray_min_k_20"], Extraction(_G), min_k_score, "Shi et al. 2024"),
    _m("min_kpp", "Min-K%++", _G, ["gray_min_kpp_20"], Extraction(_G), min_kpp_score, "Zhang et al. 2024"),
    _m("refl", "RefL", _G, ["gray_ref_diff"], Extraction(_G, reference=True), refl_score,
       "Carlini et al. 2022; EZ-MIA Sec. 4"),
    _m("neighbor", "Neighbor", _G, NEIGHBOR_COLUMNS, Extraction(_G, perturbations=True),
       neighbor_score, "Mattern et al. 2023"),
    _m("query_augment", "Query-augment", _B, AUGMENT_COLUMNS,
       Extraction(_B, perturbations=True), augment_score, "Choquette-Choo et al. 2021"),
    _m("query_ref", "Query-ref (ours)", _G,
       QUERY_REF_COLUMNS, Extraction(_G, perturbations=True, bank=True, bank_queries=True),
       query_ref_score, "ours, after Wen et al. 2023"),
    _m("query_transfer", "Query-transfer (ours)", _B, ["transfer_ll"], Extraction(_B, surrogate=True),
       transfer_score, "ours, after Li & Zhang 2021", needs_population=True),
    _m("query_adv", "Query-adv (ours)", _G, ["gray_margin"], Extraction(_G), adv_score,
       "ours, after Li & Zhang 2021"),
    _m("query_qrm", "Query-qrm (ours)", _G, ["gray_ppl", "gray_zlib_ratio"], Extraction(_G),
       qrm_score, "ours, after Bertran et al. 2023", needs_population=True),
    _m("ez_mia", "EZ-MIA", _G, ["gray_ez"], Extraction(_G, reference=True), ez_score, "EZ-MIA Sec. 3.4"),
    _m("petal", "PETAL", _B, [f"{PETAL_PREFIX}ppl"], Extraction(_B, reference=True, estimator="petal"),
       petal_score, "He et al. 2025; BADI App. B.2"),
    _m("baseline", "Baseline", _B, ["black_seq_bertscore"], Extraction(_B, sequence=True), baseline_score,
       "BADI Sec. 5.1, App. B.1"),
    _m("scoring_gray", "Scoring model (gray)", _G, ["gray_*"],
       Extraction(_G, reference=True, perturbations=True), _scoring("gray"), "BADI Sec. 3, App. A.4",
       needs_labels=True, fits=True),
    _m("scoring_black", "Scoring model (black)", _B, ["black_*"],
       Extraction(_B, reference=True, perturbations=True, sequence=True), _scoring("black"),
       "BADI Sec. 3, App. A.4", needs_labels=True, fits=True),
    _m("model_loss", "Model-loss", _G, _BANK, Extraction(_G, bank=True), model_loss_score,
       "Sablayrolles et al. 2019; TDDBench App. A.1.3"),
    _m("model_calibration", "Model-calibration", _G, _BANK, Extraction(_G, bank=True), model_calibration_score,
       "Watson et al. 2022; TDDBench App. A.1.3"),
    _m("lira_online", "LiRA (online, global σ)", _G, _BANK, Extraction(_G, bank=True), lira_online_score,
       "Carlini et al. 2022, Eq. 4, Alg. 1"),
    _m("lira_offline", "LiRA (offline, global σ)", _G, _BANK, Extraction(_G, bank=True), lira_offline_score,
       "Carlini et al. 2022, offline LiRA"),
    _m("model_fpr", "Model-FPR", _G, _BANK, Extraction(_G, bank=True), model_fpr_score,
       "Ye et al. 2022, attack R"),
    _m("rmia", "RMIA (Model-robust)", _G, _BANK, Extraction(_G, bank=True), rmia_score,
       "Zarifzadeh et al. 2024", needs_population=True),
]}
if list(METHODS) != list(METHOD_INDEX):  # the light index (--help) names these methods, in this order
    raise RuntimeError(f"evaluation.method_index.METHOD_INDEX lists {list(METHOD_INDEX)}, METHODS {list(METHODS)}")


def method_scores(name: str, df: pd.DataFrame, labels=None, folds: int = 5, seed: int = 0,
                  population: pd.DataFrame | None = None, train: pd.DataFrame | None = None,
                  train_labels=None) -> np.ndarray:
    """Scores of method ``name`` for every row of ``df`` (higher = member). Cross-fitted
    methods need ``labels`` (1 = member); ``needs_population`` methods a ``population``
    table (the others ignore it). ``fits`` methods fit on ``train`` (with ``train_labels``)
    when given instead of cross-fitting over ``df``; the others ignore them."""
    if name not in METHODS:
        raise InputError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    method = METHODS[name]
    extra = {"train": train, "train_labels": train_labels} if method.fits else {}
    return np.asarray(method.score(df, labels, folds, seed, population, **extra), dtype=float)


def as_petal(df: pd.DataFrame) -> pd.DataFrame:
    """Rename the ``black_*`` columns of a PETAL-estimator extraction to ``petal_*``."""
    return df.rename(columns={c: PETAL_PREFIX + c[len("black_"):] for c in df.columns
                              if str(c).startswith("black_")})
