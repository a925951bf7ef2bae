"""Identity of a local model's weights from its files, without torch: the digests that key
caches, tag MLflow runs and fill a sealed record (``model_fingerprint``, ``weights_fingerprint``).
A process that never loads the model (the CLI's, while its model worker does: tasks/worker.py)
need not import torch for them."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=64)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of the whole file, once per process per (path, size, mtime): a fine-tune
    or a merged LoRA may change only tensors in the middle of the file."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def weights_fingerprint(path: Path) -> str:
    """Identity of a model's weights without loading them (keys caches and run tags)."""
    path = Path(path)
    weights = [path] if path.is_file() else sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin"))
    digests = []
    for w in weights:
        st = w.stat()
        digests.append(_file_digest(str(w.resolve()), st.st_size, st.st_mtime_ns))
    return hashlib.sha256("".join(digests).encode()).hexdigest()[:16]


def model_fingerprint(path: Path, dtype: str = "float32") -> str:
    """Weights + the dtype they run in (float32 keeps the plain weights fingerprint)."""
    weights = weights_fingerprint(path)
    if dtype == "float32":
        return weights
    return hashlib.sha256(f"{weights}:{dtype}".encode()).hexdigest()[:16]
