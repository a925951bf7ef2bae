"""A local OpenAI-compatible server over a local HF model, for black-box audits and tests.

BADI App. A.6 / App. E audit models reachable only through an API; this app lets the
API path be tested end to end without a GPU or network (STACK.md: `transformers serve`
ignores ``logprobs``/``echo``). Shapes follow the OpenAI API reference:

- ``GET /v1/models``;
- ``POST /v1/completions``: ``prompt`` as a string, a list of strings, a token list or a
  list of token lists; ``max_tokens`` (0 allowed), greedy decoding (any ``temperature``
  is served greedily), ``logprobs`` = k top log-probs, ``echo`` = prompt tokens too (the
  first prompt token has ``null`` log-probs, as in the reference); one prompt with
  ``max_tokens`` 1 and a ``logit_bias`` ({token id: bias}, added to the logits) is sampled
  at ``temperature`` (greedy at 0), ``n`` choices, from ``seed``: what a keyed audit's
  forced choice asks (``trainspotter.keyed.queries.choose``);
- ``POST /v1/chat/completions``: the last user message is continued as plain text (the
  tiny testbed models have no chat template); ``logprobs``/``top_logprobs``.

Token strings are ``tokenizer.decode([id])`` (special tokens kept, so "<|endoftext|>"
round-trips); ``text_offset`` is the cumulative length of those strings.

``fail_rate`` injects faults before the model runs, drawn from a seeded RNG: 429, 500,
a timeout (sleep ``fail_sleep`` s, then 504), a truncated body (the connection drops
mid-response) and a malformed 200 body. ``app.state.stats`` counts requests.

``Quirks`` make it behave like servers that differ from the reference, so clients can be
tested against them (each is a switch of `trainspotter serve`):
- ``list_prompts=False``: a list of more than one prompt is answered with HTTP 500, as
  llama-cpp-python 0.3's server does (its handler asserts ``len(prompt) <= 1``);
- ``echo_logprobs="shifted"``: echo's log-probs one position early (the entry of prompt
  token j holds token j+1's log-prob and top-k; the last entry is null), an off-by-one;
  ``"none"``: ``echo`` returns the prompt text but log-probs of the generated tokens only;
  ``"fed"``: llama-cpp-python 0.3.36 with a model that adds no BOS: the entry of prompt token
  j holds the row predicting token j+1, that row's log-prob of token j (the token fed) and
  that value added to the top-k, except the first token's entry, which is null (so no row
  predicts tokens 1 and 2); the BOS is not echoed and the last token has no entry;
- ``empty_prompt=False``: the empty prompt "" is answered with HTTP 500 (llama-cpp-python
  for a model that adds no BOS: nothing to evaluate);
- ``ignore_logprobs``: ``logprobs`` (completions and chat) is accepted and ignored (null);
- ``chat_only``: /v1/completions answers 404, only /v1/chat/completions is served.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse

FAULTS = ("429", "500", "timeout", "truncated", "malformed")
ECHO_LOGPROBS = ("ok", "shifted", "none", "fed")


@dataclass(frozen=True)
class Quirks:
    """Ways real servers differ from the OpenAI reference (module docstring)."""

    list_prompts: bool = True
    list_status: int = 500  # the status of that refusal (llama-cpp-python: 500)
    echo_logprobs: str = "ok"
    ignore_logprobs: bool = False
    chat_only: bool = False
    empty_prompt: bool = True
    system_fingerprint: str | None = None  # another build under the same model name (default: from the weights)

    def __post_init__(self):
        if self.echo_logprobs not in ECHO_LOGPROBS:
            raise ValueError(f"echo_logprobs {self.echo_logprobs!r}: expected one of {', '.join(ECHO_LOGPROBS)}")

    def active(self) -> dict:
        """The switches that differ from a well-behaved server."""
        return {k: v for k, v in asdict(self).items() if v != getattr(Quirks, k)}


class _Model:
    """Greedy decoding + log-probs from one HFBackend; one request at a time."""

    def __init__(self, backend):
        self.backend, self.tok, self.lock = backend, backend.tokenizer, threading.Lock()

    def piece(self, token_id: int) -> str:
        return self.tok.decode([token_id], skip_special_tokens=False)

    def ids_of(self, prompt) -> list[int]:
        if isinstance(prompt, str):
            ids = self.backend.encode(prompt)
        else:
            bos = self.tok.bos_token_id
            ids = ([bos] if bos is not None else []) + list(prompt)
        if not ids:
            raise HTTPException(400, "prompt is empty and the tokenizer has no BOS token")
        return ids

    @torch.inference_mode()
    def run(self, ids: list[int], max_tokens: int) -> tuple[list[int], torch.Tensor]:
        """Greedy continuation and log-softmax rows; row j predicts token j+1 of ids+gen."""
        model = self.backend.model
        with self.lock:
            if max_tokens <= 1:
                logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
                gen = [int(logp[-1].argmax())] if max_tokens == 1 else []
            else:
                pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
                out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                     max_new_tokens=max_tokens, do_sample=False, pad_token_id=pad,
                                     eos_token_id=None)
                gen = out[0, len(ids):].tolist()
                full = ids + gen[:-1]
                logp = torch.log_softmax(model(torch.tensor([full])).logits[0].float(), -1)
        return gen, logp

    def top(self, row: torch.Tensor, k: int) -> dict[str, float]:
        values, idx = row.topk(k)
        out: dict[str, float] = {}
        for v, i in zip(values.tolist(), idx.tolist()):
            out.setdefault(self.piece(i), v)  # two ids may decode alike; keep the likelier
        return out


def _completion_choice(m: _Model, index: int, prompt, max_tokens: int, k: int | None,
                       echo: bool, echo_logprobs: str = "ok") -> tuple[dict, int, int]:
    ids = m.ids_of(prompt)
    added_bos = m.tok.bos_token_id is not None and ids[0] == m.tok.bos_token_id
    gen, logp = m.run(ids, max_tokens)
    prompt_text = prompt if isinstance(prompt, str) else m.tok.decode(prompt)
    gen_text = m.tok.decode(gen, skip_special_tokens=False)
    choice: dict[str, Any] = {"index": index, "text": (prompt_text if echo else "") + gen_text,
                              "logprobs": None, "finish_reason": "length"}
    if k is not None:
        full = ids + gen
        echo_lp = echo and echo_logprobs != "none"  # "none": echoed text, generated log-probs only
        first = 0 if echo_lp else len(ids)
        tokens, lps, tops, offsets = [], [], [], []
        offset = 0 if echo_lp else len(prompt_text)
        for j in range(first, len(full)):
            piece = m.piece(full[j])
            tokens.append(piece)
            offsets.append(offset)
            if not (j == 0 and added_bos):  # the BOS we added is not in the returned text
                offset += len(piece)
            if j == 0:  # nothing predicts the first token
                lps.append(None)
                tops.append(None)
            else:
                lps.append(float(logp[j - 1, full[j]]))
                tops.append(m.top(logp[j - 1], k) if k > 0 else {})
        if echo_lp and echo_logprobs == "shifted":  # entry j holds token j+1's numbers
            lps, tops = lps[1:] + [None], tops[1:] + [None]
        if echo_lp and echo_logprobs == "fed":  # entry j: row j (predicting j+1) and its log-prob of j
            js = range(1 if added_bos else 0, len(full) - 1)
            tokens = [m.piece(full[j]) for j in js]
            offsets = [sum(len(t) for t in tokens[:n]) for n in range(len(tokens))]
            lps = [None] + [float(logp[j, full[j]]) for j in js[1:]]  # nothing for the first
            tops = [None] + [(m.top(logp[j], k) if k > 0 else {}) | {m.piece(full[j]): float(logp[j, full[j]])}
                             for j in js[1:]]
        choice["logprobs"] = {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops,
                              "text_offset": offsets}
    return choice, len(ids), len(gen)


def _biased(m: _Model, body: dict, prompts: list, max_tokens: int) -> tuple[list[dict], int, int]:
    """One token after one prompt, ``n`` times, from the logits plus ``logit_bias``, sampled at
    ``temperature`` from ``seed`` (greedy at 0): (choices, prompt tokens, generated tokens)."""
    if len(prompts) != 1 or max_tokens != 1 or body.get("echo") or body.get("logprobs") is not None:
        raise HTTPException(400, "logit_bias is served for one prompt and one token (no echo, no logprobs)")
    ids, n, temperature = m.ids_of(prompts[0]), int(body.get("n") or 1), float(body.get("temperature", 1.0))
    _, logp = m.run(ids, 0)
    logits = logp[-1].clone()
    for token, bias in body["logit_bias"].items():
        logits[int(token)] += float(bias)
    if temperature > 0:
        gen = torch.Generator().manual_seed(int(body.get("seed") or 0))
        drawn = torch.multinomial(torch.softmax(logits / temperature, -1), n, replacement=True, generator=gen)
    else:
        drawn = logits.argmax().repeat(n)
    return ([{"index": j, "text": m.piece(int(t)), "logprobs": None, "finish_reason": "length"}
             for j, t in enumerate(drawn.tolist())], len(ids), n)


def _prompts(body: dict) -> list:
    """A completion request's prompts: one string or token list, or a list of them."""
    prompt = body.get("prompt", "")
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        return prompt
    raise HTTPException(400, "prompt must be a string, a list of strings or token lists")


