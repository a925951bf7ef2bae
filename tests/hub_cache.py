"""A Hugging Face hub cache made in a test, laid out as ``huggingface_hub`` writes it (its
"Understand caching" guide): ``<cache>/<models|datasets>--ORG--NAME/`` with ``blobs/<sha256>``,
``snapshots/<commit>/<path>`` links to those blobs, and ``refs/<branch>`` holding the commit a
branch points at. Nothing is downloaded: a test writes a snapshot from files it made (a tiny model
saved from a config, small parquet files) and points ``HF_HOME`` at the folder."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path


def repo_folder(cache: Path, repo_type: str, repo_id: str) -> Path:
    """``<cache>/models--ORG--NAME`` (``repo_type`` "model") or ``datasets--ORG--NAME``."""
    return Path(cache) / f"{repo_type}s--{repo_id.replace('/', '--')}"


def write_snapshot(cache: Path, repo_type: str, repo_id: str, files: dict[str, Path | bytes], commit: str,
                   ref: str | None = "main") -> Path:
    """Snapshot ``commit`` (40 hex digits) of ``repo_id`` holding ``files`` (path in the repo → a
    file or folder to copy, or bytes), each a relative link into ``blobs/``; ``ref`` (a branch, or
    None for a snapshot no branch names) made to point at it. Returns the snapshot folder."""
    assert len(commit) == 40 and all(c in "0123456789abcdef" for c in commit), commit
    repo = repo_folder(cache, repo_type, repo_id)
    snapshot, blobs = repo / "snapshots" / commit, repo / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    for name, content in _flatten(files):
        digest = hashlib.sha256(content).hexdigest()
        (blobs / digest).write_bytes(content)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(os.path.relpath(blobs / digest, link.parent))
    if ref is not None:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snapshot


def _flatten(files: dict[str, Path | bytes]):
    for name, content in files.items():
        if isinstance(content, bytes):
            yield name, content
        elif Path(content).is_dir():
            for p in sorted(Path(content).rglob("*")):
                if p.is_file():
                    yield f"{name}/{p.relative_to(content)}".lstrip("/"), p.read_bytes()
        else:
            yield name, Path(content).read_bytes()


def copy_cache(cache: Path, to: Path) -> Path:
    """A copy of a whole cache (links kept), for a test that changes a ref without touching another's."""
    shutil.copytree(cache, to, symlinks=True)
    return to
