"""MiniLM similarity for twins (``twins.make_twins``' gate and the stored ``similarity``).

``minilm_similarity``: the cosine similarity of the packaged all-MiniLM-L6-v2 embeddings of
originals and variants, each list encoded in batches (what private.jsonl stores, rounded to 6
decimals, unchanged since the first twins folders).

``OriginalCache``: the gate's similarity of one variant to its passage, computed as
``minilm_similarity([original], [variant])[0]`` always was, one text per forward pass, with the
original's embedding kept for the passage's next variants and redraws instead of encoded again
on every attempt (which took most of a generative twins build: 64 of 71 minutes on the
tiny-pretrain-twins-smollm2 testbed). Embeddings batched across passages are not those of one
text per pass: sentence-transformers pads a batch to its longest text, and the padded matrix
products differ in the last bits (measured on 200 of that testbed's passages and their 800
paraphrases: 26 of 200 originals and 68 of 800 variants encoded bit-identically, similarities
off by up to 3e-7, 41 of 800 differing after rounding to 6 decimals; benchmarks/results/
twins_gate.md), so a batched gate could decide a borderline variant otherwise. One text per
pass keeps every decision (and so every twins folder) the one it was; what is saved is every
repeated encoding of an original.
"""

from __future__ import annotations

import numpy as np

__all__ = ["OriginalCache", "minilm_similarity"]


def _encoder():
    from transformers.utils import logging as hf_logging

    from trainspotter.features.probability import minilm

    hf_logging.disable_progress_bar()  # "Loading weights" on stderr
    return minilm()


def _encode(texts: list[str]) -> np.ndarray:
    return _encoder().encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True,
                             show_progress_bar=False)


def _cosine(a: np.ndarray, b: np.ndarray) -> list[float]:
    return [round(float(x), 6) for x in (a * b).sum(axis=1)]


def minilm_similarity(originals: list[str], variants: list[str]) -> list[float]:
    """Cosine similarity of the packaged all-MiniLM-L6-v2 embeddings (the BADI App. A.6 encoder),
    rounded to 6 decimals; each list encoded in batches of 64."""
    return _cosine(_encode(originals), _encode(variants))


class OriginalCache:
    """``similarity(original, variant)`` equal, bit for bit, to ``minilm_similarity([original],
    [variant])[0]``: each text encoded alone (module docstring), the last original's embedding
    kept (``make_twins`` gates a passage's variants one after another)."""

    def __init__(self):
        self.original: str | None = None
        self.embedding: np.ndarray | None = None
        self.encoded = 0  # texts encoded (originals and variants): what the cache saves

    def similarity(self, original: str, variant: str) -> float:
        if original != self.original:
            self.original, self.embedding = original, _encode([original])
            self.encoded += 1
        self.encoded += 1
        return _cosine(self.embedding, _encode([variant]))[0]
