"""Membership features: pure functions of per-token log-prob arrays (BADI App. A.2).

Convention: ``logprobs`` holds log p(x_i | x_<i) of the actual tokens (natural log).
Higher feature values do not always mean "member": the online scoring model learns
each feature's sign and weight (BADI Sec. 3, App. A.4).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np

from .backends.base import TokenScores

MIN_K = 0.2  # Shi et al. 2024 report K = 20% as a strong default for gray-box access

# Stable column names -> one-line definitions (the catalogue grows with the features issue).
CATALOG = {
    "gray_ppl": "perplexity exp(-mean log p(x_i|x_<i)) under the target (BADI A.2.1)",
    "gray_zlib_ratio": "mean log p under the target / zlib-compressed length in bytes (Carlini et al. 2021)",
    "gray_min_k_20": "mean of the 20% lowest token log-probs under the target (Min-K%, Shi et al. 2024)",
    "gray_ref_ratio": "log-perplexity target / log-perplexity reference (BADI A.2.5)",
    "gray_ref_diff": "log-perplexity target - log-perplexity reference (BADI A.2.5)",
}


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
    """log PPL_target / log PPL_reference (Carlini et al. 2021; BADI App. A.2, item 5)."""
    return log_perplexity(target_logprobs) / log_perplexity(reference_logprobs)


def reference_diff(target_logprobs: Sequence[float], reference_logprobs: Sequence[float]) -> float:
    """log PPL_target - log PPL_reference: the calibrated loss of Watson et al. 2022."""
    return log_perplexity(target_logprobs) - log_perplexity(reference_logprobs)


def gray_features(text: str, target: TokenScores, reference: TokenScores | None = None) -> dict[str, float]:
    """The gray-box feature row of one text (names as in ``CATALOG``)."""
    row = {
        "gray_ppl": perplexity(target.logprobs),
        "gray_zlib_ratio": zlib_ratio(target.logprobs, text),
        "gray_min_k_20": min_k(target.logprobs),
    }
    if reference is not None:
        row["gray_ref_ratio"] = reference_ratio(target.logprobs, reference.logprobs)
        row["gray_ref_diff"] = reference_diff(target.logprobs, reference.logprobs)
    return row


def extract_gray(texts: list[str], target, reference=None) -> list[dict[str, float]]:
    """Feature rows for many texts: one batched forward pass per text per model."""
    t_scores = target.score(texts)
    r_scores = reference.score(texts) if reference is not None else [None] * len(texts)
    return [gray_features(x, t, r) for x, t, r in zip(texts, t_scores, r_scores)]
