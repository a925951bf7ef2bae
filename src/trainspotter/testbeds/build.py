"""Built-in testbeds with known ground truth.

Testbed ``tiny``: from the packaged Wikipedia leads, seeded disjoint member /
non-member / held-out splits of fixed-length token chunks; a small reference LM
trained on text disjoint from all three; and a target LM = the reference further
fine-tuned on the members (the EZ-MIA setting, Sec. 4: target = reference +
fine-tuning on members), so the members are measurably memorised. Everything is
built offline on CPU in a few minutes and cached under ``artifacts/testbeds/NAME``.

Testbed ``smollm2`` (``base="smollm2"``): the packaged SmolLM2-135M (ASSETS.md) is the
reference, and the target is that model fully fine-tuned on the members with EZ-MIA's
recipe (App. A, Table 4: AdamW, lr 1e-4, 3 epochs, keeping the epoch checkpoint with
the lowest loss on a disjoint validation split). ``lora=True`` fine-tunes rank-16
LoRA adapters instead (α 32, dropout 0.05; EZ-MIA Sec. 5.3), merged into the saved
target so every backend loads it as a plain model.

Testbed ``tiny-pretrain`` (``mode="pretrain"``): the weak-signal regime of a real audit,
data seen once in pre-training. The 1000 member passages are mixed, once each, into a
pre-training corpus ~6.6 times larger (the other 7033 Wikipedia leads: members are 13% of
the training tokens; the manifest records the counts); the target is a small
LM trained from scratch on corpus + members, the reference the same recipe (same seed,
tokenizer, epochs, and the same visiting order with the member blocks left out) on the
corpus alone. Non-members and held-out are IID splits of the same passages that neither
model ever sees (their whole passages are kept out of the corpus). Per-sample membership
signals are then weak (AUROC well below the fine-tuned testbeds' ~1.0), as in the
pre-training-contamination literature, so dataset inference needs hundreds of pairs.
Pre-training testbeds can also have K OUT and K IN reference models of their own seeds and
corpus subsets (``trainspotter.testbeds.reference_models``, under ``NAME/refs``).
``mini`` and ``mini-pretrain`` are seconds-scale versions for tests. ``trainspotter.presets.TESTBEDS``
is the registry: each testbed's one-line description and recipe (for ``trainspotter testbed --help``
without importing torch); ``PRESETS`` makes each recipe a ``TestbedConfig``.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import torch
from filelock import FileLock, Timeout

from trainspotter import __version__
from trainspotter.assets import wikipedia_leads
from trainspotter.config import fingerprint
from trainspotter.errors import InputError
from trainspotter.testbeds.training import (finetune, load_smollm2, save_model, scratch_model, train_causal_lm,
                                                 train_tokenizer)
from trainspotter.testbeds.recipes import PRESETS, TestbedConfig  # noqa: F401  (PRESETS: re-exported)
from trainspotter.testbeds.keyed_variant import build_keyed
from trainspotter.testbeds.twins_variant import build_twins
from trainspotter.layout import load_manifest, testbed_dir  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

SPLITS = ("member", "nonmember", "heldout")
VALIDATION = "validation"  # checkpoint selection only (pretrained bases); never audited


def split_path(name: str, split: str, root: Path | None = None) -> Path:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return testbed_dir(name, root) / f"{split}.jsonl"


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def build_testbed(config: TestbedConfig, root: Path | None = None, force: bool = False,
                  progress: Callable[[str, int, int], None] | None = None,
                  lock_timeout: float = 3600.0) -> Path:
    """Build (or reuse, when the cached one has the same config) a testbed; returns its dir.
    Processes that ask for the same testbed at once wait for one build (a file lock), at
    most ``lock_timeout`` seconds; then InputError names the lock file."""
    if config.twins and config.twins_rewriter is None:  # (a model_copy skips the validator)
        config = TestbedConfig.model_validate(config.model_dump())
    out = testbed_dir(config.name, root)
    key = fingerprint(config, __version__)
    with build_lock(out.parent / f".{config.name}.lock", f"testbed {config.name!r}", lock_timeout):
        manifest = load_manifest(config.name, root)
        if manifest and manifest.get("fingerprint") == key and not force:
            return out
        return _build(config, out, key, progress)


def build_lock(path: Path, what: str, timeout: float) -> AbstractContextManager:
    """The acquired OS-level lock (flock; released when its holder exits, even when it
    crashes) that one build of ``what`` holds; InputError naming ``path`` after ``timeout`` s."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return FileLock(path, timeout=timeout).acquire()
    except Timeout:
        raise InputError(f"{what}: another process still holds the build lock {path} after "
                         f"{timeout:g} s; wait for that build to finish or stop it, then retry") from None


