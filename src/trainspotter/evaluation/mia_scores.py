"""The per-sample membership-inference methods' score functions (``evaluation.mia.METHODS``
names each with its columns, extraction and source): each maps a features table to one score
per row, **higher = more member-like**, and the helpers they share (the reference bank's
columns as arrays, cross-fitting). See ``trainspotter.evaluation.mia`` for the conventions.
"""

from __future__ import annotations

import fnmatch

import numpy as np
import pandas as pd
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from trainspotter.errors import InputError
from trainspotter.features import model_based

PETAL_PREFIX = "petal_"
BANK_LL, BANK_IN = "bank_ll_", "bank_in_"  # + the reference model's index j
BANK_QLL = "bank_qll_"  # + <kind>_<j>: ℓ of the <kind> perturbed variant under reference j
BANK_COLUMNS = ("gray_ppl", f"{BANK_LL}*", f"{BANK_IN}*")  # the model-based methods' inputs
# the column patterns of the methods that read a family of columns (METHODS uses the same)
NEIGHBOR_COLUMNS = ("gray_pert_diff_*",)
AUGMENT_COLUMNS = ("black_match_rate", "black_pert_match_rate_*")
QUERY_REF_COLUMNS = BANK_COLUMNS + ("gray_pert_diff_*", f"{BANK_QLL}*")


def columns_matching(df: pd.DataFrame, patterns, name: str) -> list[str]:
    """The table's columns matching ``patterns`` (fnmatch), in pattern order; InputError naming
    method ``name`` if a pattern matches none."""
    out: list[str] = []
    for pattern in patterns:
        hit = [c for c in df.columns if fnmatch.fnmatchcase(str(c), pattern)]
        if not hit:
            raise InputError(f"method {name!r} needs feature column(s) {pattern!r}, "
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
    return df[columns_matching(df, NEIGHBOR_COLUMNS, "neighbor")].to_numpy(dtype=float).mean(axis=1)


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
    return df[columns_matching(df, AUGMENT_COLUMNS, "query_augment")].to_numpy(dtype=float).mean(axis=1)


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
    for c in columns_matching(df, QUERY_REF_COLUMNS, "query_ref"):
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
