"""Model-based membership inference from a bank of reference models (TDDBench Sec. 2.3,
Table 3, App. A.1.3): Model-loss, Model-calibration, Model-lira (online and offline),
Model-fpr and Model-robust (RMIA), as pure numpy functions.

The statistic is a passage's mean token log-likelihood ℓ = −log PPL (higher = more
likely). LiRA's logit scaling φ(p) = log(p/(1−p)) is for a classifier's confidence in one
label; for a sequence, Carlini et al. 2022 (their language-model experiments) and Hayes et
al. 2025 fit the Gaussians to the sequence's own (log-)likelihood, which is what ℓ is.

Inputs, for n candidates and m reference models:

- ``target`` (n,): ℓ of each candidate under the target model;
- ``refs`` (n, m): ℓ of each candidate under reference model j;
- ``in_mask`` (n, m) bool: True where reference j was trained on candidate i
  (all False = only OUT references, the offline setting).

Every function returns one score per candidate, **higher = more member-like**. A
candidate lacking the references a method needs (no OUT reference for
Model-calibration, LiRA offline and Model-FPR; no IN or no OUT reference for LiRA
online) gets NaN, and so does a candidate whose target ℓ is NaN: the caller reports it,
no value is invented. Reference values must be finite (ValueError otherwise): one NaN
would spoil the variance that LiRA pools over all candidates.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr, ndtr

__all__ = ["model_loss", "model_calibration", "lira_online", "lira_offline", "model_fpr", "rmia",
           "rmia_log_ratio", "VARIANCES"]

VARIANCES = ("global", "per_example")  # how LiRA estimates σ (``_std``); a benchmark row names its own

_MIN_STD = 1e-12  # floor on σ (Carlini et al.'s code adds 1e-30): identical references stay finite


def _bank(target, refs, in_mask=None):
    """The arrays as float (n,), float (n, m), bool (n, m), shapes checked."""
    target = np.asarray(target, dtype=float)
    refs = np.asarray(refs, dtype=float)
    if target.ndim != 1 or refs.ndim != 2 or refs.shape[0] != target.shape[0] or refs.shape[1] < 1:
        raise ValueError(f"target must be (n,) and refs (n, m ≥ 1); got {target.shape} and {refs.shape}")
    in_mask = np.zeros(refs.shape, bool) if in_mask is None else np.asarray(in_mask, dtype=bool)
    if in_mask.shape != refs.shape:
        raise ValueError(f"in_mask must have refs' shape {refs.shape}; got {in_mask.shape}")
    bad = np.argwhere(~np.isfinite(refs))
    if len(bad):
        raise ValueError(f"reference ℓ not finite at row {bad[0][0]}, reference {bad[0][1]} "
                         f"({len(bad)} such value(s))")
    return target, refs, in_mask


def _mean(refs, mask) -> np.ndarray:
    """Per-row mean of refs where mask; NaN for a row with no such reference."""
    k = mask.sum(axis=1)
    total = np.where(mask, refs, 0.0).sum(axis=1)
    return np.where(k > 0, total / np.maximum(k, 1), np.nan)


def _std(refs, mask, variance: str) -> np.ndarray:
    """Per-row σ of refs where mask (n,).

    ``"global"``: one σ for all rows, the pooled within-row variance
    Σ_i Σ_j (ℓ_ij − μ_i)² / Σ_i (k_i − 1) — the spread of a candidate's statistic across
    models, with each candidate's own mean removed (Carlini et al.'s code takes np.std over
    the raw matrix, which also counts how candidates differ from one another). With no row
    holding two values (e.g. m = 1) it falls back to that code's estimate, the variance of
    all values around their mean; for LiRA offline σ is then only a scale, leaving the ranking.
    ``"per_example"``: each row's own sample σ (ddof 1) where it holds ≥ 2 values, else the
    global σ.
    """
    k = mask.sum(axis=1)
    mu = _mean(refs, mask)
    sq = np.where(mask, (refs - mu[:, None]) ** 2, 0.0).sum(axis=1)
    dof = np.maximum(k - 1, 0)
    if dof.sum() > 0:
        pooled = sq.sum() / dof.sum()
    else:
        pooled = np.var(refs[mask]) if mask.any() else np.nan
    sigma = np.full(len(k), np.sqrt(pooled))
    if variance == "per_example":
        sigma = np.where(k >= 2, np.sqrt(sq / np.maximum(dof, 1)), sigma)
    elif variance != "global":
        raise ValueError(f"variance must be 'global' or 'per_example', not {variance!r}")
    return np.maximum(sigma, _MIN_STD)


def _log_normal(x, mu, sigma) -> np.ndarray:
    return -0.5 * np.log(2 * np.pi * sigma**2) - (x - mu) ** 2 / (2 * sigma**2)


def model_loss(target, refs) -> np.ndarray:
    """Model-loss (Sablayrolles et al. 2019, the attack with a per-sample threshold τ(z)
    estimated on shadow models; TDDBench App. A.1.3): the mean loss of x over ALL reference models,
    IN and OUT, minus the target's loss: ℓ_target − mean_j ℓ_j. (TDDBench's code takes
    (median_IN + median_OUT)/2; the mean over all models is its text's definition.)"""
    target, refs, _ = _bank(target, refs)
    return target - refs.mean(axis=1)


