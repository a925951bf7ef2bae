"""What every model backend offers (local HF weights, an OpenAI-compatible API, ...).

Positions are defined by the backend's *local* tokenizer: a text is encoded as
[BOS] x_1..x_n and position i asks for x_i given x_<i. Gray-box signals need
``score``; a label-only (black-box) backend may fill ``logprobs``, ``mu`` and
``sigma2`` with NaN and still give ``argmax`` (BADI App. A.6). The optional arrays (TDDBench's
metric- and learning-based inputs) need the full next-token distribution: they are filled
only when ``score(..., distribution=True)`` asks for them (they cost more than the rest of
the statistics at a large vocabulary), and a backend that cannot fill them leaves them None,
so the features built on them are NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

TOP_K = 10  # largest next-token probabilities kept per position (learning-based inputs)
PROJECTION_DIM = 16  # width of the fixed random projection of p(·|x_<i) (Learn-original)


@dataclass
class TokenScores:
    token_ids: np.ndarray  # int64 [n] actual tokens x_1..x_n (BOS excluded)
    logprobs: np.ndarray  # float64 [n]
    argmax: np.ndarray  # int64 [n]
    mu: np.ndarray  # float64 [n]
    sigma2: np.ndarray  # float64 [n]
    max_logprob: np.ndarray | None = None  # float64 [n] log max_z p(z|x_<i) (Metric-conf)
    mentr: np.ndarray | None = None  # float64 [n] Song & Mittal's modified entropy (Metric-ment)
    top_logprobs: np.ndarray | None = None  # float64 [n, TOP_K] the largest log p, descending
    projection: np.ndarray | None = None  # float64 [n, PROJECTION_DIM] p(·|x_<i) @ R (Learn-original)


@runtime_checkable
class Backend(Protocol):
    fingerprint: str  # identity of the model (weights, or endpoint + model name)
    tokenizer: object  # local tokenizer that defines positions

    def encode(self, text: str) -> list[int]:
        """[BOS] + token ids of ``text`` under the local tokenizer."""

    def score(self, texts: list[str], distribution: bool = False) -> list[TokenScores]:
        """Per-position signals of each text (one forward pass / request batch per text);
        ``distribution``: also the optional arrays of the whole next-token distribution."""

    def generate(self, prefixes: list[str], max_new_tokens: int | Sequence[int]) -> list[list[int]]:
        """Greedy (temperature-0) continuation token ids of each prefix, at most
        ``max_new_tokens`` of them: one length for all prefixes, or one per prefix."""


def per_prefix(max_new_tokens: int | Sequence[int], n: int) -> list[int]:
    """``generate``'s lengths as one int per prefix (ValueError if a list has another length)."""
    if isinstance(max_new_tokens, (int, np.integer)):
        return [int(max_new_tokens)] * n
    lengths = [int(k) for k in max_new_tokens]
    if len(lengths) != n:
        raise ValueError(f"{len(lengths)} lengths for {n} prefixes")
    return lengths
