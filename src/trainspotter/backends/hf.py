"""Local Hugging Face backend: gray-box token signals from one forward pass per text.

For each text we return, at every position i ≥ 1 (BOS first when the tokenizer has
one, so the first real token is predicted too):
- ``logprobs[i]`` = log p(x_i | x_<i), the log-prob of the actual token;
- ``argmax[i]``   = the greedy prediction, i.e. what a label-only API answers
  (BADI App. A.6 compares it with x_i);
- ``mu[i]``, ``sigma2[i]`` = mean and variance of log p(z | x_<i) under z ~ p(·|x_<i),
  which Min-K%++ (Zhang et al. 2024) z-scores against;
- TDDBench's metric- and learning-based inputs (``token_stats``): the largest log p, the
  modified entropy, the top-10 log p and a fixed random projection of p(·|x_<i).
All of them come from the same logits, so the full gray-box and label-only signal costs
one forward pass per text.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from trainspotter.backends.base import PROJECTION_DIM, TOP_K, TokenScores, per_prefix
from trainspotter.backends.weights import model_fingerprint, weights_fingerprint  # noqa: F401 (also hf's names)


_CLIP = 1e-30  # Song & Mittal's code clips probabilities at this before the log


@lru_cache(maxsize=4)
def projection_matrix(vocab: int, device: str) -> torch.Tensor:
    """A fixed V × PROJECTION_DIM Gaussian matrix, N(0, 1/PROJECTION_DIM) entries, seed 0: the
    same for every model of one vocabulary, so p(·|x_<i) @ R compares across target and shadow
    (Johnson–Lindenstrauss: inner products of the V-wide vectors are kept approximately)."""
    g = torch.Generator().manual_seed(0)
    return (torch.randn(vocab, PROJECTION_DIM, generator=g, dtype=torch.float64) / PROJECTION_DIM ** 0.5).to(device)


def token_stats(logits: torch.Tensor, target: torch.Tensor, distribution: bool = False) -> dict[str, np.ndarray]:
    """From one sequence's logits (n × V, any dtype; row i predicts ``target[i]``), the
    ``TokenScores`` fields but token_ids: log p(x_i | x_<i), the greedy token, mean and
    variance of log p(z | x_<i) under z ~ p (Min-K%++, Zhang et al. 2024, Eq. 2), with
    log p = logit − logsumexp; with ``distribution`` also the largest log p (Metric-conf, Song et al. 2019) and the
    ``TOP_K`` largest (Salem et al. 2019); Song & Mittal 2021's modified entropy (Eq. 5)
    Mentr = −(1 − p_y) log p_y − Σ_{z≠y} p_z log(1 − p_z), y = x_i, probabilities clipped at
    1e-30 inside the logs as in their code; and p @ ``projection_matrix``. The variance of
    log p equals that of the logit (the shift cancels), so it is taken around the mean logit.
    One sequence at a time in fp32 keeps the temporaries at n × V instead of batch × width × V
    (1.6 GB per copy at 16 × 512 × 49k), and padding rows are never touched; the modified
    entropy is summed in fp64 (1 − p_z is exact there for p_z near 1)."""
    z = logits.float()
    lse = torch.logsumexp(z, -1)
    p = torch.exp(z - lse[:, None])
    mean_z = torch.einsum("tv,tv->t", p, z)
    var = torch.einsum("tv,tv->t", p, (z - mean_z[:, None]).square())
    actual = z.gather(-1, target[:, None])[:, 0] - lse
    as_np = lambda t: t.double().cpu().numpy()  # noqa: E731
    out = {"logprobs": as_np(actual), "argmax": z.argmax(-1).cpu().numpy(), "mu": as_np(mean_z - lse),
           "sigma2": as_np(var.clamp_min(0))}
    if not distribution:  # the rest is ~3x the work above at V = 49k (fp64 n × V copies)
        return out
    top = torch.topk(z, min(TOP_K, z.shape[-1]), -1).values - lse[:, None]
    p64 = torch.exp(z.double() - lse.double()[:, None])
    p_y = p64.gather(-1, target[:, None])[:, 0]
    log_rest = torch.log((1 - p64).clamp_min(_CLIP))
    rest = (p64 * log_rest).sum(-1) - p_y * log_rest.gather(-1, target[:, None])[:, 0]
    mentr = -(1 - p_y) * torch.log(p_y.clamp_min(_CLIP)) - rest
    return out | {"max_logprob": as_np(top[:, 0]), "mentr": as_np(mentr), "top_logprobs": as_np(top),
                  "projection": as_np(p64 @ projection_matrix(z.shape[-1], str(z.device)))}


def gguf_kwargs(path: Path) -> tuple[Path, dict]:
    """(folder, from_pretrained kwargs) for a model folder or a ``.gguf`` file: transformers
    reads a gguf through ``gguf_file=NAME`` relative to its folder."""
    path = Path(path)
    if path.suffix == ".gguf":
        return path.parent, {"gguf_file": path.name}
    return path, {}


def load_tokenizer(path: str | Path):
    """The tokenizer of a local model folder, tokenizer folder or ``.gguf`` file (offline)."""
    from transformers import AutoTokenizer

    folder, kwargs = gguf_kwargs(Path(path))
    return AutoTokenizer.from_pretrained(folder, local_files_only=True, **kwargs)


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


class HFBackend:
    """A causal LM loaded from a local directory or a ``.gguf`` file (a hub id is resolved to its
    snapshot folder first: ``ModelSpec.snapshot``; nothing is downloaded here).
    ``device`` None: CUDA when available, else CPU. ``dtype``: float32, float16 or bfloat16."""

    def __init__(self, path: str | Path, device: str | None = None, batch_size: int = 8,
                 max_length: int = 512, dtype: str = "float32"):
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"model path {path} does not exist")
        path_dir, kwargs = gguf_kwargs(path)
        self.path = path
        self.tokenizer = load_tokenizer(path)
        if dtype not in ("float32", "float16", "bfloat16"):
            raise ValueError(f"dtype {dtype!r}: expected float32, float16 or bfloat16")
        device = device or default_device()
        self.model = AutoModelForCausalLM.from_pretrained(
            path_dir, local_files_only=True, dtype=getattr(torch, dtype), **kwargs).to(device).eval()
        self.device, self.dtype, self.batch_size, self.max_length = device, dtype, batch_size, max_length
        self.fingerprint = model_fingerprint(path, dtype)

    def encode(self, text: str) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][: self.max_length - 1]
        bos = self.tokenizer.bos_token_id
        return ([bos] if bos is not None else []) + ids

    @torch.inference_mode()
    def score(self, texts: list[str], distribution: bool = False) -> list[TokenScores]:
        """Token signals for each text, in input order; batches sorted by length
        (``distribution``: ``token_stats``'s whole-distribution arrays too)."""
        encoded = [self.encode(t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        out: list[TokenScores | None] = [None] * len(texts)
        pad = self.tokenizer.pad_token_id or 0
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            width = max(len(encoded[i]) for i in idx)
            ids = torch.full((len(idx), width), pad, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, i in enumerate(idx):
                ids[row, : len(encoded[i])] = torch.tensor(encoded[i])
                mask[row, : len(encoded[i])] = 1
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
            target = ids[:, 1:].to(self.device)
            for row, i in enumerate(idx):
                n = len(encoded[i]) - 1
                out[i] = TokenScores(token_ids=target[row, :n].cpu().numpy(),
                                     **token_stats(logits[row, :n], target[row, :n], distribution))
        return out  # type: ignore[return-value]

    @torch.inference_mode()
    def generate(self, prefixes: list[str], max_new_tokens: int | Sequence[int]) -> list[list[int]]:
        """Greedy continuation token ids of each prefix (sequence-level features, BADI
        Sec. 3 and App. B.1): what a temperature-0 API returns. ``max_new_tokens``: one
        length for all, or one per prefix. One KV-cached ``model.generate`` per batch; batches
        are sorted by asked length, then prefix length, so few steps and little padding are
        wasted, and every row is cut to its own length."""
        lengths = per_prefix(max_new_tokens, len(prefixes))
        encoded = [self.encode(p) for p in prefixes]
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        order = sorted(range(len(prefixes)), key=lambda i: (lengths[i], len(encoded[i])))
        out: list[list[int]] = [[] for _ in prefixes]
        for start in range(0, len(order), self.batch_size):
            idx = [i for i in order[start:start + self.batch_size] if lengths[i] > 0]
            if not idx:
                continue
            width = max(len(encoded[i]) for i in idx)
            # Left padding so every row continues from its own last token.
            ids = torch.tensor([[pad] * (width - len(encoded[i])) + encoded[i] for i in idx])
            mask = torch.tensor([[0] * (width - len(encoded[i])) + [1] * len(encoded[i]) for i in idx])
            gen = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                      max_new_tokens=max(lengths[i] for i in idx), do_sample=False,
                                      pad_token_id=pad, eos_token_id=None)
            for row, i in zip(gen.cpu(), idx):
                out[i] = row[width:width + lengths[i]].tolist()
        return out


def from_spec(spec, batch_size: int = 8) -> HFBackend:
    """The ``hf:`` and ``testbed:`` schemes' backend (``backends.spec.SCHEMES``): the resolved
    weights with the spec's device, dtype (float32 unless given) and batch size (a hub id: its
    resolved snapshot)."""
    from trainspotter.backends.spec import resolve_spec

    opts = spec.options
    backend = HFBackend(resolve_spec(spec), device=opts.get("device"), dtype=opts.get("dtype", "float32"),
                        batch_size=opts.get("batch_size", batch_size))
    backend.fingerprint = spec.fingerprint  # a hub snapshot's: its commit too
    return backend