def _chat_logprobs(lp: dict) -> dict:
    """A completion choice's log-probabilities as the chat endpoint lists them, token by token."""
    return {"content": [{"token": t, "logprob": v, "bytes": list(t.encode()),
                         "top_logprobs": [{"token": a, "logprob": b, "bytes": list(a.encode())}
                                          for a, b in (top or {}).items()]}
                        for t, v, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"])]}


def create_app(backend, model_name: str, fail_rate: float = 0.0, seed: int = 0,
               fail_sleep: float = 5.0, quirks: Quirks = Quirks()) -> FastAPI:
    """FastAPI app serving ``backend`` (an HFBackend) under the name ``model_name``,
    behaving with ``quirks`` (module docstring)."""
    m = _Model(backend)
    rng, rng_lock = random.Random(seed), threading.Lock()
    app = FastAPI(title="trainspotter OpenAI-compatible server")
    app.state.stats = {"requests": 0, "faults": {f: 0 for f in FAULTS}, "prompts": 0, "refused": 0}
    app.state.quirks = quirks
    app.state.system_fingerprint = fingerprint = (quirks.system_fingerprint  # as OpenAI's: which build answers
                                                  or f"fp_{backend.fingerprint[:10]}")
    counter = iter(range(1, 1 << 62))

    def draw_fault() -> str | None:
        with rng_lock:
            if fail_rate > 0 and rng.random() < fail_rate:
                return rng.choice(FAULTS)
        return None

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0,
                                             "owned_by": "trainspotter"}]}

    @app.get("/trainspotter/stats")  # not part of the OpenAI API: for tests and benchmarks
    def stats() -> dict:
        return app.state.stats

    def refuse(status: int, message: str):
        app.state.stats["refused"] += 1
        return JSONResponse({"error": {"message": message, "type": "invalid_request_error"
                                       if status < 500 else "internal_server_error"}}, status_code=status)

    @app.post("/v1/completions")
    def completions(body: dict):
        if quirks.chat_only:
            return refuse(404, "Not Found (this server only serves /v1/chat/completions)")
        prompts = _prompts(body)
        if not quirks.list_prompts and len(prompts) > 1:
            return refuse(quirks.list_status, "")  # llama-cpp-python: `assert len(body.prompt) <= 1`
        if not quirks.empty_prompt and "" in prompts:
            return refuse(500, "")
        max_tokens = int(body.get("max_tokens") if body.get("max_tokens") is not None else 16)
        k = body.get("logprobs")
        if k is not None and not 0 <= int(k) <= 20:
            raise HTTPException(400, "logprobs must be between 0 and 20")
        k = None if quirks.ignore_logprobs else k
        # a logit_bias: a forced choice's draws (``_biased``)
        choices, n_prompt, n_gen = _biased(m, body, prompts, max_tokens) if body.get("logit_bias") else ([], 0, 0)
        for i, p in enumerate([] if body.get("logit_bias") else prompts):
            c, a, b = _completion_choice(m, i, p, max_tokens, None if k is None else int(k),
                                         bool(body.get("echo", False)), quirks.echo_logprobs)
            choices.append(c)
            n_prompt, n_gen = n_prompt + a, n_gen + b
        app.state.stats["prompts"] += len(prompts)
        return {"id": f"cmpl-{next(counter)}", "object": "text_completion", "created": int(time.time()),
                "model": model_name, "choices": choices, "system_fingerprint": fingerprint,
                "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_gen,
                          "total_tokens": n_prompt + n_gen}}

    @app.post("/v1/chat/completions")
    def chat(body: dict) -> dict:
        users = [msg for msg in body.get("messages", []) if msg.get("role") == "user"]
        if not users or not isinstance(users[-1].get("content"), str):
            raise HTTPException(400, "messages must end with a user message with text content")
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        k = int(body.get("top_logprobs") or 0) if body.get("logprobs") and not quirks.ignore_logprobs else None
        c, n_prompt, n_gen = _completion_choice(m, 0, users[-1]["content"], max_tokens, k, False)
        logprobs = None if k is None else _chat_logprobs(c["logprobs"])
        app.state.stats["prompts"] += 1
        return {"id": f"chatcmpl-{next(counter)}", "object": "chat.completion", "created": int(time.time()),
                "model": model_name, "system_fingerprint": fingerprint,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": c["text"]},
                             "logprobs": logprobs, "finish_reason": "length"}],
                "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_gen,
                          "total_tokens": n_prompt + n_gen}}

    app.add_middleware(FaultInjector, stats=app.state.stats, draw=draw_fault, rng=rng,
                       fail_sleep=fail_sleep)
    return app


