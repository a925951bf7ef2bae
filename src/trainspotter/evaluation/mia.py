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

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from trainspotter.errors import InputError
from trainspotter.evaluation import learning_based
from trainspotter.features import model_based
from trainspotter.features.features import FeatureConfig

__all__ = ["Extraction", "Method", "METHODS", "method_scores", "method_columns", "crossfit_folds",
           "cross_fit", "as_petal", "PETAL_PREFIX", "BANK_LL", "BANK_IN", "BANK_QLL", "bank_arrays", "merge_extractions"]

PETAL_PREFIX = "petal_"
BANK_LL, BANK_IN = "bank_ll_", "bank_in_"  # + the reference model's index j
BANK_QLL = "bank_qll_"  # + <kind>_<j>: ℓ of the <kind> perturbed variant under reference j


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
    out: list[str] = []
    for pattern in method.columns:
        hit = [c for c in df.columns if fnmatch.fnmatchcase(str(c), pattern)]
        if not hit:
            raise InputError(f"method {method.name!r} needs feature column(s) {pattern!r}, "
                             f"which the features table lacks")
        out += [c for c in hit if c not in out]
    return out


def _col(df: pd.DataFrame, name: str) -> np.ndarray:
    return df[name].to_numpy(dtype=float)


def _row(df: pd.DataFrame, i: int) -> str:
    return f"row {i}" + (f" (id {df['id'].iloc[i]!r})" if "id" in df.columns else "")


def _bank_columns(df: pd.DataFrame, prefix: str, what: str) -> dict[int, str]:
    cols = {}
    for c in map(str, df.columns):
        if c.startswith(prefix):
            if not c[len(prefix):].isdigit():
                raise InputError(f"{what}: column {c!r} is not {prefix}<reference index>")
            cols[int(c[len(prefix):])] = c
    return dict(sorted(cols.items()))


def bank_arrays(df: pd.DataFrame, what: str = "features table") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(target ℓ = −log ``gray_ppl`` (n,), reference ℓ (n, m), IN mask (n, m)) from the
    ``bank_ll_<j>``/``bank_in_<j>`` columns, ordered by j. InputError naming the column and
    row when a reference is missing either column, an ℓ is not finite or a flag is not 0/1."""
    if "gray_ppl" not in df.columns:
        raise InputError(f"{what}: the model-based methods need the target's 'gray_ppl' column")
    ll, flags = _bank_columns(df, BANK_LL, what), _bank_columns(df, BANK_IN, what)
    if not ll or ll.keys() != flags.keys():
        odd = sorted(ll.keys() ^ flags.keys())
        raise InputError(f"{what}: the reference bank needs {BANK_LL}<j> and {BANK_IN}<j> for every reference j"
                         + (f"; reference(s) {odd} have only one of them" if odd else "; there are none"))
    refs = df[list(ll.values())].to_numpy(dtype=float)
    in_mask = df[list(flags.values())].to_numpy(dtype=float)
    for values, names, ok, problem in ((refs, list(ll.values()), np.isfinite(refs), "is not a finite ℓ"),
                                       (in_mask, list(flags.values()), np.isin(in_mask, (0, 1)), "is not 0 or 1")):
        if not ok.all():
            i, j = np.argwhere(~ok)[0]
            raise InputError(f"{what}: {names[j]} at {_row(df, i)} {problem} ({values[i, j]!r})")
    return -np.log(_col(df, "gray_ppl")), refs, in_mask.astype(bool)


def crossfit_folds(labels, folds: int = 5, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified K-fold (train, test) index pairs, shuffled with ``seed``; every sample
    is in exactly one test fold. ``folds`` is lowered to the smaller class size (≥ 2)."""
    y = np.asarray(labels).astype(int)
    k = min(int(folds), int(np.bincount(y, minlength=2).min()))
    if k < 2:
        raise ValueError("cross-fitting needs at least 2 members and 2 non-members")
    return list(StratifiedKFold(k, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))


def scoring_pipeline(seed: int = 0) -> Pipeline:
    """Median imputation (NaN/inf features), standardisation, logistic regression: the
    batch analogue of BADI's linear scoring model (App. A.4) with A.7's z-scoring."""
    return Pipeline([("impute", SimpleImputer(strategy="median")), ("scale", StandardScaler()),
                     ("logit", LogisticRegression(max_iter=2000, random_state=seed))])


