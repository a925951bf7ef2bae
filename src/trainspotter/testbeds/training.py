"""Training the testbeds' language models: a byte-level BPE tokenizer, a small Llama from
scratch, AdamW on next-token loss, and fine-tuning a pretrained base with EZ-MIA's recipe
(App. A, Table 4; LoRA: Sec. 5.3). ``trainspotter.testbeds.build`` decides what each
model is trained on.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from trainspotter.testbeds.recipes import TestbedConfig

log = logging.getLogger(__name__)

BOS = "<|endoftext|>"

__all__ = ["BOS", "train_tokenizer", "train_causal_lm", "mean_loss", "scratch_model", "load_smollm2", "finetune",
           "save_model"]


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


def train_causal_lm(model, blocks: torch.Tensor, *, steps: int = 0, batch_size: int, lr: float,
                    seed: int, epochs: bool = False, order: torch.Tensor | None = None,
                    progress: Callable[[int, int, float], None] | None = None,
                    optimizer: torch.optim.Optimizer | None = None) -> float:
    """AdamW on next-token loss over fixed-length ``blocks``; returns the last loss.

    ``epochs=False`` samples ``steps`` random batches (pre-training, one-cycle LR);
    ``epochs=True`` makes ``steps`` full shuffled passes (fine-tuning, constant LR);
    ``order`` gives the block indices to visit instead, in batches (pre-training on a
    corpus, one-cycle LR).
    ``optimizer`` continues an existing AdamW (fine-tuning one epoch per call).
    """
    gen = torch.Generator().manual_seed(seed)
    opt = optimizer or torch.optim.AdamW([q for q in model.parameters() if q.requires_grad],
                                         lr=lr, weight_decay=0.0)
    if order is not None:
        batches = list(order.split(batch_size))
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=len(batches),
                                                    pct_start=0.1)
    elif epochs:
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
            progress(i + 1, len(batches), loss.item())
    model.eval()
    return loss.item()


def scratch_model(config: TestbedConfig, vocab: int, bos: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(
        vocab_size=vocab, hidden_size=config.hidden_size,
        intermediate_size=2 * config.hidden_size, num_hidden_layers=config.layers,
        num_attention_heads=config.heads, num_key_value_heads=config.heads,
        max_position_embeddings=4 * config.chunk_tokens, tie_word_embeddings=True,
        bos_token_id=bos, eos_token_id=bos, pad_token_id=bos))


def load_smollm2():
    """SmolLM2-135M from the packaged gguf as a plain fp32 model that ``save_pretrained``
    accepts (ASSETS.md: drop the quantisation config, rebuild, load the weights)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainspotter.assets import smollm2_gguf

    gguf = smollm2_gguf()
    kwargs = {"gguf_file": gguf.name, "local_files_only": True}
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **kwargs)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **kwargs)
    cfg = loaded.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, model.eval()


@torch.inference_mode()
def mean_loss(model, blocks: torch.Tensor, batch_size: int = 16) -> float:
    """Mean next-token loss over fixed-length blocks."""
    model.eval()
    losses = [model(input_ids=b, labels=b).loss.item() * len(b) for b in blocks.split(batch_size)]
    return sum(losses) / len(blocks)


def finetune(model, members: torch.Tensor, validation: torch.Tensor, config: TestbedConfig,
              progress) -> tuple[object, list[dict]]:
    """EZ-MIA App. A: AdamW, ``target_epochs`` epochs; keep the epoch with the lowest
    validation loss. With ``lora`` only rank-r adapters train (merged afterwards)."""
    if config.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(
            r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM"))
    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=config.target_lr,
                            weight_decay=0.0)
    epochs, best, best_state = [], math.inf, None
    for epoch in range(1, config.target_epochs + 1):
        train_loss = train_causal_lm(model, members, steps=1, batch_size=config.target_batch_size,
                                     lr=config.target_lr, seed=config.seed + epoch, epochs=True,
                                     progress=progress, optimizer=opt)
        val = mean_loss(model, validation)
        epochs.append({"epoch": epoch, "train_loss": train_loss, "validation_loss": val})
        log.info("fine-tuning epoch %d: train %.3f, validation %.3f", epoch, train_loss, val)
        if val < best:
            best = val
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    if config.lora:
        model = model.merge_and_unload()
    return model.eval(), epochs


def save_model(model, tokenizer, path: Path) -> None:
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