def model_calibration(target, refs, in_mask) -> np.ndarray:
    """Model-calibration, difficulty calibration (Watson et al. 2022, Sec. 3: the calibrated
    score s(h, x) − E_{g ∈ G_out}[s(g, x)] over reference models g not trained on x): ℓ_target − mean of the OUT
    references' ℓ. NaN where x has no OUT reference."""
    target, refs, in_mask = _bank(target, refs, in_mask)
    return target - _mean(refs, ~in_mask)


def lira_online(target, refs, in_mask, variance: str = "global") -> np.ndarray:
    """LiRA online (Carlini et al. 2022, Sec. IV, Eq. 4 and Alg. 1): the log likelihood ratio
    log N(ℓ; μ_in, σ²_in) − log N(ℓ; μ_out, σ²_out), with μ the mean of x's IN (OUT)
    references. ``variance="global"`` (default) shares σ_in, σ_out across candidates, as
    Carlini et al. recommend below ~64 reference models (fixed-variance LiRA); ``"per_example"``
    estimates them per candidate (see ``_std``). A candidate no IN model trained on (with k
    IN models each on a random half of the candidates, a share 2^-k of them) takes μ_in =
    μ_out + the mean IN − OUT gap of the candidates that have both, so every candidate is
    scored; NaN where x has no OUT reference."""
    target, refs, in_mask = _bank(target, refs, in_mask)
    out = ~in_mask
    mu_in, mu_out = _mean(refs, in_mask), _mean(refs, out)
    gap = mu_in - mu_out
    if np.isfinite(gap).any():
        mu_in = np.where(np.isnan(mu_in), mu_out + np.nanmean(gap), mu_in)
    return (_log_normal(target, mu_in, _std(refs, in_mask, variance))
            - _log_normal(target, mu_out, _std(refs, out, variance)))


def lira_offline(target, refs, in_mask, variance: str = "global", log: bool = True) -> np.ndarray:
    """LiRA offline (Carlini et al. 2022, Sec. IV, offline variant): the one-sided test against
    the OUT Gaussian, Λ = Pr[Z < ℓ] for Z ~ N(μ_out, σ²_out), returned as log Λ =
    log Φ((ℓ − μ_out)/σ_out) (same order, and no saturation at Λ = 1 for far-out members),
    or as Λ itself with ``log=False`` (bounded in [0, 1]: the audit's ``refs_lira``).
    Variance as ``lira_online``. NaN where x has no OUT reference."""
    target, refs, in_mask = _bank(target, refs, in_mask)
    out = ~in_mask
    z = (target - _mean(refs, out)) / _std(refs, out, variance)
    return log_ndtr(z) if log else ndtr(z)


def model_fpr(target, refs, in_mask) -> np.ndarray:
    """Model-FPR, Ye et al. 2022 attack R (Sec. 4, per-example threshold): x is called a member
    at false-positive rate α when ℓ_target exceeds the (1 − α)-quantile of its OUT references'
    ℓ. As a score: the percentile F(ℓ_target) of x's OUT values, so thresholding F at 1 − α is
    attack R at FPR α.

    F is the mid-rank empirical CDF — at each distinct OUT value v, F(v) = (#{ℓ_j < v} +
    ½ #{ℓ_j = v}) / k (ties count half) — joined linearly between consecutive distinct
    values, 0 below the smallest and 1 above the largest. With k OUT references it cannot
    tell apart candidates beyond all of them (a non-member lands there with probability
    1/(k + 1), as attack R cannot reach an FPR below that). It is a rank statistic: invariant
    to a common per-candidate shift (or positive scaling) of target and references. NaN
    where x has no OUT reference."""
    target, refs, in_mask = _bank(target, refs, in_mask)
    scores = np.full(len(target), np.nan)
    for i in range(len(target)):
        values = np.sort(refs[i, ~in_mask[i]])
        if values.size == 0 or np.isnan(target[i]):
            continue
        knots = np.unique(values)
        below = np.searchsorted(values, knots, side="left")
        equal = np.searchsorted(values, knots, side="right") - below
        scores[i] = np.interp(target[i], knots, (below + 0.5 * equal) / values.size, left=0.0, right=1.0)
    return scores


