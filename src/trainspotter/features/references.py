"""Membership features that combine K ≥ 2 reference models (``--reference`` given K times).

Each is a function of per-token log-prob arrays (gray-box log-probs or black-box
estimates, as in ``trainspotter.features.features``) of the target and of every reference
on one passage; ℓ = (1/n) Σ log p(x_i | x_<i) is the mean token log-likelihood (−log PPL).
Every one of them compares the target with the references: a statistic of the references
alone (their mean or spread) measures how hard the text is, not whether the target trained
on it, so it would let an easier held-out set pass for membership evidence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import logsumexp, ndtr

__all__ = ["refs_diff", "refs_lira", "refs_token_lira", "refs_rmia"]


def _check(references: Sequence[Sequence[float]]) -> None:
    if len(references) < 2:
        raise ValueError(f"these features combine at least 2 references, got {len(references)}")


def _means(target: Sequence[float], references: Sequence[Sequence[float]]) -> tuple[float, np.ndarray]:
    _check(references)
    return float(np.mean(target)), np.array([np.mean(r) for r in references], dtype=np.float64)


def _gaussian_tail(x, mu, sd) -> np.ndarray:
    """Φ((x − μ)/σ); where the references agree exactly (σ = 0): 1, ½ or 0 as x is above, at
    or below them (the limit of Φ as σ → 0)."""
    x, mu, sd = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (x, mu, sd)))
    limit = 0.5 * (1 + np.sign(x - mu))
    return np.where(sd > 0, ndtr((x - mu) / np.where(sd > 0, sd, 1.0)), limit)


def refs_diff(target: Sequence[float], references: Sequence[Sequence[float]]) -> float:
    """log PPL_target − (1/K) Σ_k log PPL_k: the target's loss calibrated by the mean loss of K
    reference models (Watson et al. 2022, difficulty calibration with K reference models;
    TDDBench A.1.3 "Model-calibration"). With K = 1 it is ``{a}_ref_diff``. Lower = member."""
    l_t, l_k = _means(target, references)
    return float(l_k.mean() - l_t)


def refs_lira(target: Sequence[float], references: Sequence[Sequence[float]]) -> float:
    """Offline LiRA (Carlini et al. 2022, Sec. IV-C, Eq. 4 with OUT models only): fit
    N(μ, σ²) to the K references' ℓ_k (σ with ddof = 1) and return the one-sided
    Φ((ℓ_target − μ)/σ), the probability that an OUT model gives this passage a lower ℓ.
    For a sequence the statistic is ℓ itself (as Hayes et al. 2025 for LMs), not the logit-
    scaled confidence of a classifier. Bounded in [0, 1], so a passage whose few references
    happen to agree cannot dominate a linear scoring model. Higher = member."""
    l_t, l_k = _means(target, references)
    return float(_gaussian_tail(l_t, l_k.mean(), l_k.std(ddof=1)))


def refs_token_lira(target: Sequence[float], references: Sequence[Sequence[float]]) -> float:
    """Offline LiRA per token, averaged: (1/n) Σ_i Φ((log p_t(x_i) − μ_i)/σ_i), with μ_i, σ_i
    the mean and standard deviation (ddof = 1) over the K references at position i (Carlini
    et al. 2022, Eq. 4, applied to each token's log-probability). Needs every model to score
    the same positions (one tokenizer); NaN otherwise, as EZ. Higher = member."""
    t = np.asarray(target, dtype=np.float64)
    _check(references)
    if any(len(r) != t.size for r in references):
        return float("nan")
    r = np.asarray(references, dtype=np.float64)
    return float(_gaussian_tail(t, r.mean(axis=0), r.std(axis=0, ddof=1)).mean())


def refs_rmia(target: Sequence[float], references: Sequence[Sequence[float]]) -> float:
    """RMIA's likelihood ratio (Zarifzadeh et al. 2024, Eq. 3), in logs: log Pr(x|θ) − log Pr(x)
    with Pr(x|θ) = exp(ℓ) the per-token average likelihood (so passages of any length
    compare) and Pr(x) = (1/K) Σ_k exp(ℓ_k) over the K references, all OUT models (the
    offline estimate with a = 1). RMIA's score compares this ratio with those of population
    samples z; a linear scoring model fed the log-ratio learns a threshold on it directly.
    Higher = member."""
    l_t, l_k = _means(target, references)
    return float(l_t - (logsumexp(l_k) - np.log(l_k.size)))
