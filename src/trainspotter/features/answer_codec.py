"""What a row's gray and black answers share (``features.answers``, ``features.black_answers``): float
arrays stored as the base64 of their little-endian float64 bytes, so the values read back are the very
doubles the backend returned; token ids compared (one tokenizer: positions line up); and the check that
a model gave every log-probability a feature reads."""

from __future__ import annotations

import base64

import numpy as np

from trainspotter.errors import InputError

__all__ = ["decode_floats", "encode_floats", "missing_logprobs", "same_ids"]


def same_ids(a, b) -> bool:
    """Two texts' token ids are the same (one tokenizer: their positions line up); gray and black answers."""
    return bool(np.array_equal(a, b))


def missing_logprobs(arrays: list[np.ndarray], who: str) -> None:
    """InputError unless every log-probability of ``arrays`` (the ``who`` model's) is finite."""
    missing = sum(int((~np.isfinite(a)).sum()) for a in arrays)
    total = sum(a.size for a in arrays)
    if not missing:
        return
    if missing == total:
        raise InputError(f"the {who} model returns no log-probabilities (label-only): "
                         "gray-box features need them; use --access black")
    raise InputError(f"the {who} model returned no log-probability at {missing} of {total} positions "
                     "(see its API mode): gray-box features need all of them; use --access black")


def encode_floats(a: np.ndarray):
    """A float array as base64 of its little-endian float64 bytes (with its shape if not 1-D)."""
    data = base64.b64encode(np.ascontiguousarray(a, dtype="<f8").tobytes()).decode("ascii")
    return data if np.ndim(a) == 1 else {"shape": list(np.shape(a)), "f8": data}


def decode_floats(v) -> np.ndarray:
    """``encode_floats``' inverse: the very doubles encoded."""
    data, shape = (v["f8"], v["shape"]) if isinstance(v, dict) else (v, None)
    a = np.frombuffer(base64.b64decode(data.encode("ascii"), validate=True), dtype="<f8").astype(np.float64)
    return a.reshape(shape) if shape is not None else a
