"""Membership features that combine K ≥ 2 reference models (``--reference`` given K times).

Each is a function of per-token log-prob arrays (gray-box log-probs or black-box
estimates, as in ``trainspotter.features.features``) of the target and of every reference
on one passage; ℓ = (1/n) Σ log p(x_i | x_<i) is the mean token log-likelihood (−log PPL).
Every one of them compares the target with the references: a statistic of the references
alone (their mean or spread) measures how hard the text is, not whether the target trained
on it, so it would let an easier held-out set pass for membership evidence.

One implementation per formula: each feature is the benchmark's model-based method
(``trainspotter.features.model_based``, higher = member, all references OUT) on one
passage; ``BENCHMARK_TWINS`` says which method, with which variance and in which form, so a
test ties each feature to its benchmark twin. ``refs_diff`` keeps the loss form of the K = 1
``{a}_ref_diff`` (log PPL target − reference, lower = member): it is −Model-calibration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trainspotter.features import model_based

__all__ = ["refs_diff", "refs_lira", "refs_token_lira", "refs_rmia", "BenchmarkTwin", "BENCHMARK_TWINS"]


@dataclass(frozen=True)
class BenchmarkTwin:
    """The benchmark's method (a ``model_based`` function) that a reference feature is, on one
    passage with K OUT references: feature = ``sign`` × function(ℓ_target, ℓ_refs, **kwargs)."""

    function: str  # name in trainspotter.features.model_based
    kwargs: tuple[tuple[str, object], ...] = ()
    sign: int = +1
    method: str | None = None  # the benchmark row (evaluation.mia.METHODS) computing it, if one does

    def __call__(self, target: np.ndarray, refs: np.ndarray) -> np.ndarray:
        """The twin on arrays: ``target`` (n,), ``refs`` (n, K), all references OUT."""
        fn = getattr(model_based, self.function)
        return self.sign * fn(target, refs, np.zeros(refs.shape, bool), **dict(self.kwargs))


# feature suffix (after "{access}_refs_") -> its model-based twin; refs_token_lira is refs_lira's
# formula per token (no benchmark row scores tokens)
BENCHMARK_TWINS = {
    "diff": BenchmarkTwin("model_calibration", sign=-1, method="model_calibration"),
    # the benchmark's "LiRA (offline, global σ)" row shares one σ across passages; the audit's
    # feature sees one passage at a time, so its σ is that passage's own
    "lira": BenchmarkTwin("lira_offline", (("variance", "per_example"), ("log", False))),
    "rmia": BenchmarkTwin("rmia_log_ratio", (("a", 1.0),)),
}


def _check(references: Sequence[Sequence[float]]) -> None:
    if len(references) < 2:
        raise ValueError(f"these features combine at least 2 references, got {len(references)}")


def _means(target: Sequence[float], references: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """ℓ of the target as a (1,) array and of the K references as a (1, K) bank."""
    _check(references)
    return (np.array([np.mean(target)], dtype=np.float64),
            np.array([[np.mean(r) for r in references]], dtype=np.float64))


def _twin(name: str, target: Sequence[float], references: Sequence[Sequence[float]]) -> float:
    l_t, l_k = _means(target, references)
    if not np.isfinite(l_k).all():
        return float("nan")  # a reference without a finite ℓ: no value is invented
    return float(BENCHMARK_TWINS[name](l_t, l_k)[0])


def refs_diff(target: Sequence[float], references: Sequence[Sequence[float]]) -> float:
    """log PPL_target − (1/K) Σ_k log PPL_k: the target's loss calibrated by the mean loss of K
    reference models (Watson et al. 2022, difficulty calibration with K reference models;
    TDDBench A.1.3 "Model-calibration"), i.e. −``model_based.model_calibration``. With K = 1
    it is ``{a}_ref_diff``. Lower = member."""
    return _twin("diff", target, references)


def refs_lira(target: Sequence[float], references: Sequence[Sequence[float]]) -> float:
    """Offline LiRA (Carlini et al. 2022, Sec. IV-C, Eq. 4 with OUT models only): fit
    N(μ, σ²) to the K references' ℓ_k (σ per passage, ddof = 1) and return the one-sided
    Φ((ℓ_target − μ)/σ), the probability that an OUT model gives this passage a lower ℓ:
    ``model_based.lira_offline(variance="per_example", log=False)``.
    For a sequence the statistic is ℓ itself (as Hayes et al. 2025 for LMs), not the logit-
    scaled confidence of a classifier. Bounded in [0, 1], so a passage whose few references
    happen to agree cannot dominate a linear scoring model. Higher = member."""
    return _twin("lira", target, references)


def refs_token_lira(target: Sequence[float], references: Sequence[Sequence[float]]) -> float:
    """Offline LiRA per token, averaged: (1/n) Σ_i Φ((log p_t(x_i) − μ_i)/σ_i), with μ_i, σ_i
    the mean and standard deviation (ddof = 1) over the K references at position i (Carlini
    et al. 2022, Eq. 4, applied to each token's log-probability; ``refs_lira``'s formula with
    the tokens as rows). Needs every model to score the same positions (one tokenizer); NaN
    otherwise, as EZ. Higher = member."""
    t = np.asarray(target, dtype=np.float64)
    _check(references)
    if any(len(r) != t.size for r in references):
        return float("nan")
    r = np.asarray(references, dtype=np.float64).T  # (n tokens, K)
    if not np.isfinite(r).all():
        return float("nan")
    return float(BENCHMARK_TWINS["lira"](t, r).mean())


def refs_rmia(target: Sequence[float], references: Sequence[Sequence[float]]) -> float:
    """RMIA's likelihood ratio (Zarifzadeh et al. 2024, Eq. 3), in logs: log Pr(x|θ) − log Pr(x)
    with Pr(x|θ) = exp(ℓ) the per-token average likelihood (so passages of any length
    compare) and Pr(x) = (1/K) Σ_k exp(ℓ_k) over the K references, all OUT models (the
    offline estimate with a = 1): ``model_based.rmia_log_ratio``, the step inside the
    benchmark's RMIA. RMIA's score compares this ratio with those of population samples z; a
    linear scoring model fed the log-ratio learns a threshold on it directly. Higher = member."""
    return _twin("rmia", target, references)
