"""Query-transfer, ours (after Li & Zhang 2021, "Membership leakage in label-only exposures",
the transfer attack; TDDBench Table 3, App. A.1.4): a surrogate distilled from the target's
label-only answers stands in for the target, and its loss on a candidate is the score.

Li & Zhang query the target on the attacker's auxiliary data, relabel it with the target's
predicted labels, train a surrogate on it and read the surrogate's loss on the candidate. For a
causal LM the predicted label at each position is the greedy next token, so:

- auxiliary data: ``population`` passages, which the target never trained on (the held-out
  split); one target query each (the greedy token at every position, one forward pass);
- surrogate: the (first) reference model — the target's architecture and tokenizer, trained
  without the candidates — fine-tuned on those passages with the target's greedy tokens as
  labels (cross-entropy, AdamW, ``EPOCHS`` passes; ours: Li & Zhang train from scratch,
  which on a few hundred passages would learn no language);
- score: the surrogate's mean token log-likelihood ℓ of the candidate's true tokens
  (``transfer_ll``, −log PPL under the surrogate).

The surrogate is built once per (target, student, auxiliary texts, recipe, code) and kept
under ``artifacts/surrogates/<key>``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import torch

from trainspotter.backends.base import Backend
from trainspotter.backends.hf import load_tokenizer, weights_fingerprint
from trainspotter.config import code_digest, fingerprint
from trainspotter.testbeds.training import save_model

__all__ = ["EPOCHS", "LR", "BATCH_SIZE", "greedy_labels", "distil", "build_surrogate"]

EPOCHS, LR, BATCH_SIZE = 3, 5e-4, 16  # the testbeds' fine-tuning recipe (target_lr, target_batch_size)


def greedy_labels(target: Backend, texts: list[str]) -> list[tuple[list[int], list[int]]]:
    """Per text, ([BOS] + token ids, the target's greedy token at each scored position): the
    label-only answers of one query per text."""
    return [(target.encode(t), s.argmax.tolist()) for t, s in zip(texts, target.score(texts))]


def distil(student: Path, pairs: list[tuple[list[int], list[int]]], out: Path, epochs: int = EPOCHS,
           lr: float = LR, batch_size: int = BATCH_SIZE, seed: int = 0) -> Path:
    """Fine-tune the causal LM at ``student`` so that after ids[:i+1] it predicts the
    target's greedy token labels[i] (the padding and BOS positions carry no label); save it
    with the student's tokenizer to ``out``."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(student, local_files_only=True)
    tokenizer = load_tokenizer(student)
    pad = tokenizer.pad_token_id or 0
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(pairs), generator=gen).split(batch_size):
            batch = [pairs[i] for i in idx.tolist()]
            width = max(len(ids) for ids, _ in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            labels = torch.full((len(batch), width), -100, dtype=torch.long)  # -100: no loss
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (x, y) in enumerate(batch):
                ids[row, :len(x)], mask[row, :len(x)] = torch.tensor(x), 1
                labels[row, 1:len(x)] = torch.tensor(y)  # HF shifts: logits at i-1 predict labels[i]
            model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    model.eval()
    save_model(model, tokenizer, out)
    return out


def build_surrogate(target: Backend, student: Path, texts: list[str], folder: Path, seed: int = 0) -> Path:
    """The distilled surrogate of ``target`` from ``student`` on the auxiliary ``texts``,
    built once under ``folder/<key>`` (key: target weights, student weights, texts, recipe,
    this module's code); written to a temporary folder first, so a killed build leaves none."""
    texts_digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    key = fingerprint(code_digest(__name__), target.fingerprint, weights_fingerprint(Path(student)), texts_digest,
                      [EPOCHS, LR, BATCH_SIZE, seed])
    out = Path(folder) / key
    if (out / "config.json").exists():
        return out
    tmp = Path(folder) / f".{key}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    distil(Path(student), greedy_labels(target, texts), tmp, seed=seed)
    if (out / "config.json").exists():  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    return out
