"""Black-box backend over any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, `trainspotter serve`).

BADI audits models reachable only through an API (App. A.6 label-only features,
App. E API auditing). Every query costs, so this backend asks the fewest questions
(many prompts per /v1/completions request), never asks one twice (``QueryCache``, one
row per prompt), stays within a ``Budget`` and survives faults (bounded retries with
exponential backoff and jitter on 429, 5xx, timeouts, dropped connections and malformed
bodies; the openai client's own retries are off so every retry is counted).

Spec: ``openai:MODEL@BASE_URL[?key=value&...]`` (see ``APIConfig`` for the keys), e.g.
``openai:mini@http://127.0.0.1:8000/v1?tokenizer=testbed:mini&mode=auto``. The API key is
read from the environment variable ``key_env`` (default OPENAI_API_KEY; a dummy key is
used when it is unset, which local servers accept); it never enters a fingerprint, cache
key, log line or exception.

Modes (``backend.mode``, also in ``describe()``; ``auto`` probes the server once and
caches the answer):
- ``logprobs-echo``: one request per batch of texts with ``echo`` + ``logprobs``: prompt
  log-probs, greedy token (top-1) and top-k of every position: the full gray-box signal.
- ``logprobs``: ``logprobs`` without ``echo``: one prompt per prefix position (batched);
  the actual token's log-prob is read from the top-k, and when it is not among them it
  is censored at the k-th log-prob (an upper bound).
- ``label``: label-only (App. A.6): the greedy next token of every prefix position,
  ``max_tokens=1, temperature=0``; ``logprobs``/``mu``/``sigma2`` are NaN.
- ``chat``: chat-only models: one prefix per request with a continuation instruction;
  log-probs from the answer's top logprobs when the server gives them, else NaN.

Positions are those of the LOCAL tokenizer named by ``tokenizer=`` (base.py): the
text is encoded as [BOS] x_1..x_n and position i is predicted from the prefix *text*
``text[:end(x_{i-1})]`` (character offsets of the local tokens; "" for i = 1). The server
tokenizes that string with its own tokenizer. An answer string s is mapped back to a
local id by re-encoding prefix + s and taking the first token after the prefix's local
ids (if the re-encoding does not start with them: the first local token of s; an empty
answer maps to the local EOS id, -1 if none; an answer starting with U+FFFD, a byte
token that is only part of a character, maps to -1 = unknown). Text prompts cannot end
inside a multi-byte character either, so at positions after such a byte token the
server sees a slightly different prefix (0.2% of positions on the testbed). With ``echo``, the server's prompt tokens
are aligned to local tokens by character end offsets: each server token's log-prob goes
to the local token containing its last character, so the sum over the text (the
log-likelihood) is kept; local tokens that receive none get 0.0, tokens without a
log-prob (the server's first token) give NaN. When the server uses the same tokenizer
this is exactly one-to-one. ``mu``/``sigma2`` (mean and variance of log p under p) are
estimated from the top-k log-probs plus one bucket spreading the remaining mass evenly
over the other V - k tokens of the local vocabulary.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from trainspotter.backends.base import TokenScores
from trainspotter.backends.budget import Budget
from trainspotter.backends.cache import QueryCache, query_key

MODES = ("auto", "label", "logprobs", "chat")
CHAT_INSTRUCTION = ("Continue the following text exactly where it stops. "
                    "Reply with the continuation only, no commentary.")
PROBE_PROMPTS = ["The cat sat on the", "Once upon a time"]


@dataclass
class APIConfig:
    """Everything a spec can set. Only ``model`` and ``base_url`` identify the server."""

    model: str
    base_url: str
    tokenizer: str | None = None  # local tokenizer: a HF dir or a spec (hf:PATH, testbed:NAME)
    key_env: str = "OPENAI_API_KEY"
    mode: str = "auto"
    batch: int = 32  # prompts per /v1/completions request
    top_logprobs: int = 5  # OpenAI allows at most 5 for completions
    timeout: float = 60.0  # seconds per request
    retries: int = 6  # retries per request after the first attempt
    backoff: float = 0.5  # first retry delay in seconds, doubled each time, times 1 + U[0,1)
    seed: int = 0  # jitter RNG
    max_requests: float = math.inf
    max_tokens: float = math.inf
    max_cost: float = math.inf
    price_prompt_1k: float = 0.0
    price_completion_1k: float = 0.0
    cache: str | None = None  # SQLite path; default artifacts_root()/query-cache.sqlite


def api_fingerprint(model: str, base_url: str) -> str:
    """Identity of the answering model: its name and endpoint, never the key."""
    return hashlib.sha256(json.dumps(["openai", model, base_url.rstrip("/")]).encode()).hexdigest()[:16]


class APIRequestError(RuntimeError):
    """A request failed for good (retries spent, or the server rejected it)."""


class MalformedResponse(APIRequestError):
    """The server answered 200 with a body that is not a valid completion (retried)."""


class Unsupported(APIRequestError):
    """The server rejected or ignored a feature (``echo``, ``logprobs``, a list prompt)."""


def _transient(err: Exception) -> bool:
    import openai

    if isinstance(err, (openai.APIConnectionError, MalformedResponse)):  # incl. timeouts, drops
        return True
    return isinstance(err, openai.APIStatusError) and (err.status_code == 429 or err.status_code >= 500)


class OpenAIBackend:
    """``Backend`` over an OpenAI-compatible HTTP API (see the module docstring)."""

    def __init__(self, config: APIConfig, cache: QueryCache | None = None):
        import openai
        from transformers import AutoTokenizer

        if config.mode not in MODES:
            raise ValueError(f"mode {config.mode!r}: expected one of {', '.join(MODES)}")
        if not config.tokenizer:
            raise ValueError("an API backend needs a local tokenizer (tokenizer=PATH or a spec)")
        self.config = config
        self.tokenizer = AutoTokenizer.from_pretrained(config.tokenizer, local_files_only=True)
        self.fingerprint = api_fingerprint(config.model, config.base_url)
        self.cache = cache or QueryCache(config.cache)
        self.budget = Budget(config.max_requests, config.max_tokens, config.max_cost,
                             config.price_prompt_1k, config.price_completion_1k)
        self.client = openai.OpenAI(api_key=os.environ.get(config.key_env) or "sk-no-key",
                                    base_url=config.base_url, max_retries=0, timeout=config.timeout)
        self._rng = random.Random(config.seed)
        self.mode: str | None = None  # resolved on first use
        self._list, self._k = True, config.top_logprobs
        self.max_length = 512

    # ---- Backend protocol -------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        return self._positions(text)[0]

    def score(self, texts: list[str]) -> list[TokenScores]:
        """Per-position signals of each text; requests batch prompts across texts."""
        self._resolve_mode()
        if self.mode == "logprobs-echo":
            return self._score_echo(texts)
        per_text = [self._positions(t) for t in texts]
        prefixes = [p for _, prefs, _ in per_text for p in prefs]
        k = self._k if self.mode in ("logprobs", "chat") else None
        answers = iter(self._ask(prefixes, max_tokens=1, k=k))
        out = []
        for ids, prefs, pieces in per_text:
            n = len(prefs)
            ts = _nan_scores(ids, n)
            for i in range(n):
                a = next(answers)
                ts.argmax[i] = self._to_local(ids[1:i + 1], prefs[i], a["text"])
                top = _first_top(a)
                if top:
                    ts.logprobs[i] = top.get(pieces[i], min(top.values()))
                    ts.mu[i], ts.sigma2[i] = self._moments(top)
            out.append(ts)
        return out

    def generate(self, prefixes: list[str], max_new_tokens: int) -> list[list[int]]:
        """Greedy continuation ids of each prefix under the local tokenizer (re-encoded, so the
        count can differ from ``max_new_tokens`` when the server's tokenizer differs)."""
        self._resolve_mode()
        answers = self._ask(prefixes, max_tokens=max_new_tokens, k=None)
        out = []
        for prefix, a in zip(prefixes, answers):
            p = self.tokenizer(prefix, add_special_tokens=False)["input_ids"]
            full = self.tokenizer(prefix + a["text"], add_special_tokens=False)["input_ids"]
            out.append(full[len(p):] if full[:len(p)] == p else
                       self.tokenizer(a["text"], add_special_tokens=False)["input_ids"])
        return out

    # ---- reporting --------------------------------------------------------------------

    def usage(self) -> dict:
        """requests (answered), prompt/completion/total tokens, cost, cache_hits (prompts
        answered from the cache), retries (failed attempts re-sent), http_requests."""
        u = dict(self.budget.used)
        u["total_tokens"] = u["prompt_tokens"] + u["completion_tokens"]
        u["http_requests"] = u["requests"] + u["retries"]
        return u

    def describe(self) -> dict:
        c = self.config
        return {"backend": "openai", "model": c.model, "base_url": c.base_url, "mode": self.mode,
                "list_prompts": self._list, "top_logprobs": self._k if self.mode != "label" else None,
                "batch": c.batch if self._list else 1, "tokenizer": c.tokenizer, "key_env": c.key_env,
                "fingerprint": self.fingerprint}

    # ---- positions and mapping --------------------------------------------------------

    def _positions(self, text: str) -> tuple[list[int], list[str], list[str]]:
        """[BOS]+ids, the prefix text of every position, and each token's text in context."""
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = enc["input_ids"][: self.max_length - 1]
        ends = [e for _, e in enc["offset_mapping"][: len(ids)]]
        starts = [0] + ends[:-1]
        bos = self.tokenizer.bos_token_id
        return (([bos] if bos is not None else []) + ids, [text[:s] for s in starts],
                [text[s:e] for s, e in zip(starts, ends)])

    def _to_local(self, prefix_ids: list[int], prefix: str, answer: str) -> int:
        if not answer:
            eos = self.tokenizer.eos_token_id
            return eos if eos is not None else -1
        if answer.startswith("\ufffd"):
            return -1  # a fragment of a multi-byte character: no text says which bytes
        full = self.tokenizer(prefix + answer, add_special_tokens=False)["input_ids"]
        n = len(prefix_ids)
        if full[:n] == list(prefix_ids) and len(full) > n:
            return full[n]
        return self.tokenizer(answer, add_special_tokens=False)["input_ids"][0]

    def _moments(self, top: dict[str, float]) -> tuple[float, float]:
        """Mean and variance of log p(z) under z ~ p from the top-k, the remaining mass spread
        evenly over the other V - k local tokens (an estimate; exact when k = V)."""
        lp = np.array(list(top.values()), dtype=np.float64)
        p = np.exp(lp)
        rest, others = max(0.0, 1.0 - p.sum()), max(1, len(self.tokenizer) - len(lp))
        log_q = math.log(rest / others) if rest > 0 else 0.0
        mu = float((p * lp).sum() + rest * log_q)
        return mu, max(0.0, float((p * lp ** 2).sum() + rest * log_q ** 2) - mu ** 2)

    def _score_echo(self, texts: list[str]) -> list[TokenScores]:
        out = []
        prompts = []
        per_text = [self._positions(t) for t in texts]
        for t, (ids, prefs, pieces) in zip(texts, per_text):
            prompts.append(t[: len(prefs[-1]) + len(pieces[-1])] if pieces else t)
        answers = self._ask(prompts, max_tokens=1, k=self._k, echo=True)
        for prompt, (ids, prefs, pieces), a in zip(prompts, per_text, answers):
            ts = _nan_scores(ids, len(prefs))
            lp = a["logprobs"]
            local_ends = [len(p) + len(x) for p, x in zip(prefs, pieces)]
            offs = lp["text_offset"]
            sums = np.zeros(len(prefs))
            got = np.zeros(len(prefs), dtype=bool)
            bad = np.zeros(len(prefs), dtype=bool)
            owner = self._align(ids, local_ends, lp["tokens"], offs, len(prompt))
            for j, (tok, v, top) in enumerate(zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"])):
                i = owner[j]
                if i < 0:
                    continue
                if v is None:
                    bad[i] = True
                    continue
                if top and not got[i]:  # the first server token in local token i predicts it
                    ts.argmax[i] = self._to_local(ids[1:i + 1], prefs[i], max(top, key=top.get))
                    ts.mu[i], ts.sigma2[i] = self._moments(top)
                sums[i] += v
                got[i] = True
            ts.logprobs[:] = np.where(bad, np.nan, np.where(got, sums, 0.0))
            out.append(ts)
        return out

    def _align(self, ids: list[int], local_ends: list[int], tokens: list[str], offs: list[int],
               prompt_len: int) -> list[int]:
        """Local position owning each echoed server token (-1: BOS, generated or outside).
        Same tokenizer (the echoed prompt ends with our tokens' strings): one to one;
        otherwise by character end offsets (module docstring)."""
        n = len(local_ends)
        pieces = [self.tokenizer.decode([x]) for x in ids[1:]]
        gen = next((j for j, o in enumerate(offs) if o >= prompt_len and j > 0), len(tokens))
        if gen >= n and tokens[gen - n:gen] == pieces:
            return [-1] * (gen - n) + list(range(n)) + [-1] * (len(tokens) - gen)
        owner = []
        for j in range(len(tokens)):
            end = min(offs[j + 1] if j + 1 < len(offs) else prompt_len, prompt_len)
            if j >= gen or end <= 0:
                owner.append(-1)  # the generated token, or zero-width tokens at the start (BOS)
            else:
                owner.append(next((i for i, e in enumerate(local_ends) if e >= end), n - 1))
        return owner

    # ---- querying: cache, budget, batching ---------------------------------------------

    def _ask(self, prompts: list[str], max_tokens: int, k: int | None, echo: bool = False) -> list[dict]:
        """One answer dict per prompt ({"text", "logprobs"} in the completions shape)."""
        chat = self.mode == "chat"
        method = "chat" if chat else "completions"
        params = {"model": self.config.model, "max_tokens": max_tokens, "temperature": 0,
                  "logprobs": k, "echo": echo}
        if chat:
            params = {"model": self.config.model, "max_tokens": max_tokens, "temperature": 0,
                      "top_logprobs": k, "instruction": CHAT_INSTRUCTION}
        keys = [query_key(self.fingerprint, method, params, p) for p in prompts]
        answers = self.cache.get_many(list(set(keys)))
        todo: dict[str, str] = {}
        for key, p in zip(keys, prompts):
            if key not in answers and key not in todo:
                todo[key] = p
        self.budget.used["cache_hits"] += len(set(keys)) - len(todo)
        batch = 1 if chat or not self._list else self.config.batch
        items = list(todo.items())
        for start in range(0, len(items), batch):
            chunk = items[start:start + batch]
            got = self._request(method, [p for _, p in chunk], params, first=start)
            new = {key: a for (key, _), a in zip(chunk, got)}
            self.cache.put_many(self.fingerprint, method, new)  # written as it arrives
            answers.update(new)
        return [answers[k_] for k_ in keys]

    def _request(self, method: str, prompts: list[str], params: dict, first: int = 0) -> list[dict]:
        """One HTTP request with bounded retries; validated answers in prompt order."""
        import openai

        est_prompt = sum(len(self.tokenizer(p)["input_ids"]) + 1 for p in prompts)
        self.budget.check(est_prompt, params["max_tokens"] * len(prompts))
        where = (f"{method} request (model {self.config.model!r}, prompts {first}..{first + len(prompts) - 1}"
                 f" of this call)")
        for attempt in range(self.config.retries + 1):
            try:
                body = self._send(method, prompts, params)
                answers = _validate(method, body, prompts, params, where)
                break
            except Unsupported:
                raise
            except (openai.APIError, MalformedResponse) as err:
                if not _transient(err):
                    raise Unsupported(f"{where}: the server rejected it: {_describe(err)}") from None
                if attempt == self.config.retries:
                    kind = MalformedResponse if isinstance(err, MalformedResponse) else APIRequestError
                    raise kind(f"{where}: failed after {attempt + 1} attempts; last: {_describe(err)}") from None
                self.budget.used["retries"] += 1
                time.sleep(self.config.backoff * 2 ** attempt * (1 + self._rng.random()))
        usage = body.get("usage") or {}
        self.budget.charge(usage.get("prompt_tokens", est_prompt),
                           usage.get("completion_tokens", params["max_tokens"] * len(prompts)))
        return answers

    def _send(self, method: str, prompts: list[str], params: dict) -> dict:
        if method == "chat":
            extra = {"logprobs": True, "top_logprobs": params["top_logprobs"]} if params["top_logprobs"] else {}
            raw = self.client.chat.completions.with_raw_response.create(
                model=params["model"], max_tokens=params["max_tokens"], temperature=0,
                messages=[{"role": "system", "content": params["instruction"]},
                          {"role": "user", "content": prompts[0]}], **extra)
        else:
            extra = {k: params[k] for k in ("logprobs", "echo") if params[k] not in (None, False)}
            raw = self.client.completions.with_raw_response.create(
                model=params["model"], prompt=prompts if self._list else prompts[0],
                max_tokens=params["max_tokens"], temperature=0, **extra)
        try:
            body = json.loads(raw.text)
        except ValueError:
            raise MalformedResponse("the body is not JSON") from None
        if not isinstance(body, dict):
            raise MalformedResponse("the body is not a JSON object")
        return body

    # ---- mode detection ---------------------------------------------------------------

    def _resolve_mode(self) -> None:
        """Probe what the server supports once (cached per endpoint) and fall back."""
        if self.mode is not None:
            return
        want = self.config.mode
        key = query_key(self.fingerprint, "probe", {"want": want, "k": self.config.top_logprobs}, "")
        found = self.cache.get_many([key]).get(key)
        if found is None:
            found = self._probe(want)
            self.cache.put_many(self.fingerprint, "probe", {key: found})
        self.mode, self._list, self._k = found["mode"], found["list"], found["k"]

    def _probe(self, want: str) -> dict:
        k0 = self.config.top_logprobs
        trials = []  # (mode, list, k, echo)
        if want in ("auto", "logprobs"):
            trials += [("logprobs-echo", True, k, True) for k in (k0, 1)]
            trials += [("logprobs", True, k, False) for k in (k0, 1)]
        if want in ("auto", "label"):
            trials += [("label", True, None, False), ("label", False, None, False)]
        if want in ("auto", "chat"):
            trials += [("chat", False, k0, False), ("chat", False, None, False)]
        reasons = []
        for mode, as_list, k, echo in trials:
            self.mode, self._list = mode, as_list
            method = "chat" if mode == "chat" else "completions"
            prompts = PROBE_PROMPTS if as_list else PROBE_PROMPTS[:1]
            params = ({"model": self.config.model, "max_tokens": 1, "temperature": 0,
                       "top_logprobs": k, "instruction": CHAT_INSTRUCTION} if method == "chat" else
                      {"model": self.config.model, "max_tokens": 1, "temperature": 0, "logprobs": k,
                       "echo": echo})
            try:
                answers = self._request(method, prompts, params)
                if echo and not all(len(a["logprobs"]["tokens"]) >= 3 for a in answers):
                    raise Unsupported("echo ignored")  # e.g. a server that drops `echo` silently
                return {"mode": mode, "list": as_list, "k": k}
            except Unsupported as err:
                reasons.append(f"{mode}{'' if as_list else '/single'}{'' if k is None else f'/k={k}'}: {err}")
            finally:
                self.mode = None
        raise APIRequestError(f"server {self.config.base_url} supports none of the tried modes for "
                              f"{want!r}: " + "; ".join(reasons))


def _nan_scores(ids: list[int], n: int) -> TokenScores:
    return TokenScores(token_ids=np.asarray(ids[1:n + 1], dtype=np.int64), logprobs=np.full(n, np.nan),
                       argmax=np.full(n, -1, dtype=np.int64), mu=np.full(n, np.nan),
                       sigma2=np.full(n, np.nan))


def _first_top(answer: dict) -> dict | None:
    lp = answer.get("logprobs")
    if not lp or not lp.get("top_logprobs"):
        return None
    return lp["top_logprobs"][0] or None


def _describe(err: Exception) -> str:
    """Type and status of an error, never request headers (the key lives there)."""
    status = getattr(err, "status_code", None)
    return f"{type(err).__name__}{f' (HTTP {status})' if status else ''}: {str(err)[:200]}"


def _validate(method: str, body: dict, prompts: list[str], params: dict, where: str) -> list[dict]:
    """Check the shape (OpenAI API reference) and return one completions-shaped dict per prompt."""
    choices = body.get("choices")
    if not isinstance(choices, list) or len(choices) != len(prompts):
        raise MalformedResponse(f"expected {len(prompts)} choices, got "
                                f"{len(choices) if isinstance(choices, list) else 'none'}")
    by_index: dict[int, dict] = {}
    for c in choices:
        i = c.get("index") if isinstance(c, dict) else None
        if not isinstance(i, int) or not 0 <= i < len(prompts) or i in by_index:
            raise MalformedResponse(f"choice with a bad or repeated index {i!r}")
        by_index[i] = c
    out = []
    for i in range(len(prompts)):
        c = by_index[i]
        if method == "chat":
            msg = c.get("message")
            if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
                raise MalformedResponse(f"prompt {i}: choice has no message content")
            out.append({"text": msg["content"], "logprobs": _chat_logprobs(c, params, where, i)})
            continue
        if not isinstance(c.get("text"), str):
            raise MalformedResponse(f"prompt {i}: choice has no text")
        lp = c.get("logprobs")
        if params.get("logprobs") is not None:
            if not isinstance(lp, dict):
                raise Unsupported(f"{where}, prompt {i}: logprobs requested but not returned")
            fields = [lp.get(f) for f in ("tokens", "token_logprobs", "top_logprobs", "text_offset")]
            if not all(isinstance(f, list) for f in fields) or len({len(f) for f in fields}) != 1:
                raise MalformedResponse(f"prompt {i}: logprobs lists missing or of unequal length")
        out.append({"text": c["text"], "logprobs": lp if params.get("logprobs") is not None else None})
    return out


def _chat_logprobs(choice: dict, params: dict, where: str, i: int) -> dict | None:
    if not params.get("top_logprobs"):
        return None
    content = (choice.get("logprobs") or {}).get("content")
    if not isinstance(content, list) or not content:
        raise Unsupported(f"{where}, prompt {i}: chat logprobs requested but not returned")
    return {"tokens": [t["token"] for t in content], "token_logprobs": [t["logprob"] for t in content],
            "top_logprobs": [{x["token"]: x["logprob"] for x in t.get("top_logprobs", [])} for t in content],
            "text_offset": None}


def tokenizer_identity(path: str | Path) -> str:
    """Digest of the tokenizer files (positions change when they do)."""
    path = Path(path)
    h = hashlib.sha256()
    files = {f for pat in ("*token*", "*vocab*", "*merges*", "*.model") for f in path.glob(pat)}
    for f in sorted(files):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]
