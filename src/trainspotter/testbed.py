"""Built-in testbeds with known ground truth.

Testbed ``tiny``: from the packaged Wikipedia leads, seeded disjoint member /
non-member / held-out splits of fixed-length token chunks; a small reference LM
trained on text disjoint from all three; and a target LM = the reference further
fine-tuned on the members (the EZ-MIA setting, Sec. 4: target = reference +
fine-tuning on members), so the members are measurably memorised. Everything is
built offline on CPU in a few minutes and cached under ``artifacts/testbeds/NAME``.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from pathlib import Path

import torch
from pydantic import BaseModel

from . import __version__
from .assets import wikipedia_leads
from .config import artifacts_root, fingerprint

log = logging.getLogger(__name__)

SPLITS = ("member", "nonmember", "heldout")
BOS = "<|endoftext|>"


class TestbedConfig(BaseModel):
    """Sizes and hyperparameters of a testbed; its fingerprint keys the cache."""

    name: str = "tiny"
    seed: int = 0
    chunk_tokens: int = 64  # every passage is cut to this many tokens
    n_per_split: int = 500  # member / non-member / held-out passages each
    vocab_size: int = 2048
    hidden_size: int = 128
    layers: int = 2
    heads: int = 4
    batch_size: int = 32
    reference_steps: int = 600  # pre-training steps on the disjoint text
    reference_lr: float = 3e-3
    target_epochs: int = 3  # fine-tuning epochs over the members
    target_lr: float = 5e-4
    target_batch_size: int = 16


PRESETS = {
    "tiny": TestbedConfig(),
    # A seconds-scale variant for tests; same recipe, smaller everything.
    "mini": TestbedConfig(name="mini", n_per_split=80, vocab_size=1024, hidden_size=64,
                          reference_steps=120, target_epochs=12, target_lr=2e-3),
}


def testbed_dir(name: str, root: Path | None = None) -> Path:
    return (root or artifacts_root()) / "testbeds" / name


def load_manifest(name: str, root: Path | None = None) -> dict | None:
    path = testbed_dir(name, root) / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def split_path(name: str, split: str, root: Path | None = None) -> Path:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return testbed_dir(name, root) / f"{split}.jsonl"


def train_tokenizer(texts: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[BOS], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    # add_bos: the model is trained and scored with BOS first, so token 1 is predicted too.
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=BOS,
                                   pad_token=BOS, add_bos_token=True)


def train_causal_lm(model, blocks: torch.Tensor, *, steps: int, batch_size: int, lr: float,
                    seed: int, epochs: bool = False,
                    progress: Callable[[int, int, float], None] | None = None) -> float:
    """AdamW on next-token loss over fixed-length ``blocks``; returns the last loss.

    ``epochs=False`` samples ``steps`` random batches (pre-training, one-cycle LR);
    ``epochs=True`` makes ``steps`` full shuffled passes (fine-tuning, constant LR).
    """
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    if epochs:
        batches = [b for _ in range(steps)
                   for b in torch.randperm(len(blocks), generator=gen).split(batch_size)]
        sched = None
    else:
        batches = [torch.randint(0, len(blocks), (batch_size,), generator=gen) for _ in range(steps)]
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    model.train()
    loss = torch.tensor(float("nan"))
    for i, idx in enumerate(batches):
        batch = blocks[idx]
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if sched is not None:
            sched.step()
        if progress:
            progress(i + 1, len(batches), float(loss))
    model.eval()
    return loss.item()


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def build_testbed(config: TestbedConfig, root: Path | None = None, force: bool = False,
                  progress: Callable[[str, int, int], None] | None = None) -> Path:
    """Build (or reuse, when the cached one has the same config) a testbed; returns its dir."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    out = testbed_dir(config.name, root)
    key = fingerprint(config, __version__)
    manifest = load_manifest(config.name, root)
    if manifest and manifest.get("fingerprint") == key and not force:
        return out
    start = time.time()
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)
    records = wikipedia_leads()
    tokenizer = train_tokenizer([r["text"] for r in records], config.vocab_size)
    bos = tokenizer.bos_token_id
    encoded = tokenizer([r["text"] for r in records], add_special_tokens=False)["input_ids"]

    # Seeded disjoint splits over passages long enough for one full chunk; one chunk
    # per passage keeps the pairs independent.
    order = list(range(len(records)))
    random.Random(config.seed).shuffle(order)
    L, n = config.chunk_tokens, config.n_per_split
    eligible = [i for i in order if len(encoded[i]) >= L]
    if len(eligible) < 3 * n:
        raise ValueError(f"only {len(eligible)} passages have {L} tokens; need {3 * n}")
    chosen = {s: eligible[k * n:(k + 1) * n] for k, s in enumerate(SPLITS)}
    used = {i for ids in chosen.values() for i in ids}
    for split, ids in chosen.items():
        _write_jsonl(out / f"{split}.jsonl", [
            {"id": records[i]["id"], "text": tokenizer.decode(encoded[i][:L])} for i in ids])

    # Reference pre-training text: every other passage, cut into L-token blocks.
    ref_blocks = torch.tensor([[bos] + encoded[i][s:s + L] for i in order if i not in used
                               for s in range(0, len(encoded[i]) - L + 1, L)])
    member_blocks = torch.tensor([[bos] + encoded[i][:L] for i in chosen["member"]])

    model_cfg = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=config.hidden_size,
        intermediate_size=2 * config.hidden_size, num_hidden_layers=config.layers,
        num_attention_heads=config.heads, num_key_value_heads=config.heads,
        max_position_embeddings=4 * L, tie_word_embeddings=True,
        bos_token_id=bos, eos_token_id=bos, pad_token_id=bos)
    model = LlamaForCausalLM(model_cfg)

    def report(stage):
        return (lambda i, total, loss: progress(stage, i, total)) if progress else None

    ref_loss = train_causal_lm(model, ref_blocks, steps=config.reference_steps,
                               batch_size=config.batch_size, lr=config.reference_lr,
                               seed=config.seed, progress=report("reference"))
    model.save_pretrained(out / "reference")
    tokenizer.save_pretrained(out / "reference")
    target_loss = train_causal_lm(model, member_blocks, steps=config.target_epochs,
                                  batch_size=config.target_batch_size, lr=config.target_lr,
                                  seed=config.seed + 1, epochs=True, progress=report("target"))
    model.save_pretrained(out / "target")
    tokenizer.save_pretrained(out / "target")

    manifest = {
        "name": config.name, "fingerprint": key, "config": config.model_dump(),
        "version": __version__, "build_seconds": round(time.time() - start, 1),
        "splits": {s: [records[i]["id"] for i in ids] for s, ids in chosen.items()},
        "reference_blocks": len(ref_blocks), "reference_final_loss": ref_loss,
        "target_final_loss": target_loss,
        "ground_truth": {"member": "in the target's fine-tuning data",
                         "nonmember": "never trained on", "heldout": "never trained on"},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    log.info("built testbed %s in %.0f s", config.name, manifest["build_seconds"])
    return out
