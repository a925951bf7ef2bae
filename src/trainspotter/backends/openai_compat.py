"""Black-box backend over any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, `trainspotter serve`).

BADI audits models reachable only through an API (App. A.6 label-only features,
App. E API auditing). Every query costs, so this backend asks the fewest questions
(many prompts per /v1/completions request), never asks one twice (``QueryCache``, one
row per prompt), stays within a ``Budget`` and survives faults (bounded retries with
exponential backoff and jitter on 429, 5xx, timeouts, dropped connections and malformed
bodies; the openai client's own retries are off so every retry is counted).

Real servers differ (``_probe``, once per endpoint, the answer cached): some reject a
list of prompts in one request (llama-cpp-python answers HTTP 500 to two), some ignore
``echo`` or return its log-probs one position off, some ignore ``logprobs``, some serve
only /v1/chat/completions. The probe tries the richest mode first and keeps what the
server really does: one prompt per request where lists are refused (three failed lists
while one prompt works, so a transient fault is not taken for a refusal; afterwards no
list is sent, so the refusal is never retried as a fault), the echo offset measured
against a plain ``logprobs`` request for the same position (``echo_shift``), echo's rows
without its token log-probs where those belong to another row (llama-cpp-python pairs the
row predicting token j+1 with its log-prob of token j: ``echo_values`` False), what to send
for the empty prefix ("" or, where refused, the BOS text: ``_probe_empty``), the next
mode when a feature is refused or silently missing, and one ``Incompatible`` error
naming every refusal when no mode works. ``describe()`` says what was chosen.

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
``text[:end(x_{i-1})]`` (character offsets of the local tokens; "" for i = 1, sent as the
BOS token's text to servers that refuse ""). The server
tokenizes that string with its own tokenizer. An answer string s is mapped back to a
local id by re-encoding prefix + s and taking the first token after the prefix's local
ids (if the re-encoding does not start with them: the first local token of s; an empty
answer maps to the local EOS id, -1 if none; an answer starting with U+FFFD, a byte
token that is only part of a character, maps to -1 = unknown). Text prompts cannot end
inside a multi-byte character either, so at positions after such a byte token the
server sees a slightly different prefix (0.2% of positions on the testbed). With ``echo``, the server's prompt tokens
are aligned to local tokens by character end offsets: each server token's log-prob goes
to the local token containing its last character, so the sum over the text (the
log-likelihood) is kept; local tokens that receive none get 0.0; positions echo gives no log-prob (the server's
first token) are asked as in the plain ``logprobs`` mode. When the server uses the same tokenizer
this is exactly one-to-one. ``mu``/``sigma2`` (mean and variance of log p under p) are
estimated from the top-k log-probs plus one bucket spreading the remaining mass evenly
over the other V - k tokens of the local vocabulary.
"""

from __future__ import annotations

import hashlib
import json
import logging
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
from trainspotter.errors import APIRequestError

MODES = ("auto", "label", "logprobs", "chat")
CHAT_INSTRUCTION = ("Continue the following text exactly where it stops. "
                    "Reply with the continuation only, no commentary.")
log = logging.getLogger(__name__)
PROBE_PROMPTS = ["The cat sat on the", "Once upon a time"]
PROBE_VERSION = 3  # bump when the probe learns something new: older cached answers are re-probed
LIST_TRIES = 3  # failed lists (while one prompt works) that mean "this server takes no lists"
ECHO_TOLERANCE = 0.1  # max |Δ log p| between echo's row and a plain request's for one position


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


class MalformedResponse(APIRequestError):
    """The server answered 200 with a body that is not a valid completion (retried)."""