class FaultInjector:
    """Pure ASGI middleware: counts POSTs and injects faults before the model runs."""

    BODIES = {"429": (429, b'{"error": {"message": "rate limited (injected)", "type": "rate_limit"}}'),
              "500": (500, b'{"error": {"message": "server error (injected)", "type": "server"}}'),
              "timeout": (504, b'{"error": {"message": "timeout (injected)"}}'),
              "truncated": (200, b'{"id": "cmpl-x", "choices": [{"te')}
    MALFORMED = (b'{"id": "cmpl-x", "choices": [', b'{"id": "cmpl-x", "object": "text_completion"}')

    def __init__(self, app, stats: dict, draw, rng: random.Random, fail_sleep: float):
        self.app, self.stats, self.draw, self.rng, self.fail_sleep = app, stats, draw, rng, fail_sleep

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        self.stats["requests"] += 1
        fault = self.draw()
        if fault is None:
            return await self.app(scope, receive, send)
        self.stats["faults"][fault] += 1
        if fault == "timeout":
            await asyncio.sleep(self.fail_sleep)
        status, body = (200, self.rng.choice(self.MALFORMED)) if fault == "malformed" else self.BODIES[fault]
        declared = len(body) * 3 if fault == "truncated" else len(body)  # too short: the client sees a drop
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(declared).encode())]})
        await send({"type": "http.response.body", "body": body, "more_body": False})


def serve(spec: str, host: str = "127.0.0.1", port: int = 8000, fail_rate: float = 0.0,
          seed: int = 0, fail_sleep: float = 5.0, model_name: str | None = None,
          ready: Callable[[str, int], None] | None = None, quirks: Quirks = Quirks()) -> None:
    """Serve ``spec`` (any spec ``load_backend`` turns into an HFBackend) with uvicorn.
    ``ready(host, port)`` is called once the socket listens (``port`` 0 picks a free one)."""
    import uvicorn

    from trainspotter.backends import load_backend
    from trainspotter.backends.hf import HFBackend
    from trainspotter.errors import InputError

    backend = load_backend(spec)
    if not isinstance(backend, HFBackend):
        raise InputError(f"model spec {spec!r}: serve needs a local model (hf:PATH or testbed:NAME)")
    app = create_app(backend, model_name or spec, fail_rate=fail_rate, seed=seed, fail_sleep=fail_sleep,
                     quirks=quirks)

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started and ready is not None:
                bound = self.servers[0].sockets[0].getsockname()
                ready(bound[0], bound[1])

    Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()