def _manifest(config: TestbedConfig, key: str, start: float, records: list[dict], chosen: dict, trained: dict,
              twins_made: dict | None, keyed_made: dict | None) -> dict:
    """What the build wrote down (manifest.json, written last: its presence says "complete")."""
    manifest = {
        "name": config.name, "fingerprint": key, "config": config.model_dump(),
        "version": __version__, "build_seconds": round(time.time() - start, 1),
        "torch_threads": torch.get_num_threads(),
        "splits": {s: [records[i]["id"] for i in ids] for s, ids in chosen.items()},
        **trained,
        "ground_truth": _ground_truth(config),
    }
    if config.twins:
        manifest["twins"] = twins_made
        manifest["ground_truth"]["member"] += (" (its public twin; twins-member/ holds the twins, "
                                               "whose private versions were never trained on)")
    if config.keyed:
        manifest["keyed"] = keyed_made
        manifest["ground_truth"]["member"] += " (its public version in the keyed release, release/)"
    return manifest


def _build(config: TestbedConfig, out: Path, key: str,
           progress: Callable[[str, int, int], None] | None) -> Path:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    start = time.time()
    out.mkdir(parents=True, exist_ok=True)
    # The manifest says "complete": gone until the new one is written last, so a rebuild
    # killed half-way (--force, or a new recipe) is never taken for a finished testbed.
    (out / "manifest.json").unlink(missing_ok=True)
    torch.manual_seed(config.seed)
    records = wikipedia_leads()
    if config.base == "scratch":
        tokenizer = train_tokenizer([r["text"] for r in records], config.vocab_size)
        model = None
    else:
        tokenizer, model = load_smollm2()
    bos = tokenizer.bos_token_id
    head = [bos] if bos is not None else []  # scored with BOS first (HFBackend.encode)
    encoded = tokenizer([r["text"] for r in records], add_special_tokens=False)["input_ids"]

    order, chosen = _splits(config, encoded)
    L = config.chunk_tokens
    used = {i for ids in chosen.values() for i in ids}
    twins_made = keyed_made = None
    if config.twins:  # from here on a split passage is its public version (whole, for training)
        chosen, twins_made = build_twins(config, records, encoded, tokenizer, chosen, out)
    if config.keyed:  # the members: one release under one key, each its public version
        chosen, keyed_made = build_keyed(config, records, encoded, tokenizer, chosen, out)
    for split, ids in chosen.items():
        _write_jsonl(out / f"{split}.jsonl", [
            {"id": records[i]["id"], "text": tokenizer.decode(encoded[i][:L])} for i in ids])
    blocks = {s: torch.tensor([head + encoded[i][:L] for i in ids]) for s, ids in chosen.items()}

    def report(stage):
        return (lambda i, total, loss: progress(stage, i, total)) if progress else None

    if config.mode == "pretrain":
        if config.base != "scratch":
            raise ValueError("mode='pretrain' trains both models from scratch (base='scratch')")
        trained = _pretrain(config, tokenizer, encoded, order, chosen, head, out, report)
    elif config.base == "scratch":
        # Reference pre-training text: every other passage, cut into L-token blocks.
        ref_blocks = torch.tensor([head + encoded[i][s:s + L] for i in order if i not in used
                                   for s in range(0, len(encoded[i]) - L + 1, L)])
        model = scratch_model(config, len(tokenizer), bos)
        ref_loss = train_causal_lm(model, ref_blocks, steps=config.reference_steps,
                                   batch_size=config.batch_size, lr=config.reference_lr,
                                   seed=config.seed, progress=report("reference"))
        trained = {"reference_blocks": len(ref_blocks), "reference_final_loss": ref_loss}
    else:
        trained = {"reference": "SmolLM2-135M-Instruct (packaged gguf, dequantised to fp32)"}
    if config.mode == "finetune":
        save_model(model, tokenizer, out / "reference")
        if config.base == "scratch":
            trained["target_final_loss"] = train_causal_lm(
                model, blocks["member"], steps=config.target_epochs,
                batch_size=config.target_batch_size, lr=config.target_lr, seed=config.seed + 1,
                epochs=True, progress=report("target"))
        else:
            model, trained["epochs"] = finetune(model, blocks["member"], blocks[VALIDATION],
                                                 config, report("target"))
        save_model(model, tokenizer, out / "target")

    manifest = _manifest(config, key, start, records, chosen, trained, twins_made, keyed_made)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    log.info("built testbed %s in %.0f s", config.name, manifest["build_seconds"])
    return out


