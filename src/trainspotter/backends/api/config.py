"""What an ``openai:`` spec sets (``APIConfig``) and the identity of what answers it."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path


@dataclass
class APIConfig:
    """Everything a spec can set. Only ``model`` and ``base_url`` identify the server."""

    model: str
    base_url: str
    tokenizer: str | None = None  # local tokenizer: a HF dir or a spec (hf:PATH, testbed:NAME)
    key_env: str = "OPENAI_API_KEY"
    mode: str = "auto"
    batch: int = 32  # prompts per /v1/completions request
    top_logprobs: int | None = None  # None: the largest the server accepts (modes.TOP_KS)
    timeout: float = 60.0  # seconds per request
    retries: int = 6  # retries per request after the first attempt
    backoff: float = 0.5  # first retry delay in seconds, doubled each time, times 1 + U[0,1)
    seed: int = 0  # jitter RNG
    max_requests: float = math.inf
    max_tokens: float = math.inf
    max_cost: float = math.inf
    price_prompt_1k: float = 0.0
    price_completion_1k: float = 0.0
    cache: str | None = None  # SQLite path; default artifacts_root()/query-cache.sqlite


def api_fingerprint(model: str, base_url: str) -> str:
    """Identity of the answering model: its name and endpoint, never the key."""
    return hashlib.sha256(json.dumps(["openai", model, base_url.rstrip("/")]).encode()).hexdigest()[:16]


def tokenizer_identity(path: str | Path) -> str:
    """Digest of the tokenizer files (positions change when they do); of a ``.gguf`` file,
    the whole file (its tokenizer lives in the metadata)."""
    path = Path(path)
    if path.is_file():
        from trainspotter.backends.weights import weights_fingerprint

        return weights_fingerprint(path)
    h = hashlib.sha256()
    files = {f for pat in ("*token*", "*vocab*", "*merges*", "*.model") for f in path.glob(pat)}
    for f in sorted(files):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]