class Unsupported(APIRequestError):
    """The server rejected or ignored a feature (``echo``, ``logprobs``, a list prompt)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class Incompatible(APIRequestError):
    """No mode works against this server: deterministic, so not worth retrying."""


def _transient(err: Exception) -> bool:
    import openai

    if isinstance(err, (openai.APIConnectionError, MalformedResponse)):  # incl. timeouts, drops
        return True
    return isinstance(err, openai.APIStatusError) and (err.status_code == 429 or err.status_code >= 500)


class OpenAIBackend:
    """``Backend`` over an OpenAI-compatible HTTP API (see the module docstring)."""

    def __init__(self, config: APIConfig, cache: QueryCache | None = None):
        import openai

        from trainspotter.backends.hf import load_tokenizer

        if config.mode not in MODES:
            raise ValueError(f"mode {config.mode!r}: expected one of {', '.join(MODES)}")
        if not config.tokenizer:
            raise ValueError("an API backend needs a local tokenizer (tokenizer=PATH or a spec)")
        self.config = config
        self.tokenizer = load_tokenizer(config.tokenizer)  # a folder or a .gguf file
        self.fingerprint = api_fingerprint(config.model, config.base_url)
        self.cache = cache or QueryCache(config.cache)
        self.budget = Budget(config.max_requests, config.max_tokens, config.max_cost,
                             config.price_prompt_1k, config.price_completion_1k)
        self.client = openai.OpenAI(api_key=os.environ.get(config.key_env) or "sk-no-key",
                                    base_url=config.base_url, max_retries=0, timeout=config.timeout)
        self._rng = random.Random(config.seed)
        self.mode: str | None = None  # resolved on first use
        self._list, self._k, self._shift = True, config.top_logprobs, 0
        self._empty: str | None = ""  # sent for the empty prefix (``_probe_empty``)
        self._echo_values = True  # echo's token log-probs usable (else read from its top-k rows)
        self._probe_key = query_key(self.fingerprint, "probe", {"want": config.mode, "k": config.top_logprobs,
                                                                  "v": PROBE_VERSION}, "")
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
                self._fill(ts, i, ids, prefs[i], pieces[i], next(answers))
            out.append(ts)
        return out

    def _fill(self, ts: TokenScores, i: int, ids: list[int], prefix: str, piece: str, a: dict | None) -> None:
        """Position i from the answer to its prefix (None: not askable, left unknown)."""
        if a is None:
            return
        ts.argmax[i] = self._to_local(ids[1:i + 1], prefix, a["text"])
        top = _first_top(a)
        if top:
            ts.logprobs[i] = _lookup(top, piece, self._k)
            ts.mu[i], ts.sigma2[i] = self._moments(top)

    def generate(self, prefixes: list[str], max_new_tokens: int) -> list[list[int]]:
        """Greedy continuation ids of each prefix under the local tokenizer (re-encoded, so the
        count can differ from ``max_new_tokens`` when the server's tokenizer differs)."""
        self._resolve_mode()
        answers = self._ask(prefixes, max_tokens=max_new_tokens, k=None)
        out = []
        for prefix, a in zip(prefixes, answers):
            if a is None:  # the empty prefix, which this server answers in no form
                out.append([])
                continue
            p = self.tokenizer(prefix, add_special_tokens=False)["input_ids"]
            full = self.tokenizer(prefix + a["text"], add_special_tokens=False)["input_ids"]
            out.append(full[len(p):] if full[:len(p)] == p else
                       self.tokenizer(a["text"], add_special_tokens=False)["input_ids"])
        return out

    # ---- reporting --------------------------------------------------------------------

    def usage(self) -> dict:
        """requests (answered), prompt/completion/total tokens, cost, cache_hits (prompts
        answered from the cache), retries (failed attempts re-sent), rejected (attempts the
        server refused or answered without what was asked, after which that request shape was
        dropped: probe trials, lists of prompts), http_requests (all of them). The budget
        limits answered requests and their tokens (refused requests are not billed)."""
        u = dict(self.budget.used)
        u["total_tokens"] = u["prompt_tokens"] + u["completion_tokens"]
        u["http_requests"] = u["requests"] + u["retries"] + u["rejected"]
        return u

    def describe(self) -> dict:
        """What this backend does against its server: ``mode`` (None until probed; a probe
        cached by an earlier run counts, no request is sent), whether prompts go in lists,
        ``echo_shift`` (echo's log-prob of token j read at position j + shift) and ``summary``."""
        c = self.config
        if self.mode is None and (found := self.cache.get_many([self._probe_key]).get(self._probe_key)):
            self._adopt(found)
        d = {"backend": "openai", "model": c.model, "base_url": c.base_url, "mode": self.mode,
             "list_prompts": self._list if self.mode not in (None, "chat") else False,
             "top_logprobs": self._k if self.mode not in (None, "label") else None,
             "echo_shift": self._shift if self.mode == "logprobs-echo" else None,
             "echo_values": self._echo_values if self.mode == "logprobs-echo" else None,
             "empty_prompt": self._empty if self.mode not in (None, "chat") else "",
             "batch": c.batch if self._list and self.mode != "chat" else 1, "tokenizer": c.tokenizer,
             "key_env": c.key_env, "fingerprint": self.fingerprint}
        return d | {"summary": _summary(d)}

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
            values, tops = _shifted(lp["token_logprobs"], self._shift), _shifted(lp["top_logprobs"], self._shift)
            for j, (tok, v, top) in enumerate(zip(lp["tokens"], values, tops)):
                i = owner[j]
                if i < 0:
                    continue
                if not self._echo_values:  # its values are another row's: read the token in its row
                    v = _lookup(top, tok, self._k) if top else None
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
        # positions echo gives no log-prob (the first token in OpenAI's shape; the first two
        # where rows are shifted past them, as llama-cpp-python's) are asked as in the plain
        # logprobs mode: one prompt per such prefix (the empty one is shared by every text)
        holes = [(ts, n, i) for n, ts in enumerate(out) for i in np.flatnonzero(np.isnan(ts.logprobs))]
        if holes:
            answers = self._ask([per_text[n][1][i] for _, n, i in holes], max_tokens=1, k=self._k)
            for (ts, n, i), a in zip(holes, answers):
                ids, prefs, pieces = per_text[n]
                self._fill(ts, i, ids, prefs[i], pieces[i], a)
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
        params = self._params(method, max_tokens, k, echo)
        prompts = [self._empty if p == "" else p for p in prompts]  # None: the server answers no form of ""
        keys = [None if p is None else query_key(self.fingerprint, method, params, p) for p in prompts]
        asked = set(keys) - {None}
        answers = self.cache.get_many(list(asked))
        todo: dict[str, str] = {}
        for key, p in zip(keys, prompts):
            if key is not None and key not in answers and key not in todo:
                todo[key] = p
        self.budget.used["cache_hits"] += len(asked) - len(todo)
        items, start = list(todo.items()), 0
        while start < len(items):
            chunk = items[start:start + (1 if chat or not self._list else self.config.batch)]
            try:
                got = self._request(method, [p for _, p in chunk], params, first=start)
            except ListRefused:
                self._list = False  # remembered for this endpoint; the chunk goes one by one
                self.cache.put_many(self.fingerprint, "probe", {self._probe_key: self._found()})
                continue
            new = {key: a for (key, _), a in zip(chunk, got)}
            self.cache.put_many(self.fingerprint, method, new)  # written as it arrives
            answers.update(new)
            start += len(chunk)
        return [None if k_ is None else answers[k_] for k_ in keys]

    def _request(self, method: str, prompts: list[str], params: dict, first: int = 0,
                 retries: int | None = None, refuse_after: int | None = None) -> list[dict]:
        """One HTTP request with bounded retries (``retries``, default the config's);
        validated answers in prompt order. ``refuse_after``: that many HTTP 500 in a row
        read as a refusal (Unsupported), for probes of servers that answer an unsupported
        feature with 500. Every failed attempt is counted: re-sent ones as retries, the one
        given up on as rejected; an answer (200) without what was asked is charged like any
        answer (it is billed) and raises Unsupported."""
        import openai

        retries = self.config.retries if retries is None else retries
        errors_500 = 0
        est_prompt = sum(len(self.tokenizer(p)["input_ids"]) + 1 for p in prompts)
        self.budget.check(est_prompt, params["max_tokens"] * len(prompts))
        where = (f"{method} request (model {self.config.model!r}, prompts {first}..{first + len(prompts) - 1}"
                 f" of this call)")
        for attempt in range(retries + 1):
            try:
                body = self._send(method, prompts, params)
                answers = _validate(method, body, prompts, params, where)
                break
            except Unsupported:  # answered (and billed) without what was asked
                self._charge(body, est_prompt, params["max_tokens"] * len(prompts))
                raise
            except (openai.APIError, MalformedResponse) as err:
                errors_500 = errors_500 + 1 if getattr(err, "status_code", None) == 500 else 0
                if not _transient(err) or (refuse_after and errors_500 >= refuse_after):
                    refused = max(1, errors_500)  # the earlier 500s of the row were refusals too
                    self.budget.used["retries"] -= refused - 1
                    self.budget.used["rejected"] += refused
                    kind = ListRefused if len(prompts) > 1 else Unsupported
                    raise kind(f"{where}: the server rejected it{' every time' if errors_500 > 1 else ''}: "
                               f"{_describe(err)}", getattr(err, "status_code", None)) from None
                if attempt == retries:
                    self.budget.used["rejected"] += 1
                    kind = MalformedResponse if isinstance(err, MalformedResponse) else APIRequestError
                    raise kind(f"{where}: failed after {attempt + 1} attempts; last: {_describe(err)}") from None
                self.budget.used["retries"] += 1
                time.sleep(self.config.backoff * 2 ** attempt * (1 + self._rng.random()))
        self._charge(body, est_prompt, params["max_tokens"] * len(prompts))
        return answers

    def _charge(self, body: dict, est_prompt: int, est_completion: int) -> None:
        """One answered request: the server's token counts, else the estimates."""
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        self.budget.charge(usage.get("prompt_tokens", est_prompt), usage.get("completion_tokens", est_completion))

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
                model=params["model"], prompt=prompts if len(prompts) > 1 else prompts[0],
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
        found = self.cache.get_many([self._probe_key]).get(self._probe_key)
        if found is None:
            found = self._probe(self.config.mode)
            self.cache.put_many(self.fingerprint, "probe", {self._probe_key: found})
        self._adopt(found)

    def _adopt(self, found: dict) -> None:
        self.mode, self._list, self._k = found["mode"], found["list"], found["k"]
        self._shift = found.get("shift", 0)
        self._empty, self._echo_values = found.get("empty", ""), found.get("echo_values", True)

    def _found(self) -> dict:
        return {"mode": self.mode, "list": self._list, "k": self._k, "shift": self._shift,
                "empty": self._empty, "echo_values": self._echo_values}

    def _probe(self, want: str) -> dict:
        """Try the modes ``want`` allows, richest first; the first that works is kept (with
        whether lists of prompts work and echo's offset). Refusals (4xx, a list that fails
        while one prompt works, log-probs or echo missing from a 200 answer) move on to the
        next mode at once; transient faults are retried as usual, and a server that answers
        nothing at all raises ``APIRequestError``. No mode: ``Incompatible``."""
        k0 = self.config.top_logprobs
        trials = []  # (mode, k, echo)
        if want in ("auto", "logprobs"):
            ks = list(dict.fromkeys((k0, 1)))
            trials += [("logprobs-echo", k, True) for k in ks] + [("logprobs", k, False) for k in ks]
        if want in ("auto", "label"):
            trials.append(("label", None, False))
        if want in ("auto", "chat"):
            trials += [("chat", k0, False), ("chat", None, False)]
        reasons, skip = [], set()
        self._lists_seen: bool | None = None
        for mode, k, echo in trials:
            method = "chat" if mode == "chat" else "completions"
            if method in skip or (method, k is not None) in skip or (echo and "echo" in skip):
                continue
            self.mode, self._k, self._shift, self._echo_values = mode, k, 0, True
            try:
                self._probe_mode(method, k, echo)
                self._list = bool(self._lists_seen) and method == "completions"
                self._empty = self._probe_empty() if method == "completions" else ""
                return self._found()
            except Unsupported as err:
                reasons.append(f"{mode}{'' if k is None else f' (top-{k})'}: {err}")
                if err.status in (404, 405):
                    skip.add(method)  # no such endpoint: no other mode of it will work
                elif "not returned" in str(err):
                    skip.add((method, True))  # log-probs ignored: no k will bring them
                elif "echo ignored" in str(err):
                    skip.add("echo")
            finally:
                self.mode = None
        self._list = True
        raise Incompatible(f"server {self.config.base_url} (model {self.config.model!r}) supports none of "
                           f"the modes tried for mode={want}: " + "; ".join(reasons))

    def _probe_mode(self, method: str, k: int | None, echo: bool) -> None:
        """One mode on the probe prompts; learns whether lists work (``_lists_seen``, None
        while unknown). Raises Unsupported when the mode does not work."""
        lists = self._lists_seen
        params = self._params(method, 1, k, echo)
        answers, listed = None, None
        if method == "completions" and lists is not False:
            try:
                answers = self._request(method, PROBE_PROMPTS, params, retries=0)
                lists = True
            except ListRefused as err:  # a 4xx: the endpoint, the parameters or the list?
                if err.status in (404, 405):
                    raise
                listed = err
            except Unsupported:
                raise  # answered, without what was asked: the mode, not the list, is refused
            except APIRequestError as err:  # e.g. HTTP 500 (llama-cpp-python on a list)
                listed = err
        if answers is None:  # one prompt, usual retries (a feature answered by 500s is refused)
            answers = self._request(method, PROBE_PROMPTS[:1], params, refuse_after=LIST_TRIES)
            if method == "completions" and lists is None:  # one works: was the list refused?
                lists = self._lists_work(params, listed)
        self._lists_seen = lists
        if echo:
            self._shift = self._echo_shift(answers[0], PROBE_PROMPTS[0], k)

    def _probe_empty(self) -> str | None:
        """The prompt sent for the empty prefix (position 1 of every text): "" where the server
        answers it; else the BOS (or EOS) token's text, which servers that parse special tokens
        read as that token, the context the local tokenizer gives position 1 (llama-cpp-python
        answers "" with HTTP 500 for models that add no BOS, as SmolLM2's gguf); None where no
        form is answered (position 1 stays unknown). The answer is cached as score() asks it."""
        params = self._params("completions", 1, None if self.mode == "label" else self._k, False)
        tok = self.tokenizer
        for prompt in dict.fromkeys(p for p in ("", tok.bos_token, tok.eos_token) if p is not None):
            try:
                answers = self._request("completions", [prompt], params, refuse_after=LIST_TRIES)
            except Unsupported:
                continue
            if prompt:
                log.warning("%s answers no empty prompt: position 1 is asked with %r",
                            self.config.base_url, prompt)
            key = query_key(self.fingerprint, "completions", params, prompt)
            self.cache.put_many(self.fingerprint, "completions", {key: answers[0]})
            return prompt
        log.warning("%s answers no empty prompt and no BOS/EOS text: position 1 is unknown", self.config.base_url)
        return None

    def _lists_work(self, params: dict, first: APIRequestError | None) -> bool:
        """After a failed list while one prompt works: LIST_TRIES - 1 more lists, with the
        usual backoff. Any answer: it was a transient fault (the failures count as retries);
        all fail: lists are refused (they count as rejected) and none is sent again."""
        for attempt in range(1, LIST_TRIES):
            time.sleep(self.config.backoff * 2 ** (attempt - 1) * (1 + self._rng.random()))
            try:
                self._request("completions", PROBE_PROMPTS, params, retries=0)
            except APIRequestError as err:
                first = err
                continue
            moved = min(attempt, self.budget.used["rejected"])  # they were faults after all
            self.budget.used["rejected"] -= moved
            self.budget.used["retries"] += moved
            return True
        log.warning("%s refuses a list of prompts (%s): one prompt per request from now on",
                    self.config.base_url, first)
        return False

    def _echo_shift(self, answer: dict, prompt: str, k: int) -> int:
        """Where echo puts the log-probs of prompt token j: at j (shift 0, the OpenAI shape),
        or one off. Measured on the prompt's last token: the plain ``logprobs`` answer for the
        text before it is the distribution that predicts it; the echo row whose top-k matches
        it (same top token, log-probs within ECHO_TOLERANCE) tells the shift. Echo without
        prompt log-probs, or matching no row: Unsupported (the next mode is tried)."""
        lp = answer["logprobs"]
        offs, tops = lp["text_offset"], lp["top_logprobs"]
        inside = [j for j, o in enumerate(offs) if 0 < o < len(prompt)]
        if len(lp["tokens"]) < 3 or not inside or all(v is None for v in lp["token_logprobs"][:inside[-1] + 1]):
            raise Unsupported("echo gives no log-probs for the prompt (echo ignored)")
        j = inside[-1]
        try:
            plain = self._request("completions", [prompt[:offs[j]]], self._params("completions", 1, k, False))
        except Unsupported:
            return 0  # a plain request does not give log-probs: echo's own shape is taken as is
        want = _first_top(plain[0])
        best = None
        for shift in (0, -1, 1):
            row = tops[j + shift] if 0 <= j + shift < len(tops) else None
            gap = _top_gap(want, row)
            if gap is not None and (best is None or gap < best[0]):
                best = (gap, shift)
        if best is None or best[0] > ECHO_TOLERANCE:
            raise Unsupported(f"echo log-probs match no position of a plain logprobs request "
                              f"(prompt {prompt!r}, token {j})")
        value, token = lp["token_logprobs"][j + best[1]], lp["tokens"][j]
        if token in want and (value is None or abs(value - want[token]) > ECHO_TOLERANCE):
            # rows right, values not: llama-cpp-python 0.3.36 puts at token j the row predicting
            # token j+1 and that row's log-prob of token j (the token fed, not the one predicted).
            # Each token's log-prob is then read in its own row, censored where it is not in the
            # top-k, as in the plain logprobs mode, but one request per text, not per position.
            self._echo_values = False
            log.warning("%s: echo's token log-probs are not the prompt's; read from its top-k rows",
                        self.config.base_url)
        if best[1]:
            log.warning("%s: echo log-probs are one position off (shift %+d); realigned",
                        self.config.base_url, best[1])
        return best[1]

    def _params(self, method: str, max_tokens: int, k: int | None, echo: bool) -> dict:
        if method == "chat":
            return {"model": self.config.model, "max_tokens": max_tokens, "temperature": 0,
                    "top_logprobs": k, "instruction": CHAT_INSTRUCTION}
        return {"model": self.config.model, "max_tokens": max_tokens, "temperature": 0, "logprobs": k,
                "echo": echo}


class ListRefused(Unsupported):
    """The server refused a request with a list of prompts (HTTP 4xx)."""


def _shifted(values: list, shift: int) -> list:
    """values[j + shift] at j (None outside)."""
    n = len(values)
    return [values[j + shift] if 0 <= j + shift < n else None for j in range(n)]


def _lookup(top: dict[str, float], piece: str, k: int | None) -> float:
    """log p of ``piece`` from a top-k dict; where it is absent, the k-th largest log-prob, an
    upper bound (not the smallest entry: llama-cpp-python adds the fed token's own entry)."""
    if piece in top:
        return top[piece]
    values = sorted(top.values(), reverse=True)
    return values[min(k or len(values), len(values)) - 1]


def _top_gap(want: dict | None, row: dict | None) -> float | None:
    """Largest |Δ log p| over the tokens both top-k dicts name; None when their top tokens differ."""
    if not want or not row or max(want, key=want.get) != max(row, key=row.get):
        return None
    return max(abs(want[t] - row[t]) for t in want.keys() & row.keys())


def _summary(d: dict) -> str:
    """One line for reports, e.g. ``logprobs-echo, 1 prompt/request, top-5 log-probs``."""
    if d["mode"] is None:
        return "not probed yet"
    parts = [d["mode"], f"{d['batch']} prompts/request" if d["batch"] > 1 else "1 prompt/request"]
    if d["top_logprobs"]:
        parts.append(f"top-{d['top_logprobs']} log-probs")
    if d["echo_shift"]:
        parts.append(f"echo log-probs realigned by {d['echo_shift']:+d}")
    if d["echo_values"] is False:
        parts.append("log-probs read from echo's top-k rows")
    if d["empty_prompt"] is None:
        parts.append("position 1 unknown (no empty prompt answered)")
    elif d["empty_prompt"]:
        parts.append(f"empty prefix sent as {d['empty_prompt']!r}")
    return ", ".join(parts)


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
    """Digest of the tokenizer files (positions change when they do); of a ``.gguf`` file,
    the whole file (its tokenizer lives in the metadata)."""
    path = Path(path)
    if path.is_file():
        from trainspotter.backends.hf import weights_fingerprint

        return weights_fingerprint(path)
    h = hashlib.sha256()
    files = {f for pat in ("*token*", "*vocab*", "*merges*", "*.model") for f in path.glob(pat)}
    for f in sorted(files):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]
