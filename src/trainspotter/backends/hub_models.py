"""Models named by hub id: ``hf:ORG/NAME[@REVISION]`` resolved to one snapshot of the local
Hugging Face cache (``trainspotter.hub``), fetched first where downloads are allowed, and only the
files a causal LM loads from (config and tokenizer files, the safetensors weights; PyTorch
``.bin`` weights only where a snapshot has no safetensors). The snapshot's **commit** is part of
the model's identity: its fingerprint (so a moved branch is never a cache hit), its sealed
record (``record.format.model_identity``) and ``verify --requery``, which loads the recorded
commit (``record.requery``). A local path that exists is always the path (``hub.is_hub_id``)."""

from __future__ import annotations

import dataclasses
import hashlib

from trainspotter.errors import InputError
from trainspotter.hub import Snapshot, is_hub_id, resolve_snapshot, split_revision

__all__ = ["MODEL_FILES", "TOKENIZER_FILES", "hub_fingerprint", "hub_identity", "model_snapshot"]

# What transformers reads to load a causal LM and its tokenizer (no README, no other formats' weights)
TOKENIZER_FILES = ("*.json", "*.txt", "*.model", "*.tiktoken")
MODEL_FILES = TOKENIZER_FILES + ("*.safetensors",)
BIN_FILES = ("pytorch_model*.bin",)  # an older repository's weights, fetched only without safetensors


def model_snapshot(spec) -> Snapshot | None:
    """The snapshot an ``hf:`` spec ``hf:ORG/NAME[@REVISION]`` names (a tokenizer's, ``spec.weights``
    False: no weights fetched); None for a local path. InputError naming the spec, the cache and
    how to fetch it where the cache lacks it offline (``hub.resolve_snapshot``)."""
    if not is_hub_id(spec.where):
        return None
    try:
        return _resolve(spec)
    except InputError as e:  # a mistyped relative folder reads as a hub id: say that it is not one either
        raise InputError(f"{e} (nor is {spec.where} a local folder or file)") from None


def _resolve(spec) -> Snapshot:
    repo, revision = split_revision(spec.where)
    where = "model spec hf:"  # + "ORG/NAME[@REVISION]: ..." (resolve_snapshot names what was asked)
    if not spec.weights:
        return resolve_snapshot(repo, revision, allow_patterns=list(TOKENIZER_FILES), where=where)
    snap = resolve_snapshot(repo, revision, allow_patterns=list(MODEL_FILES), where=where)
    if next(snap.path.glob("*.safetensors"), None) is None:  # the same commit, with its .bin weights
        more = resolve_snapshot(repo, snap.commit, allow_patterns=[*MODEL_FILES, *BIN_FILES], where=where)
        snap = dataclasses.replace(more, revision=revision)
    return snap


def hub_fingerprint(weights: str, commit: str) -> str:
    """A hub model's fingerprint: its weights' (and dtype's) and the commit (a moved branch whose
    config or tokenizer changed but not its weights still answers otherwise)."""
    return hashlib.sha256(f"{weights}:{commit}".encode()).hexdigest()[:16]


def hub_identity(snap: Snapshot) -> dict:
    """What a sealed record keeps of a snapshot: the id, the revision asked (None: the default
    branch) and the commit it resolved to."""
    return {"id": snap.repo_id, "revision": snap.revision, "commit": snap.commit}

