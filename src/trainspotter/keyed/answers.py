"""What a keyed audit asks a model (``keyed.score`` turns the answers into outcomes).

- ``sample``: black-box, the model's continuations of prompts, sampled at temperature 1 with a
  seed (a model trained on a keyed release writes the key's choices at the rate it learnt them;
  greedy decoding would show them only where they became the most likely word);
- ``form_probabilities``: gray-box lexical, the model's probability of each form of a unit in the
  same context (the context followed by the form, scored whole), normalised over the forms, or
  relative to a reference model's;
- ``top_answers``: gray-box watermark, the model's ``TOP`` most likely next tokens after the first
  occurrence in a neutral passage of each previous token not seen before (the model must use the
  watermark's tokenizer).

Local weights only (``HFBackend``: ``.model``, ``.tokenizer``); torch is imported on use.
"""

from __future__ import annotations

import numpy as np

from trainspotter.keyed.score import TOP
from trainspotter.keyed.units import Seen

__all__ = ["form_probabilities", "sample", "top_answers"]


def sample(backend, prompts: list[str], max_new_tokens: int, seed: int, temperature: float = 1.0,
           batch_size: int = 16) -> list[str]:
    """Each prompt's continuation: ``max_new_tokens`` sampled tokens (no end of text), decoded.
    Batch b samples with torch seed ``seed + b``, so a run is reproducible on one machine."""
    import torch

    tok, model = backend.tokenizer, backend.model
    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    out = []
    for b in range(0, len(prompts), batch_size):
        encoded = [backend.encode(p) for p in prompts[b:b + batch_size]]
        width = max(map(len, encoded))
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded])
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
        with torch.random.fork_rng(devices=[]), torch.inference_mode():
            torch.manual_seed(seed + b)
            gen = model.generate(input_ids=ids.to(model.device), attention_mask=mask.to(model.device), do_sample=True,
                                 temperature=temperature, top_k=0, top_p=1.0, max_new_tokens=max_new_tokens,
                                 min_new_tokens=max_new_tokens, pad_token_id=pad)
        out += [tok.decode(row[width:], skip_special_tokens=True) for row in gen.cpu()]
    return out


def form_probabilities(backend, requests: list[tuple[str, tuple[str, ...]]], reference=None) -> list[list[float]]:
    """For each (context, forms): the softmax over forms of log p(context + form), the whole text
    scored (the context is the same for every form, so this is the forms' relative probability);
    with a ``reference`` model (one that never saw the release), of log p − log p_ref: how much
    more the model prefers each form than a model of its kind does (a key-blind function of the
    forms, so the null mean stays 1/(m+1); Carlini et al. 2021's reference calibration)."""
    texts = [context + form for context, forms in requests for form in forms]
    totals = np.array([float(np.sum(s.logprobs)) for s in backend.score(texts)])
    if reference is not None:
        totals = totals - np.array([float(np.sum(s.logprobs)) for s in reference.score(texts)])
    out, i = [], 0
    for _, forms in requests:
        logp = totals[i:i + len(forms)]
        i += len(forms)
        h = np.exp(logp - logp.max())
        out.append((h / h.sum()).tolist())
    return out


def top_answers(backend, texts: list[str], seen: Seen) -> list[dict]:
    """Gray-box windows (module docstring): ``{"prev", "top": [[v, q], ...]}`` per previous token
    scored, each once ever (added to ``seen`` as ``g:a``), at its first position in a passage."""
    import torch

    out = []
    for text in texts:
        ids = backend.encode(text)
        with torch.inference_mode():
            logits = backend.model(input_ids=torch.tensor([ids], device=backend.model.device)).logits[0]
        probs = torch.softmax(logits.float(), dim=-1)
        earlier: set[int] = set()
        for i, a in enumerate(ids[:-1]):
            if a in earlier or f"g:{a}" in seen.units or a in (backend.tokenizer.all_special_ids or []):
                earlier.add(a)
                continue
            earlier.add(a)
            seen.units.add(f"g:{a}")
            q, v = torch.topk(probs[i], min(TOP, probs.shape[-1]))
            out.append({"prev": int(a), "top": [[int(t), float(w)] for t, w in zip(v.tolist(), q.tolist())]})
    return out