def cross_fit(X, labels, folds: int = 5, seed: int = 0) -> np.ndarray:
    """Out-of-fold logit scores: for each stratified fold, ``scoring_pipeline`` fitted on
    the other folds (imputer and scaler included) scores the fold. No sample scores itself."""
    X = np.where(np.isfinite(np.asarray(X, dtype=float)), X, np.nan)
    y = np.asarray(labels).astype(int)
    out = np.full(len(y), np.nan)
    for train, test in crossfit_folds(y, folds, seed):
        out[test] = scoring_pipeline(seed).fit(X[train], y[train]).decision_function(X[test])
    return out


# ---------------------------------------------------------------- the score functions

def loss_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """LOSS (Yeom et al. 2018; TDDBench A.2 "Loss"): the mean token log-likelihood
    −log PPL = −log ``gray_ppl``; members have lower loss."""
    return -np.log(_col(df, "gray_ppl"))


def zlib_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Zlib (Carlini et al. 2021): mean log-likelihood / zlib-compressed bytes
    (``gray_zlib_ratio`` = −log PPL / zlib length), higher = member."""
    return _col(df, "gray_zlib_ratio")


def min_k_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Min-K% Prob (Shi et al. 2024), K = 20%: mean of the 20% lowest token log-probs
    (``gray_min_k_20``); members have fewer low-probability outlier tokens."""
    return _col(df, "gray_min_k_20")


def min_kpp_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Min-K%++ (Zhang et al. 2024), K = 20%: mean of the 20% lowest per-token
    z-scores (log p − μ)/σ (``gray_min_kpp_20``); members sit at local maxima."""
    return _col(df, "gray_min_kpp_20")


def refl_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """RefL, reference-calibrated loss (Carlini et al. 2021/2022; Watson et al. 2022;
    EZ-MIA Sec. 4): −(log PPL_target − log PPL_reference) = −``gray_ref_diff``."""
    return -_col(df, "gray_ref_diff")


def neighbor_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Neighbourhood attack (Mattern et al. 2023; TDDBench A.2 "Neighbor"): the mean over
    the perturbation kinds of log PPL(x̃) − log PPL(x) (``gray_pert_diff_<kind>``);
    members lose more likelihood under perturbation, so a larger rise = member."""
    return df[method_columns(METHODS["neighbor"], df)].to_numpy(dtype=float).mean(axis=1)


def ez_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """EZ-MIA (EZ-MIA Sec. 3.4, App. E.5–E.6): the Error Zone ratio P/N of upward vs
    downward log-prob shifts target − reference at the target's error positions (``gray_ez``)."""
    return _col(df, "gray_ez")


def petal_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """PETAL (He et al. 2025; BADI App. B.2), label-only: the mean estimated token
    log-probability −log ``petal_ppl``, where each token's log-prob is the linear map of
    the MiniLM similarity (greedy vs true token) fitted on the reference model as surrogate."""
    return -np.log(_col(df, "petal_ppl"))


def baseline_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """BADI's "Baseline" (Sec. 5.1, App. B.1): BERTScore F1 of the greedy continuation of
    the prefix vs the true suffix (``black_seq_bertscore``); members are reproduced."""
    return _col(df, "black_seq_bertscore")


def model_loss_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Model-loss (Sablayrolles et al. 2019): ℓ_target − mean ℓ over every reference
    (``model_based.model_loss``)."""
    target, refs, _ = bank_arrays(df)
    return model_based.model_loss(target, refs)


def model_calibration_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Model-calibration (Watson et al. 2022): ℓ_target − mean ℓ over the OUT references
    (``model_based.model_calibration``); NaN for a passage with no OUT reference."""
    return model_based.model_calibration(*bank_arrays(df))


def lira_online_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """LiRA online, global variance (Carlini et al. 2022, Eq. 4, Alg. 1; ``model_based.lira_online``)."""
    return model_based.lira_online(*bank_arrays(df))


def lira_offline_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """LiRA offline, global variance (Carlini et al. 2022; ``model_based.lira_offline``)."""
    return model_based.lira_offline(*bank_arrays(df))


