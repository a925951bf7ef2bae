"""Shared configuration helpers: the artifacts root, config flattening/fingerprints and
the code digest that keys cached results."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
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


def _read_source(module: str) -> str:
    """Source text of a module, read from its file without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ValueError(f"no Python source for module {module!r}")
    return Path(spec.origin).read_text(encoding="utf-8")


@functools.cache
def _module_digest(module: str) -> str:
    return hashlib.sha256(_read_source(module).encode()).hexdigest()


def code_digest(*modules: str) -> str:
    """Short digest of the source of the named library modules (read once per process).

    Cache keys include it instead of the package version, so editing a formula in any
    of these modules invalidates the cached values it computed, while edits elsewhere
    keep them."""
    return fingerprint(sorted((m, _module_digest(m)) for m in set(modules)))


def file_sha256(path: str | Path) -> str:
    """sha256 of a data file's bytes; of a folder (txt files, a saved HF dataset), of every
    file's relative path and bytes in sorted order; of a dataset named by hub id, of the files of
    its snapshot that were read, the same way. Read in 1 MiB blocks."""
    from trainspotter.data import hub_files

    hub = hub_files(str(path))
    path, h = Path(path), hashlib.sha256()
    files = hub if hub is not None else sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if hub is not None:
            h.update(f.name.encode() + b"\0")
        elif path.is_dir():
            h.update(f.relative_to(path).as_posix().encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()
