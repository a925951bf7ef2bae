"""What a keyed audit asks a model (``keyed.score`` turns the answers into outcomes).

- ``sample``: black-box, the model's continuations of prompts, sampled at temperature 1 with a
  seed (a model trained on a keyed release writes the key's choices at the rate it learnt them;
  greedy decoding would show them only where they became the most likely word);
- ``form_probabilities``: gray-box lexical, the model's probability of each form of a unit in the
  same context (the context followed by the form, scored whole), normalised over the forms, or
  relative to a reference model's;
- ``choose``: black-box lexical, forced choice: the model's next tokens restricted to a unit's forms
  (what an API's ``logit_bias`` gives), sampled, each token offset by the reference's log-probability
  when one is given;
- ``top_answers``: gray-box watermark, the model's ``TOP`` most likely next tokens after the first
  occurrence in a neutral passage of each previous token not seen before (the model must use the
  watermark's tokenizer).

Local weights (``HFBackend``: ``.model``, ``.tokenizer``), and for ``choose`` also an API
(``OpenAIBackend.draw``); torch is imported on use.
"""

from __future__ import annotations

import numpy as np

from trainspotter.keyed.score import TOP
from trainspotter.keyed.units import LexicalForms, Seen

__all__ = ["choice_plan", "choice_shares", "choose", "form_probabilities", "form_tokens", "sample", "top_answers"]


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


def form_tokens(tokenizer, context: str, forms: tuple[str, ...]) -> list[tuple[int, ...]] | None:
    """Each form's tokens where it follows ``context`` (the context's trailing space goes with the
    form, as the model writes it); None where they are not prefix-free (a form's tokens begin
    another's, so no sequence of restricted tokens tells them apart): such a unit is not asked,
    a rule of the forms and the tokenizer alone, never of the key."""
    space = context[len(context.rstrip()):]
    seqs = [tuple(tokenizer(space + f, add_special_tokens=False)["input_ids"]) for f in forms]
    if any(not a or (a != b and b[:len(a)] == a) for a in seqs for b in seqs) or len(set(seqs)) < len(seqs):
        return None
    return seqs


def _after(seqs: list[tuple[int, ...]], prefix: tuple[int, ...]) -> list[int]:
    """The tokens that continue the forms still possible after ``prefix``."""
    return sorted({s[len(prefix)] for s in seqs if s[:len(prefix)] == prefix})


def branchings(seqs: list[tuple[int, ...]]) -> int:
    """The most tokens one draw can cost: the points on a form's tokens where the forms part."""
    return max(sum(len({s[i] for s in seqs if s[:i] == q[:i]}) > 1 for i in range(len(q))) for q in seqs)


def choice_plan(forms: LexicalForms, tokenizer, texts: list[str], seen: Seen, samples: int,
                contexts: int = 1) -> list[tuple[str, list[tuple[int, str, list]], int]]:
    """The units a forced choice asks, in order (``LexicalForms.asked_first``): (unit, its contexts
    as (text index, context, its forms' tokens there), the most tokens its ``samples`` draws in each
    can cost); contexts where the tokens cannot tell the forms apart are left out (``form_tokens``),
    and a unit with none left."""
    plan = []
    for unit, where in forms.asked_first(texts, seen, contexts):
        asked = [(i, context, seqs) for i, context in where
                 if (seqs := form_tokens(tokenizer, context, forms.forms[unit]))]
        if asked:
            plan.append((unit, asked, samples * sum(branchings(seqs) for *_, seqs in asked)))
    return plan


def _next_logprobs(backend, prefixes: list[list[int]], wanted: list[list[int]]) -> list[np.ndarray]:
    """log p(token | prefix) of each prefix's ``wanted`` tokens (right-padded batches of similar
    lengths, read at each row's last token, so positions are the row's own)."""
    import torch

    out: list[np.ndarray] = [np.empty(0)] * len(prefixes)
    order = sorted(range(len(prefixes)), key=lambda j: len(prefixes[j]))  # less padding
    for b in range(0, len(order), backend.batch_size):
        idx = order[b:b + backend.batch_size]
        rows = [prefixes[j] for j in idx]
        width = max(map(len, rows))
        ids = torch.tensor([r + [0] * (width - len(r)) for r in rows], device=backend.model.device)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=backend.model.device)
        with torch.inference_mode():
            logits = backend.model(input_ids=ids, attention_mask=mask).logits
        last = logits[torch.arange(len(rows)), torch.tensor([len(r) - 1 for r in rows])].float()
        logp = torch.log_softmax(last, dim=-1).cpu().numpy()
        for k, j in enumerate(idx):
            out[j] = logp[k, wanted[j]]
    return out


def _prompts(backend, requests: list[tuple[str, list[tuple[int, ...]]]]) -> list[list[int]]:
    """Each request's context as the model reads it: [BOS] + its last tokens, room left for a form."""
    limit = min(backend.max_length, getattr(backend.model.config, "max_position_embeddings", backend.max_length)) \
        if hasattr(backend, "model") else API_CONTEXT
    bos = backend.tokenizer.bos_token_id
    out = []
    for context, seqs in requests:
        ids = backend.tokenizer(context.rstrip(), add_special_tokens=False)["input_ids"]
        out.append(([bos] if bos is not None else []) + ids[max(0, len(ids) - (limit - 1 - max(map(len, seqs)))):])
    return out