def model_fpr_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Model-FPR, Ye et al. 2022 attack R as a percentile among the OUT references
    (``model_based.model_fpr``)."""
    return model_based.model_fpr(*bank_arrays(df))


def rmia_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """RMIA (Zarifzadeh et al. 2024), γ = 1, offline a = 1 (``model_based.rmia``) against
    the ``population`` table's passages, which no model (target or reference) trained on."""
    if population is None:
        raise InputError("method 'rmia' needs a population table: passages no model trained on, "
                         "with gray_ppl and the bank's columns")
    target, refs, in_mask = bank_arrays(df)
    pop_target, pop_refs, pop_in = bank_arrays(population, "population table")
    if pop_refs.shape[1] != refs.shape[1]:
        raise InputError(f"population table has {pop_refs.shape[1]} reference models, the features table "
                         f"{refs.shape[1]}")
    if pop_in.any():
        i, j = np.argwhere(pop_in)[0]
        raise InputError(f"population table: {_row(population, i)} is marked as trained on by reference {j}; "
                         f"RMIA's population must be passages no model trained on")
    bad = np.flatnonzero(~np.isfinite(pop_target))
    if len(bad):
        raise InputError(f"population table: gray_ppl at {_row(population, bad[0])} is missing or not positive")
    return model_based.rmia(target, refs, in_mask, pop_target, pop_refs)


def conf_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Metric-conf (Song et al. 2019; TDDBench App. A.1.1): the mean over positions of the
    largest next-token probability (``gray_conf``); members are predicted confidently."""
    return _col(df, "gray_conf")


def corr_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Metric-corr (Leino & Fredrikson 2020; TDDBench App. A.1.1), label-only: the share of
    positions whose greedy token is the true token (``black_match_rate``)."""
    return _col(df, "black_match_rate")


def ent_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Metric-ent (Shokri et al. 2017; Song & Mittal 2021; TDDBench App. A.1.1): minus the mean
    over positions of the next-token entropy (``gray_ent``); members get peaked predictions."""
    return -_col(df, "gray_ent")


def ment_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Metric-ment (Song & Mittal 2021, Eq. 5; TDDBench App. A.1.1): minus the mean over
    positions of the modified entropy −(1 − p_y) log p_y − Σ_{z≠y} p_z log(1 − p_z)
    (``gray_ment``), low when the true token is predicted confidently."""
    return -_col(df, "gray_ment")


def augment_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Query-augment (Choquette-Choo et al. 2021, the augmentation attack's count of correct
    predictions; TDDBench App. A.1.4), label-only: the mean greedy-match rate over the passage
    and its perturbed variants (``black_match_rate``, ``black_pert_match_rate_<kind>``: our
    six perturbations are the augmentations, 6 extra queries). Thresholding the mean, not a
    classifier on the correctness vector: no shadow model's label-only outputs are extracted."""
    return df[method_columns(METHODS["query_augment"], df)].to_numpy(dtype=float).mean(axis=1)


def adv_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Query-adv, ours (after Li & Zhang 2021 and Choquette-Choo et al. 2021's distance to the
    decision boundary): the mean over positions of the true token's log-probability margin to
    the greedy boundary (``gray_margin``). Their label-only attack searches the input for the
    smallest change that flips the label; for an LM that is a discrete search over token
    substitutions at every position, far beyond 10 queries per passage, so we read the
    distance in log-probability space, where the boundary is exact and needs no extra query."""
    return _col(df, "gray_margin")


QRM_QUANTILE = 0.95  # Bertran et al.'s 1 − α: a score above 0 calls a member at FPR ≈ 5%


def _zlib_bytes(df) -> np.ndarray:
    """zlib-compressed bytes of each text, ℓ / ``gray_zlib_ratio`` (the ratio is ℓ / bytes)."""
    return -np.log(_col(df, "gray_ppl")) / _col(df, "gray_zlib_ratio")


def qrm_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Query-qrm, ours (after Bertran et al. 2023, "Scalable membership inference attacks via
    quantile regression", Sec. 3): a quantile regression fitted on ``population`` passages,
    known non-members, predicts from a description of x alone the ``QRM_QUANTILE`` quantile
    q̂(x) of the target's score on non-members like x; the score is ℓ(x) − q̂(x), ℓ the mean
    token log-likelihood. Bertran et al. regress with a network on the raw input; here the
    description is the only text statistic the features table holds that does not depend on
    the target, log zlib-compressed bytes (Carlini et al. 2021's difficulty proxy), in a
    linear quantile regression (pinball loss, no penalty). No reference model."""
    from sklearn.linear_model import QuantileRegressor

    if population is None:
        raise InputError("method 'query_qrm' needs a population table: passages the target never trained on")
    x = lambda d: np.log(_zlib_bytes(d))[:, None]  # noqa: E731
    model = QuantileRegressor(quantile=QRM_QUANTILE, alpha=0.0, solver="highs").fit(x(population),
                                                                                    -np.log(_col(population, "gray_ppl")))
    return -np.log(_col(df, "gray_ppl")) - model.predict(x(df))


