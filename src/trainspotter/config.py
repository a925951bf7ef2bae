"""Shared configuration helpers: the artifacts root and config flattening/fingerprints."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import BaseModel


def artifacts_root() -> Path:
    """Where every output goes (MLflow store, Prefect results, testbeds, reports).

    ``$TRAINSPOTTER_ARTIFACTS`` overrides the default ``./artifacts``.
    """
    return Path(os.environ.get("TRAINSPOTTER_ARTIFACTS", "artifacts")).resolve()


def flatten(config: BaseModel | dict, prefix: str = "") -> dict[str, str]:
    """Nested config -> ``{"a.b": "value"}`` for MLflow params."""
    data = config.model_dump(mode="json") if isinstance(config, BaseModel) else config
    flat: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)
    return flat


def fingerprint(*parts: object) -> str:
    """Stable short sha256 of JSON-serialisable parts (cache keys, run tags)."""
    payload = json.dumps([p.model_dump(mode="json") if isinstance(p, BaseModel) else p
                          for p in parts], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