def _log_px(refs, online: bool, a: float) -> np.ndarray:
    """log p(x), RMIA's normaliser, from per-token likelihoods p = exp(ℓ): online, the mean
    over all m reference models; offline (every reference OUT), Zarifzadeh et al.'s
    approximation p(x) ≈ ½((1 + a)·p_OUT(x) + (1 − a)), p_OUT the mean over the references."""
    p = np.exp(refs)
    if online:
        return np.log(p.mean(axis=1))
    return np.log(0.5 * ((1 + a) * p.mean(axis=1) + (1 - a)))


def rmia_log_ratio(target, refs, in_mask, a: float = 1.0) -> np.ndarray:
    """RMIA's likelihood ratio in logs (Zarifzadeh et al. 2024, Eq. 3): log p(x|θ) − log p(x),
    p(x|θ) = exp(ℓ) the target's per-token average likelihood and p(x) from the references
    (``_log_px``: online when ``in_mask`` has a True, else offline with ``a``). With a = 1 and
    OUT references only it is ℓ_target − log((1/m) Σ_j exp(ℓ_j)): the audit's ``refs_rmia``."""
    target, refs, in_mask = _bank(target, refs, in_mask)
    return target - _log_px(refs, bool(in_mask.any()), a)


def rmia(target, refs, in_mask, pop_target, pop_refs, gamma: float = 1.0, a: float = 1.0) -> np.ndarray:
    """RMIA, Model-robust (Zarifzadeh et al. 2024, Sec. 3): Score(x) = Pr_z[LR(x, z) ≥ γ] with
    LR(x, z) = (p(x|θ)/p(x)) / (p(z|θ)/p(z)), z over the population samples (never trained on
    by any model), p(·|θ) the target's per-token average likelihood exp(ℓ) — so sequences of
    different length compare — and p(·) the average over the reference models (``_log_px``).

    Online (``in_mask`` has a True): p(x), p(z) = mean over all m references. Offline
    (``in_mask`` all False): p(x) ≈ ½((1 + a)·p_OUT(x) + (1 − a)), and likewise p(z)
    (Zarifzadeh et al., offline RMIA; ml_privacy_meter applies it to both). ``a`` = 1
    (default) is plain p_OUT: the linear pull toward p = 1 that a < 1 models fits a
    classifier's confidence in its label, not an LM's per-token likelihood, which stays far
    below 1 even on training text; tune ``a`` on a paired model as Zarifzadeh et al. do.
    ``pop_target`` (p,), ``pop_refs`` (p, m): the population's ℓ under target and references.
    """
    target, refs, in_mask = _bank(target, refs, in_mask)
    pop_target, pop_refs, _ = _bank(pop_target, pop_refs)
    if pop_refs.shape[1] != refs.shape[1]:
        raise ValueError(f"pop_refs has {pop_refs.shape[1]} reference models, refs {refs.shape[1]}")
    if not len(pop_target):
        raise ValueError("RMIA needs at least one population sample")
    if not np.isfinite(pop_target).all():
        raise ValueError(f"population target ℓ not finite at row {np.flatnonzero(~np.isfinite(pop_target))[0]}")
    if gamma <= 0 or not 0 <= a <= 1:
        raise ValueError(f"RMIA needs γ > 0 and 0 ≤ a ≤ 1; got γ = {gamma}, a = {a}")
    online = bool(in_mask.any())
    log_lr_x = rmia_log_ratio(target, refs, in_mask, a)
    log_lr_z = np.sort(rmia_log_ratio(pop_target, pop_refs, np.full(pop_refs.shape, online), a))
    # LR(x, z) ≥ γ  ⇔  log LR(z) ≤ log LR(x) − log γ: count such z in the sorted population
    counts = np.searchsorted(log_lr_z, log_lr_x - np.log(gamma), side="right")
    return np.where(np.isnan(log_lr_x), np.nan, counts / len(log_lr_z))
