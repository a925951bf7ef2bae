"""Membership features: pure functions of per-token log-prob arrays (BADI Sec. 3, App. A.2),
the feature rows and the feature configuration (the catalogue of columns: ``features.catalog``).

Convention: ``logprobs`` holds log p(x_i | x_<i) of the actual tokens (natural log).
The same functions run on gray-box log-probs (``gray_*`` columns) and on black-box
estimates log p̃ from :mod:`trainspotter.features.probability` (``black_*`` columns).
Higher feature values do not always mean "member": the online scoring model learns
each feature's sign and weight (BADI Sec. 3, App. A.4).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, field_validator, model_validator

from trainspotter.backends.base import PROJECTION_DIM, TOP_K
from trainspotter.errors import FieldError
from trainspotter.features.catalog import pct
from trainspotter.features.ez import EZ_CAP
from trainspotter.features.perturb import KINDS
from trainspotter.features.probability import ESTIMATORS, SIGMOID_SCALE
from trainspotter.features.references import refs_diff, refs_lira, refs_rmia, refs_token_lira

MIN_K = 0.2  # Shi et al. 2024 report K = 20% as a strong default for gray-box access


def _as_array(logprobs: Sequence[float]) -> np.ndarray:
    arr = np.asarray(logprobs, dtype=np.float64)
    if arr.size == 0:
        raise ValueError("no scored tokens: the text is empty after tokenisation")
    return arr


def log_perplexity(logprobs: Sequence[float]) -> float:
    """Mean negative log-likelihood per token, log PPL = -(1/n) Σ log p(x_i|x_<i)."""
    return float(-_as_array(logprobs).mean())


def perplexity(logprobs: Sequence[float]) -> float:
    """PPL = exp(-(1/n) Σ log p(x_i|x_<i)) (BADI App. A.2, item 1)."""
    return math.exp(log_perplexity(logprobs))


def zlib_ratio(logprobs: Sequence[float], text: str) -> float:
    """Mean token log-likelihood divided by the zlib entropy of the text, measured as the
    length in bytes of ``zlib.compress(text.encode("utf-8"))`` (Carlini et al. 2021;
    BADI App. A.2, item 6)."""
    return float(_as_array(logprobs).mean()) / len(zlib.compress(text.encode("utf-8")))


def min_k(logprobs: Sequence[float], k: float = MIN_K) -> float:
    """Min-K% Prob (Shi et al. 2024; BADI App. A.2, item 2): the mean of the
    ceil(k·n) smallest token log-probs."""
    arr = np.sort(_as_array(logprobs))
    return float(arr[: max(1, math.ceil(k * arr.size))].mean())


def reference_ratio(target_logprobs: Sequence[float], reference_logprobs: Sequence[float]) -> float:
    """log PPL_target / log PPL_reference (Carlini et al. 2021; BADI App. A.2, item 5).
    NaN when log PPL_reference = 0 (a raw black-box estimate with every token right)."""
    den = log_perplexity(reference_logprobs)
    return log_perplexity(target_logprobs) / den if den != 0 else math.nan


def reference_diff(target_logprobs: Sequence[float], reference_logprobs: Sequence[float]) -> float:
    """log PPL_target - log PPL_reference: the calibrated loss of Watson et al. 2022."""
    return log_perplexity(target_logprobs) - log_perplexity(reference_logprobs)


# ---------------------------------------------------------------- more token-level features

def min_k_plus_plus(logprobs: Sequence[float], mu: Sequence[float], sigma2: Sequence[float],
                    k: float = MIN_K) -> float:
    """Min-K%++ (Zhang et al. 2024): per token z_i = (log p(x_i|x_<i) − μ_i)/σ_i, where
    μ_i and σ_i² are the mean and variance of log p(z|x_<i) under z ~ p(·|x_<i); the
    feature is the mean of the ceil(k·n) smallest z_i. A point-mass next-token
    distribution (σ_i = 0, hence log p = μ_i = 0) gives z_i = 0."""
    lp = _as_array(logprobs)
    sd = np.sqrt(np.maximum(np.asarray(sigma2, dtype=np.float64), 0.0))
    diff = lp - np.asarray(mu, dtype=np.float64)
    z = np.divide(diff, sd, out=np.zeros_like(diff), where=sd > 0)
    return min_k(z, k)


def strip_k(logprobs: Sequence[float], k: float) -> float:
    """STRIP-K% Prob (BADI Sec. 3, App. A.2 item 3): discard the floor(k·n) smallest and
    the floor(k·n) largest token log-probs (the K% most extreme at each tail), then
    average the rest (a trimmed mean, as ``scipy.stats.trim_mean(x, k)``); 0 ≤ k < 0.5."""
    if not 0 <= k < 0.5:
        raise ValueError(f"STRIP-K% needs 0 <= k < 0.5, got {k}")
    arr = np.sort(_as_array(logprobs))
    cut = int(math.floor(k * arr.size))
    return float(arr[cut: arr.size - cut].mean())


def perturbation_ratio(original_logprobs: Sequence[float], perturbed_logprobs: Sequence[float]) -> float:
    """log PPL(x̃) / log PPL(x) for a perturbed variant x̃ of x (Mattern et al. 2023;
    BADI App. A.2 item 4). Members lose more under perturbation. NaN if log PPL(x) = 0."""
    den = log_perplexity(original_logprobs)
    return log_perplexity(perturbed_logprobs) / den if den != 0 else math.nan


def perturbation_diff(original_logprobs: Sequence[float], perturbed_logprobs: Sequence[float]) -> float:
    """log PPL(x̃) − log PPL(x) (Mattern et al. 2023; BADI App. A.2 item 4)."""
    return log_perplexity(perturbed_logprobs) - log_perplexity(original_logprobs)


def match_rate(token_ids: Sequence[int], argmax: Sequence[int]) -> float:
    """Fraction of positions whose greedy (temperature-0) token is the actual token: the
    label-only signal itself, before any probability estimate (BADI App. A.6; TDDBench's
    Metric-corr, "is the prediction correct", per token and averaged over the passage)."""
    ids, pred = np.asarray(token_ids), np.asarray(argmax)
    if ids.size == 0:
        raise ValueError("no scored tokens: the text is empty after tokenisation")
    return float((ids == pred).mean())


# ---------------------------------------------------------------- TDDBench's metric-based criteria

def _mean_or_nan(values) -> np.ndarray | float:
    """Mean over positions (axis 0); NaN when the backend gave no such array (an API)."""
    return np.nan if values is None else np.asarray(values, dtype=np.float64).mean(axis=0)


def margins(scores) -> np.ndarray | None:
    """Per position, the true token's log-probability margin to the greedy decision boundary,
    log p(x_i|x_<i) − max_{z≠x_i} log p(z|x_<i): positive where the greedy token is right (how
    far its log-probability may fall before the prediction flips), negative where it is wrong.
    None without the top log-probabilities."""
    if scores.top_logprobs is None or scores.top_logprobs.shape[1] < 2:
        return None
    top = scores.top_logprobs
    right = np.asarray(scores.argmax) == np.asarray(scores.token_ids)
    return np.asarray(scores.logprobs) - np.where(right, top[:, 1], top[:, 0])


def prediction_row(scores, config: "FeatureConfig") -> dict[str, float]:
    """TDDBench's metric-based criteria (Table 3, App. A.1.1) per token, averaged over the
    passage's positions, from a ``TokenScores``: ``gray_conf`` = mean max_z p(z|x_<i)
    (Metric-conf, Song et al. 2019), ``gray_ent`` = mean entropy H_i = −μ_i (Metric-ent,
    Shokri et al. 2017), ``gray_ment`` = mean modified entropy (Metric-ment, Song & Mittal
    2021 Eq. 5), ``gray_true_p`` = mean p(x_i|x_<i) (the true label's confidence),
    ``gray_margin`` = mean ``margins`` (Query-adv's distance to the greedy boundary). With
    ``config.prediction_vectors`` also the learning-based inputs: ``gray_top_p_<r>`` = mean
    over positions of the r-th largest probability (Salem et al. 2019's sorted vector, cut at
    10) and ``gray_pv_<j>`` = mean over positions of the projected distribution p(·|x_<i) @ R
    (``trainspotter.backends.hf.projection_matrix``; Shokri et al.'s unsorted vector, whose
    V entries are too many for a classifier trained on a few hundred passages). A value the
    backend could not give (``None`` arrays) is NaN."""
    row = {"gray_conf": _mean_or_nan(None if scores.max_logprob is None else np.exp(scores.max_logprob)),
           "gray_ent": -float(np.mean(scores.mu)), "gray_ment": _mean_or_nan(scores.mentr),
           "gray_true_p": float(np.mean(np.exp(scores.logprobs))), "gray_margin": _mean_or_nan(margins(scores))}
    if config.prediction_vectors:
        top = _mean_or_nan(None if scores.top_logprobs is None else np.exp(scores.top_logprobs))
        proj = _mean_or_nan(scores.projection)
        row |= {f"gray_top_p_{r + 1}": (np.nan if scores.top_logprobs is None or r >= len(top) else top[r])
                for r in range(TOP_K)}
        row |= {f"gray_pv_{j + 1}": np.nan if scores.projection is None else proj[j] for j in range(PROJECTION_DIM)}
    return {k: float(v) for k, v in row.items()}


# ---------------------------------------------------------------- configuration

class FeatureConfig(BaseModel):
    """What to compute; the defaults give the full set (BADI App. A.2, A.3, A.6, B.1)."""

    seed: int = 0  # perturbation seed (perturb.py)
    min_k: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)  # Min-K% and Min-K%++; 0.6 is BADI's black-box K
    strip_k: tuple[float, ...] = (0.1, 0.2, 0.3)  # STRIP-K%: fraction cut at each tail
    perturbations: bool = True  # the six perturbed passages (and prefixes)
    perturbation_kinds: tuple[str, ...] = KINDS
    sequence: bool = True  # suffix generation + BERTScore (black-box sequence-level)
    suffix_tokens: int = 64  # BADI App. A.1/B.1: the last 64 tokens are the suffix ...
    suffix_fraction: float = 0.25  # ... but at most this fraction of a short passage
    estimator: Literal["sigmoid", "raw", "petal"] = "sigmoid"  # BADI App. A.6
    sigmoid_scale: float = SIGMOID_SCALE
    ez_cap: float = EZ_CAP  # EZ value for EZ-MIA App. E.5/E.6's "∞" cases
    batch_size: int = 16  # passages per batch of model calls
    embedding_cache: str | None = None  # .npz token-embedding table; None: default_token_table_path()
    # Only features that compare the target with the reference model (calibrated: what makes
    # one text easier than another cancels to first order; the "calibrated" set).
    relative_only: bool = False
    # TDDBench's metric-based criteria (gray_conf, _ent, _ment, _true_p, _margin; prediction_row)
    metric_criteria: bool = True
    # TDDBench's learning-based inputs: per-passage prediction vectors (gray_top_p_*, gray_pv_*)
    prediction_vectors: bool = False
    twin_positions: bool = False  # a twins audit's changed-position features (features.twin_positions)

    @field_validator("min_k")
    @classmethod
    def _check_min_k(cls, v):
        if not v or any(not 0 < k <= 1 for k in v) or len({pct(k) for k in v}) != len(v):
            raise ValueError("min_k: distinct values in (0, 1] (whole percents)")
        return v

    @field_validator("strip_k")
    @classmethod
    def _check_strip_k(cls, v):
        if any(not 0 < k < 0.5 for k in v) or len({pct(k) for k in v}) != len(v):
            raise ValueError("strip_k: distinct values in (0, 0.5) (whole percents)")
        return v

    @field_validator("perturbation_kinds")
    @classmethod
    def _check_kinds(cls, v):
        bad = set(v) - set(KINDS)
        if bad:
            raise ValueError(f"unknown perturbations {sorted(bad)}; expected some of {list(KINDS)}")
        return v

    @model_validator(mode="after")
    def _check_sizes(self):
        if self.suffix_tokens < 1 or not 0 < self.suffix_fraction < 1 or self.batch_size < 1:
            raise ValueError("suffix_tokens >= 1, 0 < suffix_fraction < 1, batch_size >= 1")
        return self

    @property
    def kinds(self) -> tuple[str, ...]:
        return self.perturbation_kinds if self.perturbations else ()


# Named feature sets: "lean" costs one forward pass per text per model (the foundation's features
# plus Min-K%++ and EZ from the same pass; no TDDBench metric criteria: at chance on tiny-pretrain,
# benchmarks/results/tiny-pretrain/tddbench.md); "calibrated" keeps its reference-relative ones (RefL,
# EZ: robust to easier or harder held-out text, benchmarks/results/shift.md); "twins": a twins
# audit's, with the changed-position features (benchmarks/results/twins/twins.md); "full": all.
_ONE_PASS = {"min_k": (MIN_K,), "strip_k": (), "perturbations": False, "sequence": False}
FEATURE_SETS = {
    "lean": FeatureConfig(**_ONE_PASS, metric_criteria=False),
    "calibrated": FeatureConfig(**_ONE_PASS, relative_only=True),
    "twins": FeatureConfig(**_ONE_PASS, metric_criteria=False, twin_positions=True),
    "full": FeatureConfig(),
}


def check_references(config: FeatureConfig, n_references: int) -> None:
    """The one check that reference-relative features (``relative_only``: the calibrated set)
    have a reference model to be relative to: AuditConfig's validator, ``extract`` and the
    extract verb call it. FieldError naming ``features``."""
    if config.relative_only and n_references < 1:
        raise FieldError("features", "the calibrated (reference-relative) feature set needs a reference model")


def suffix_length(n_tokens: int, config: FeatureConfig) -> int:
    """Suffix length for a passage of n tokens: min(suffix_tokens, floor(n·suffix_fraction)),
    at least 1 (BADI uses 64 of 512 tokens; the testbeds' 64-token passages get 16).
    0 when the passage is too short to split (n < 2)."""
    if n_tokens < 2:
        return 0
    return max(1, min(config.suffix_tokens, int(n_tokens * config.suffix_fraction)))


def token_level_row(access: str, text: str, logprobs: np.ndarray, config: FeatureConfig, *,
                    mu: np.ndarray | None = None, sigma2: np.ndarray | None = None,
                    reference_logprobs: np.ndarray | None = None,
                    references_logprobs: list[np.ndarray] | None = None,
                    perturbed_logprobs: dict[str, np.ndarray] | None = None,
                    ez: float | None = None) -> dict[str, float]:
    """Token-level feature row (names as in ``catalog``) from per-token arrays: gray-box
    log-probs (access "gray") or black-box estimates (access "black"). ``reference_logprobs``:
    the (first) reference's; ``references_logprobs``: every reference's, when K ≥ 2."""
    a = access
    row = {f"{a}_ppl": perplexity(logprobs), f"{a}_zlib_ratio": zlib_ratio(logprobs, text)}
    for k in config.min_k:
        row[f"{a}_min_k_{pct(k)}"] = min_k(logprobs, k)
    if mu is not None and sigma2 is not None:
        for k in config.min_k:
            row[f"{a}_min_kpp_{pct(k)}"] = min_k_plus_plus(logprobs, mu, sigma2, k)
    for k in config.strip_k:
        row[f"{a}_strip_k_{pct(k)}"] = strip_k(logprobs, k)
    if reference_logprobs is not None:
        row[f"{a}_ref_ratio"] = reference_ratio(logprobs, reference_logprobs)
        row[f"{a}_ref_diff"] = reference_diff(logprobs, reference_logprobs)
    for kind, plp in (perturbed_logprobs or {}).items():
        row[f"{a}_pert_ratio_{kind}"] = perturbation_ratio(logprobs, plp)
        row[f"{a}_pert_diff_{kind}"] = perturbation_diff(logprobs, plp)
    if ez is not None:
        row[f"{a}_ez"] = ez
    if references_logprobs is not None and len(references_logprobs) >= 2:
        for name, fn in (("diff", refs_diff), ("lira", refs_lira), ("token_lira", refs_token_lira),
                         ("rmia", refs_rmia)):
            row[f"{a}_refs_{name}"] = fn(logprobs, references_logprobs)
    return row