def _splits(config: TestbedConfig, encoded: list[list[int]]) -> tuple[list[int], dict[str, list[int]]]:
    """The seeded passage order and the disjoint splits (passage indices) over passages long enough
    for one full chunk; one chunk per passage keeps the pairs independent."""
    order = list(range(len(encoded)))
    random.Random(config.seed).shuffle(order)
    L, n = config.chunk_tokens, config.n_per_split
    names = SPLITS + ((VALIDATION,) if config.validation else ())
    sizes = [n] * len(SPLITS) + ([config.validation] if config.validation else [])
    eligible = [i for i in order if len(encoded[i]) >= L]
    if len(eligible) < sum(sizes):
        raise ValueError(f"only {len(eligible)} passages have {L} tokens; need {sum(sizes)}")
    bounds = [sum(sizes[:k]) for k in range(len(sizes) + 1)]
    return order, {s: eligible[bounds[k]:bounds[k + 1]] for k, s in enumerate(names)}


def _ground_truth(config: TestbedConfig) -> dict[str, str]:
    """The manifest's ground truth: what each split is to the target."""
    return ({"member": "in the target's fine-tuning data" if config.mode == "finetune"
             else f"mixed {_times(config.member_repeats)} into the target's pre-training corpus, not the reference's",
             "nonmember": "never trained on", "heldout": "never trained on"}
            | ({VALIDATION: "never trained on; picks the fine-tuning checkpoint"} if config.validation else {}))


def _times(k: int) -> str:
    return {1: "once", 2: "twice"}.get(k, f"{k} times")


def passage_blocks(tokens: list[int], head: list[int], length: int) -> list[list[int]]:
    """Every full ``length``-token chunk of a passage from its start, BOS first (the way
    passages are scored); a tail shorter than ``length`` is dropped."""
    return [head + tokens[s:s + length] for s in range(0, len(tokens) - length + 1, length)]


def epoch_order(n_blocks: int, epochs: int, seed: int) -> torch.Tensor:
    """Block indices to visit: a fresh seeded permutation per epoch (each block once per epoch)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.cat([torch.randperm(n_blocks, generator=gen) for _ in range(epochs)])


def pretrain_scratch(config: TestbedConfig, tokenizer, blocks: torch.Tensor, order: torch.Tensor,
                     seed: int, progress=None):
    """A fresh LM (initial weights drawn from ``seed``) pre-trained on ``blocks`` in ``order``
    with the testbed's recipe (one-cycle AdamW, peak ``reference_lr``); returns (model, last loss)."""
    torch.manual_seed(seed)
    model = scratch_model(config, len(tokenizer), tokenizer.bos_token_id)
    loss = train_causal_lm(model, blocks, order=order, batch_size=config.batch_size,
                           lr=config.reference_lr, seed=seed, progress=progress)
    return model, loss


def _pretrain(config: TestbedConfig, tokenizer, encoded: list[list[int]], order: list[int],
              chosen: dict[str, list[int]], head: list[int], out: Path, report) -> dict:
    """Pre-training contamination: the target is trained from scratch on the corpus plus the
    whole member passages (each block ``member_repeats`` times per epoch, the copies spread
    by the shuffle), the reference identically (same initial weights, same block order) with
    the member blocks left out. The corpus is every passage outside the splits, so no part of
    a non-member or held-out passage is trained on. Member tokens and their share count the
    copies (what the target trains on per epoch); ``member_blocks`` counts distinct blocks."""
    L = config.chunk_tokens
    used = {i for ids in chosen.values() for i in ids}
    corpus_ids = [i for i in order if i not in used][:config.corpus_passages]
    corpus = [c for i in corpus_ids for c in passage_blocks(encoded[i], head, L)]
    members = [c for i in chosen["member"] for c in passage_blocks(encoded[i], head, L)]
    blocks = torch.tensor(corpus + members * config.member_repeats)  # rows from len(corpus) on: members
    visits = {"target": epoch_order(len(blocks), config.pretrain_epochs, config.seed)}
    visits["reference"] = visits["target"][visits["target"] < len(corpus)]
    trained = {}
    for role in ("reference", "target"):  # the same initial weights for both
        model, trained[f"{role}_final_loss"] = pretrain_scratch(config, tokenizer, blocks, visits[role],
                                                                config.seed, report(role))
        trained[f"{role}_steps"] = math.ceil(len(visits[role]) / config.batch_size)
        save_model(model, tokenizer, out / role)
    block_tokens = blocks.shape[1]  # BOS + L
    corpus_tokens = len(corpus) * block_tokens
    member_tokens = len(members) * config.member_repeats * block_tokens  # the copies included
    return trained | {
        "epochs": config.pretrain_epochs, "member_repeats": config.member_repeats,
        "corpus_passages": len(corpus_ids),
        "corpus_blocks": len(corpus), "member_blocks": len(members),
        "corpus_tokens": corpus_tokens, "member_tokens": member_tokens,
        # per epoch; every block has the same length, so this is also the share of blocks
        "member_fraction": member_tokens / (corpus_tokens + member_tokens),
        "corpus": [wikipedia_leads()[i]["id"] for i in corpus_ids],
    }