def choice_shares(backend, requests: list[tuple[str, list[tuple[int, ...]]]], reference=None) -> list[np.ndarray]:
    """The probability that one draw of ``choose`` (local weights) is each form: the product, over
    the points where the forms part, of the restricted next-token distribution (relative to
    ``reference``), for measuring plans without sampling (``benchmarks/bench_keyed_contexts.py``)."""
    prompts = _prompts(backend, requests)
    heads, nxts, where = [], [], []
    for i, (_, seqs) in enumerate(requests):
        for prefix in sorted({s[:j] for s in seqs for j in range(len(s))}):
            if len(nxt := _after(seqs, prefix)) > 1:
                heads.append(prompts[i] + list(prefix))
                nxts.append(nxt)
                where.append((i, prefix))
    logp = _next_logprobs(backend, heads, nxts)
    if reference is not None:
        logp = [lp - lr for lp, lr in zip(logp, _next_logprobs(reference, heads, nxts))]
    step = {}
    for (i, prefix), nxt, lp in zip(where, nxts, logp):
        q = np.exp(lp - lp.max())
        step[i, prefix] = dict(zip(nxt, q / q.sum()))
    return [np.array([np.prod([step[i, s[:j]][s[j]] for j in range(len(s)) if (i, s[:j]) in step]) for s in seqs])
            for i, (_, seqs) in enumerate(requests)]


def choose(backend, requests: list[tuple[str, list[tuple[int, ...]]]], samples: int, seed: int,
           reference=None) -> list[tuple[list[int], int]]:
    """Black-box forced choice. For each (context, its forms' tokens from ``form_tokens``),
    ``samples`` draws of a form, token by token: where the forms still possible part, the model's
    next-token distribution restricted to the tokens that continue them (an API call with
    ``logit_bias`` +100 on those tokens, one generated token, ``n`` draws: ``OpenAIBackend.draw``;
    local weights compute the same), each token's logit offset by −log p_ref(token) when a local
    ``reference`` (same tokenizer) is given, so the draw follows p / p_ref: how much more the
    model prefers a form than a model of its kind does, the black-box twin of
    ``form_probabilities``' calibration. Returns per request the forms drawn (indices; an API
    answer that is none of the tokens asked is no draw) and the tokens generated (one per draw
    where the forms part, none where one form is left). Under H0 the draws are the model's and
    the reference's, independent of the key, so the key's form is among them at the rate
    1/(m + 1) exactly."""
    local = hasattr(backend, "model")
    bos = backend.tokenizer.bos_token_id
    prompts = _prompts(backend, requests)
    rng = np.random.default_rng(seed)
    drawn: list[list[int]] = [[] for _ in requests]
    spent = [0] * len(requests)
    pending = [(i, (), samples) for i in range(len(requests))]  # (request, tokens so far, draws there)
    while pending:
        query, later = [], []
        for i, prefix, n in pending:
            seqs = requests[i][1]
            if prefix in seqs:
                drawn[i] += [seqs.index(prefix)] * n
                continue
            nxt = _after(seqs, prefix)
            if len(nxt) == 1:  # one form left: its tokens follow, nothing generated
                later.append((i, prefix + (nxt[0],), n))
            else:
                query.append((i, prefix, n, nxt))
        pending = later
        if not query:
            continue
        heads, nxts = [prompts[i] + list(p) for i, p, _, _ in query], [nxt for *_, nxt in query]
        offsets = ([-lp for lp in _next_logprobs(reference, heads, nxts)] if reference is not None
                   else [np.zeros(len(nxt)) for nxt in nxts])
        logp = _next_logprobs(backend, heads, nxts) if local else [None] * len(query)
        for (i, p, n, nxt), head, off, lp in zip(query, heads, offsets, logp):
            spent[i] += n
            if local:
                q = np.exp(lp + off - (lp + off).max())
                counts = rng.multinomial(n, q / q.sum())
            else:
                ids = head[1:] if bos is not None else head  # the server adds its BOS
                counts = _api_counts(backend, ids, nxt, off, n, int(rng.integers(2**31 - 1)))
            pending += [(i, p + (t,), int(c)) for t, c in zip(nxt, counts) if c]
    return list(zip(drawn, spent))


API_CONTEXT = 2048  # tokens of context an API forced choice sends at most


def _api_counts(backend, ids: list[int], tokens: list[int], offsets: np.ndarray, n: int, seed: int) -> list[int]:
    """How many of ``n`` API draws after ``ids`` fell on each of ``tokens``: ``logit_bias`` 100 on
    the token most offset, the others lower by their offset's shortfall (softmax sees only the
    differences); an answer that decodes to none of them, or to two, is no draw."""
    bias = {t: 100.0 - (offsets.max() - o) for t, o in zip(tokens, offsets)}
    pieces = [backend.tokenizer.decode([t]) for t in tokens]
    texts = backend.draw(ids, bias, n, seed)
    return [sum(text == piece for text in texts) if pieces.count(piece) == 1 else 0 for piece in pieces]


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