def query_ref_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Query-ref, ours (after Wen et al. 2023, "Canary in a coalmine", ensembled queries with
    LiRA): online LiRA (``model_based.lira_online``) on each query q of x — x itself and its
    perturbed variants x̃_k (``gray_pert_diff_<kind>``: ℓ(x̃_k) = ℓ(x) − diff) — against the
    reference bank's IN and OUT ℓ of the same query (``bank_qll_<kind>_<j>``), averaged over
    the queries. Wen et al. craft each query by optimising it on the reference models so that
    IN and OUT models disagree most; over discrete tokens that needs a search per passage, so
    the queries here are the fixed perturbations (6 extra target queries)."""
    target, refs, in_mask = bank_arrays(df)
    lrs = [model_based.lira_online(target, refs, in_mask)]
    for c in method_columns(METHODS["query_ref"], df):
        if c.startswith("gray_pert_diff_"):
            kind = c.removeprefix("gray_pert_diff_")
            q = [f"{BANK_QLL}{kind}_{j}" for j in _bank_columns(df, BANK_LL, "features table")]
            missing = [n for n in q if n not in df.columns]
            if missing:
                raise InputError(f"method 'query_ref' needs column {missing[0]!r}: the bank on the {kind} variants")
            lrs.append(model_based.lira_online(target - _col(df, c), df[q].to_numpy(dtype=float), in_mask))
    return np.mean(lrs, axis=0)


def transfer_score(df, labels=None, folds=5, seed=0, population=None) -> np.ndarray:
    """Query-transfer, ours (after Li & Zhang 2021's transfer attack;
    ``trainspotter.evaluation.query_based``), label-only: the mean token log-likelihood of the
    passage under a surrogate distilled from the target's greedy tokens on held-out passages
    (``transfer_ll``)."""
    return _col(df, "transfer_ll")


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
       paradigm="llm", tddbench=None, fits=False) -> Method:
    return Method(name, label, access, tuple(columns), extraction, score, source, needs_labels, needs_population,
                  paradigm, tddbench, fits)


_SHADOW = Extraction("gray", shadow=True, vectors=True)
_LEARN_SOURCE = {"original": "Shokri et al. 2017", "top3": "Salem et al. 2019", "sorted": "Salem et al. 2019",
                 "label": "Nasr et al. 2018", "merge": "Amit et al. 2024"}


_G, _B = "gray", "black"
_BANK = ["gray_ppl", f"{BANK_LL}*", f"{BANK_IN}*"]
METHODS: dict[str, Method] = {m.name: m for m in [
    _m("loss", "LOSS", _G, ["gray_ppl"], Extraction(_G), loss_score, "Yeom et al. 2018", paradigm="metric",
       tddbench="Metric-loss"),
    _m("metric_conf", "Metric-conf", _G, ["gray_conf"], Extraction(_G), conf_score, "Song et al. 2019",
       paradigm="metric", tddbench="Metric-conf"),
    _m("metric_corr", "Metric-corr", _B, ["black_match_rate"], Extraction(_B), corr_score,
       "Leino & Fredrikson 2020", paradigm="metric", tddbench="Metric-corr"),
    _m("metric_ent", "Metric-ent", _G, ["gray_ent"], Extraction(_G), ent_score, "Shokri et al. 2017",
       paradigm="metric", tddbench="Metric-ent"),
    _m("metric_ment", "Metric-ment", _G, ["gray_ment"], Extraction(_G), ment_score, "Song & Mittal 2021, Eq. 5",
       paradigm="metric", tddbench="Metric-ment"),
    *[_m(f"learn_{k}", f"Learn-{k}", _G, cols + [learning_based.SHADOW_PREFIX + c for c in cols]
         + [learning_based.SHADOW_IN], _SHADOW, _learn(k), f"{_LEARN_SOURCE[k]}; TDDBench Sec. 3", paradigm="learning",
         tddbench=f"Learn-{k}", fits=True) for k, cols in learning_based.INPUTS.items()],
    _m("zlib", "Zlib", _G, ["gray_zlib_ratio"], Extraction(_G), zlib_score, "Carlini et al. 2021"),
    _m("min_k", "Min-K%", _G, ["gray_min_k_20"], Extraction(_G), min_k_score, "Shi et al. 2024"),
    _m("min_kpp", "Min-K%++", _G, ["gray_min_kpp_20"], Extraction(_G), min_kpp_score, "Zhang et al. 2024"),
    _m("refl", "RefL", _G, ["gray_ref_diff"], Extraction(_G, reference=True), refl_score,
       "Carlini et al. 2022; EZ-MIA Sec. 4"),
    _m("neighbor", "Neighbor", _G, ["gray_pert_diff_*"], Extraction(_G, perturbations=True),
       neighbor_score, "Mattern et al. 2023", paradigm="query", tddbench="Query-neighbor"),
    _m("query_augment", "Query-augment", _B, ["black_match_rate", "black_pert_match_rate_*"],
       Extraction(_B, perturbations=True), augment_score, "Choquette-Choo et al. 2021", paradigm="query",
       tddbench="Query-augment"),
    _m("query_ref", "Query-ref (ours)", _G,
       _BANK + ["gray_pert_diff_*", f"{BANK_QLL}*"], Extraction(_G, perturbations=True, bank=True, bank_queries=True),
       query_ref_score, "ours, after Wen et al. 2023", paradigm="query", tddbench="Query-ref"),
    _m("query_transfer", "Query-transfer (ours)", _B, ["transfer_ll"], Extraction(_B, surrogate=True),
       transfer_score, "ours, after Li & Zhang 2021", needs_population=True, paradigm="query",
       tddbench="Query-transfer"),
    _m("query_adv", "Query-adv (ours)", _G, ["gray_margin"], Extraction(_G), adv_score,
       "ours, after Li & Zhang 2021", paradigm="query", tddbench="Query-adv"),
    _m("query_qrm", "Query-qrm (ours)", _G, ["gray_ppl", "gray_zlib_ratio"], Extraction(_G),
       qrm_score, "ours, after Bertran et al. 2023", needs_population=True, paradigm="query", tddbench="Query-qrm"),
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
       "Sablayrolles et al. 2019; TDDBench App. A.1.3", paradigm="model", tddbench="Model-loss"),
    _m("model_calibration", "Model-calibration", _G, _BANK, Extraction(_G, bank=True), model_calibration_score,
       "Watson et al. 2022; TDDBench App. A.1.3", paradigm="model", tddbench="Model-calibration"),
    _m("lira_online", "LiRA (online, global σ)", _G, _BANK, Extraction(_G, bank=True), lira_online_score,
       "Carlini et al. 2022, Eq. 4, Alg. 1", paradigm="model", tddbench="Model-lira"),
    _m("lira_offline", "LiRA (offline, global σ)", _G, _BANK, Extraction(_G, bank=True), lira_offline_score,
       "Carlini et al. 2022, offline LiRA", paradigm="model", tddbench="Model-lira"),
    _m("model_fpr", "Model-FPR", _G, _BANK, Extraction(_G, bank=True), model_fpr_score,
       "Ye et al. 2022, attack R", paradigm="model", tddbench="Model-fpr"),
    _m("rmia", "RMIA (Model-robust)", _G, _BANK, Extraction(_G, bank=True), rmia_score,
       "Zarifzadeh et al. 2024", needs_population=True, paradigm="model", tddbench="Model-robust"),
]}


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
