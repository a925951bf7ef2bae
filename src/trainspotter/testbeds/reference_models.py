"""Reference models of a pre-training testbed (issue 19): K OUT and K IN models for the
reference-model benchmarks (LiRA offline/online, Model-loss, RMIA).

Each model is the target's recipe (``pretrain_scratch``: architecture, tokenizer, epochs, lr,
batch size) with its own seed (initial weights and block order) on its own seeded random
subset of the base testbed's corpus passages (``ReferenceConfig.corpus_fraction``; by default
all of them, so the models differ from the target in seed and, IN models, in which candidates
replace which corpus passages):

- ``out-i`` sees no member, non-member or held-out text: a shadow model on fresh samples of
  the data distribution, as LiRA's OUT models (Carlini et al. 2022, "Membership Inference
  Attacks From First Principles", Alg. 1) and RMIA's reference models (Zarifzadeh et al. 2024);
- ``in-i`` also sees a seeded random half of the *candidates* (member ∪ non-member, the
  passages the per-sample benchmark scores), every block of each chosen passage once per
  epoch (``member_repeats`` times, as the target's members), in place of as many corpus
  passages, so IN and OUT models train on the same number of passages (LiRA's IN and OUT
  datasets differ only in the candidates): LiRA's online IN models, where each candidate is
  IN for about half of the models. The manifest records exactly which candidate ids each IN
  model saw.

Held-out passages are in no model: they are the audit's held-out side and RMIA's population.

Layout: ``testbeds/NAME/refs/{out,in}-i/`` (an HF model dir) and ``refs/manifest.json``, whose
entry for a model is written last, after its directory is complete: a model without an entry
(a killed build) or with an entry for another base build or recipe is rebuilt. Growing K
reuses the models built already.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import torch
from pydantic import BaseModel, Field

from trainspotter.assets import wikipedia_leads
from trainspotter.config import code_digest, fingerprint
from trainspotter.errors import InputError
from trainspotter.testbeds.training import save_model
from trainspotter.testbeds.build import (PRESETS, TestbedConfig, build_lock, build_testbed, epoch_order,
                                             passage_blocks, pretrain_scratch)
from trainspotter.layout import load_manifest, load_reference_manifest, references_dir  # noqa: F401  (re-exported)
from trainspotter.presets import check_testbed

KINDS = ("out", "in")
CANDIDATES = ("member", "nonmember")  # the IN models' extra passages: half of these


class ReferenceConfig(BaseModel):
    """The reference recipe on top of the base testbed's (part of each model's cache key)."""

    # Share of the base corpus passages per model. 1: every model trains on as many passages as
    # the target's corpus (IN models swap candidates in for corpus passages), so its seed alone
    # tells it apart. On tiny-pretrain with 4 OUT models, Model-calibration's AUROC was 0.535
    # (0.5, 8 models), 0.600 (0.9) and 0.620 (1.0): a model trained on less text has a loss
    # level of its own, which hides the members' small gain.
    corpus_fraction: float = Field(1.0, gt=0, le=1)


def build_references(name_or_config: str | TestbedConfig, k: int, root: Path | None = None,
                     progress: Callable[[str, int, int], None] | None = None,
                     recipe: ReferenceConfig | None = None, force: bool = False,
                     lock_timeout: float = 3600.0) -> Path:
    """Build (or reuse) ``out-0..out-(k-1)`` and ``in-0..in-(k-1)`` of a pre-training testbed,
    building the base testbed first if needed; returns the ``refs`` dir. ``force`` retrains
    these 2k models (not the base). One process builds at a time (a file lock)."""
    config = check_request(name_or_config, k)
    recipe = recipe or ReferenceConfig()
    base_dir = build_testbed(config, root, progress=progress, lock_timeout=lock_timeout)
    out = references_dir(config.name, root)
    with build_lock(out.parent.parent / f".{config.name}.refs.lock",
                    f"reference models of testbed {config.name!r}", lock_timeout):
        base = load_manifest(config.name, root)
        wanted = {f"{kind}-{i}": _model_key(base["fingerprint"], kind, i, recipe)
                  for i in range(k) for kind in KINDS}
        manifest = load_reference_manifest(config.name, root) or {"testbed": config.name, "models": {}}
        todo = [m for m, key in wanted.items() if force or manifest["models"].get(m, {}).get("key") != key]
        if not todo:
            return out
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        out.mkdir(exist_ok=True)
        data = _TrainingData(config, base_dir, base)
        for model in todo:
            if manifest["models"].pop(model, None):  # its dir is about to be replaced
                _write_manifest(out, manifest)
            kind, i = model.split("-")
            entry = _build_one(config, recipe, data, out, kind, int(i), progress)
            manifest["models"][model] = entry | {"key": wanted[model], "base_fingerprint": base["fingerprint"]}
            _write_manifest(out, manifest)  # last: the entry says the model is complete
    return out


def check_request(name_or_config: str | TestbedConfig, k: int) -> TestbedConfig:
    """The testbed's config, once it is known that it can have ``k`` reference models per kind
    (checked before anything is built)."""
    config = name_or_config
    if not isinstance(config, TestbedConfig):
        config = PRESETS[check_testbed(config)]
    if config.mode != "pretrain" or config.twins:  # (IN models of a twins testbed would need the public versions)
        fits = ", ".join(n for n, c in PRESETS.items() if c.mode == "pretrain" and not c.twins)
        raise InputError(f"testbed {config.name!r}: reference models are built for pre-training testbeds "
                         f"without twins only ({fits})")
    if k < 1:
        raise InputError(f"testbed {config.name!r}: the number of reference models per kind must be "
                         f"at least 1, got {k}")
    return config


# The code a reference model depends on: editing it retrains the models (the base testbed's
# key is the package version instead; see testbeds/build.py).
REFERENCE_CODE = ("trainspotter.testbeds.reference_models", "trainspotter.testbeds.training")


def _model_key(base_fingerprint: str, kind: str, index: int, recipe: ReferenceConfig) -> str:
    return fingerprint(base_fingerprint, kind, index, recipe, code_digest(*REFERENCE_CODE))


def model_seed(base_seed: int, kind: str, index: int) -> int:
    """A model's own seed (initial weights, block order, corpus and candidate subsets),
    different from the target's and from every other reference model's."""
    return int(fingerprint("reference-model", base_seed, kind, index), 16) % 2**31


class _TrainingData:
    """The base testbed's tokenizer and every passage a reference model may see, tokenised as
    the base build did (the saved tokenizer is the one the base trained)."""

    def __init__(self, config: TestbedConfig, base_dir: Path, base: dict):
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(base_dir / "target")
        bos = self.tokenizer.bos_token_id
        head = [bos] if bos is not None else []
        self.corpus = base["corpus"]
        self.candidates = [i for s in CANDIDATES for i in base["splits"][s]]
        text = {r["id"]: r["text"] for r in wikipedia_leads()}
        ids = self.corpus + self.candidates
        encoded = self.tokenizer([text[i] for i in ids], add_special_tokens=False)["input_ids"]
        self.blocks = {i: passage_blocks(e, head, config.chunk_tokens) for i, e in zip(ids, encoded)}


def _build_one(config: TestbedConfig, recipe: ReferenceConfig, data: _TrainingData, out: Path,
               kind: str, index: int, progress) -> dict:
    """Train and save one model into ``out/KIND-INDEX`` (written in a scratch dir, then renamed);
    returns its manifest entry."""
    start = time.time()
    name, seed = f"{kind}-{index}", model_seed(config.seed, kind, index)
    rng = random.Random(seed)
    size = round(recipe.corpus_fraction * len(data.corpus))
    candidates_in = sorted(rng.sample(data.candidates, len(data.candidates) // 2)) if kind == "in" else []
    corpus = sorted(rng.sample(data.corpus, max(0, size - len(candidates_in))))
    # candidates repeated as the target's members are (the IN/OUT datasets differ only in them)
    candidate = [b for i in candidates_in for b in data.blocks[i]] * config.member_repeats
    blocks = torch.tensor([b for i in corpus for b in data.blocks[i]] + candidate)
    order = epoch_order(len(blocks), config.pretrain_epochs, seed)
    report = (lambda i, total, loss: progress(name, i, total)) if progress else None
    model, loss = pretrain_scratch(config, data.tokenizer, blocks, order, seed, report)
    scratch = out / f".{name}.partial"
    shutil.rmtree(scratch, ignore_errors=True)
    save_model(model, data.tokenizer, scratch)
    shutil.rmtree(out / name, ignore_errors=True)  # an unfinished or outdated one
    scratch.rename(out / name)
    return {"kind": kind, "index": index, "seed": seed, "recipe": recipe.model_dump(),
            "corpus_passages": len(corpus), "corpus_blocks": len(blocks) - len(candidate),
            "candidate_blocks": len(candidate), "steps": math.ceil(len(order) / config.batch_size),
            "final_loss": loss, "build_seconds": round(time.time() - start, 1),
            "torch_threads": torch.get_num_threads(), "corpus": corpus,
            **({"candidates_in": candidates_in} if kind == "in" else {})}


def _write_manifest(out: Path, manifest: dict) -> None:
    """Atomically (a reader sees the old or the new file, never half of one)."""
    tmp = out / ".manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, out / "manifest.json")
