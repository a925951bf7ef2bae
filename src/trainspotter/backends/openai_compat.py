"""Black-box backend over any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, `trainspotter serve`).

BADI audits models reachable only through an API (App. A.6 label-only features,
App. E API auditing). Every query costs, so this backend asks the fewest questions
(many prompts per /v1/completions request), never asks one twice (``QueryCache``, one
row per prompt), stays within a ``Budget`` and survives faults (bounded retries with
exponential backoff and jitter on 429, 5xx, timeouts, dropped connections and malformed
bodies; the openai client's own retries are off so every retry is counted).

Real servers differ (lists refused, echo ignored or one position off, ``logprobs``
ignored, chat only): a probe (api/probe.py), once per endpoint and its answer cached, finds
the richest mode that works and how to query it; ``describe()`` says what was chosen.
The parts live in ``backends/api/`` (config, errors, positions, modes, transport, probe).

Spec: ``openai:MODEL@BASE_URL[?key=value&...]`` (see ``APIConfig`` for the keys), e.g.
``openai:mini@http://127.0.0.1:8000/v1?tokenizer=testbed:mini&mode=auto``. The API key is
read from the environment variable ``key_env`` (default OPENAI_API_KEY; a dummy key is
used when it is unset, which local servers accept); it never enters a fingerprint, cache
key, log line or exception.

Modes (``backend.mode``, also in ``describe()``; api/modes.py; ``auto`` probes the server
once and caches the answer; a spec may also ask for one mode, ``logprobs`` allowing
``logprobs-echo``):
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

from collections.abc import Sequence
from dataclasses import replace

from trainspotter.backends.api.config import APIConfig, api_fingerprint, tokenizer_identity
from trainspotter.backends.api.errors import Incompatible, ListRefused, MalformedResponse, Unsupported
from trainspotter.backends.api.modes import BY_NAME, CHOICE, MODES, Mode
from trainspotter.backends.api.positions import LocalTokens
from trainspotter.backends.api.probe import PROBE_VERSION, Probe, ServerProfile
from trainspotter.backends.api.transport import Transport
from trainspotter.backends.base import TokenScores, per_prefix
from trainspotter.backends.budget import Budget
from trainspotter.backends.cache import QueryCache, query_key
from trainspotter.errors import APIRequestError

__all__ = ["MODES", "APIConfig", "APIRequestError", "Incompatible", "MalformedResponse", "OpenAIBackend",
           "Unsupported", "api_fingerprint", "tokenizer_identity"]
NOT_PROBED = {"list_prompts": False, "top_logprobs": None, "echo_shift": None, "echo_values": None,
              "empty_prompt": ""}  # describe() before a probe


class OpenAIBackend:
    """``Backend`` over an OpenAI-compatible HTTP API (see the module docstring)."""

    def __init__(self, config: APIConfig, cache: QueryCache | None = None):
        from trainspotter.backends.hf import load_tokenizer

        if config.mode not in MODES:
            raise ValueError(f"mode {config.mode!r}: expected one of {', '.join(MODES)}")
        if not config.tokenizer:
            raise ValueError("an API backend needs a local tokenizer (tokenizer=PATH or a spec)")
        self.config = config
        self.local = LocalTokens(load_tokenizer(config.tokenizer))  # a folder or a .gguf file
        self.fingerprint = api_fingerprint(config.model, config.base_url)
        self.cache = cache or QueryCache(config.cache)
        self.budget = Budget(config.max_requests, config.max_tokens, config.max_cost,
                             config.price_prompt_1k, config.price_completion_1k)
        self.transport = Transport(config, self.budget, self.local)
        self.profile: ServerProfile | None = None  # what the server supports: probed on first use
        self.system_fingerprints: set[str] = set()  # the server builds that gave the answers used
        self._probe_key = query_key(self.fingerprint, "probe", {"want": config.mode, "k": config.top_logprobs,
                                                                  "v": PROBE_VERSION}, "")

    @property
    def tokenizer(self):
        """The local tokenizer that defines positions."""
        return self.local.tokenizer

    @tokenizer.setter
    def tokenizer(self, tokenizer) -> None:
        self.local.tokenizer = tokenizer

    @property
    def mode(self) -> str | None:
        """The mode in use (None until probed)."""
        return self.profile.mode if self.profile else None

    # ---- Backend protocol -------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        return self.local.positions(text)[0]

    def _positions(self, text: str) -> tuple[list[int], list[str], list[str]]:
        """[BOS]+ids, prefix texts and token texts (tests and benchmarks count positions)."""
        return self.local.positions(text)

    def score(self, texts: list[str], distribution: bool = False) -> list[TokenScores]:
        """Per-position signals of each text; requests batch prompts across texts. An API
        returns no whole distribution: ``distribution`` changes nothing (those arrays stay None)."""
        return self._resolve_mode().score(texts, self.local, self.profile, self.ask)

    def generate(self, prefixes: list[str], max_new_tokens: int | Sequence[int]) -> list[list[int]]:
        """Greedy continuation ids of each prefix under the local tokenizer (re-encoded, so the
        count can differ from ``max_new_tokens`` when the server's tokenizer differs). Per-prefix
        lengths: one ``ask`` per distinct length, so every request bills exactly its own
        ``max_tokens`` (requests of several prompts share one)."""
        lengths = per_prefix(max_new_tokens, len(prefixes))
        out: list[list[int]] = [[] for _ in prefixes]
        for k in sorted(set(lengths) - {0}):
            idx = [i for i, n in enumerate(lengths) if n == k]
            answers = self.ask(self._resolve_mode().plain, [prefixes[i] for i in idx], k, None)
            # None: the empty prefix, which this server answers in no form
            for i, a in zip(idx, answers):
                out[i] = [] if a is None else self.local.continuation(prefixes[i], a["text"])
        return out

    def draw(self, prompt_ids: list[int], logit_bias: dict[int, float], n: int, seed: int) -> list[str]:
        """``n`` one-token answers after ``prompt_ids`` (the local tokenizer's ids; the server adds
        its BOS, as this project's server does) sampled at temperature 1 with ``logit_bias``
        ({token id: bias}, within ±100): their texts, cached like every answer (the seed is part
        of the key, so a run asked again reads the same draws)."""
        import json

        params = {"model": self.config.model, "max_tokens": 1, "temperature": 1.0, "n": n, "seed": seed,
                  "logit_bias": {str(t): round(float(b), 4) for t, b in sorted(logit_bias.items())}}
        key = query_key(self.fingerprint, CHOICE.name, params, json.dumps(prompt_ids))
        if (found := self.cache.get_many([key])).get(key):
            self.budget.cache_hits(1)
            return found[key]["texts"]
        [answer] = self.transport.request(CHOICE, [prompt_ids], params)
        self.cache.put_many(self.fingerprint, CHOICE.name, {key: answer})
        return answer["texts"]

    # ---- reporting --------------------------------------------------------------------

    def usage(self) -> dict:
        """requests (answered), prompt/completion/total tokens, cost, cache_hits (prompts
        answered from the cache), retries (failed attempts re-sent), rejected (attempts the
        server refused or answered without what was asked, after which that request shape was
        dropped: probe trials, lists of prompts), http_requests (all of them). The budget
        limits answered requests and their tokens (refused requests are not billed).
        logprob_values / logprob_bounds: token log-probs read (from answers or the cache) as
        the server's value, or as the k-th top log-prob where the token was not in the top-k."""
        return self.budget.usage() | self.local.read

    def describe(self) -> dict:
        """What this backend does against its server: ``mode`` (None until probed; a probe
        cached by an earlier run counts, no request is sent), whether prompts go in lists,
        ``echo_shift`` (echo's log-prob of token j read at position j + shift), ``summary``
        and ``system_fingerprints``: the server builds (its ``system_fingerprint``) that gave
        the answers this backend used, cached ones included: two differ when the provider
        changed what answers under the same model name."""
        c, profile = self.config, self._known_profile()
        mode = BY_NAME[profile.mode] if profile else None
        how = mode.describe(profile) if mode else NOT_PROBED
        d = {"backend": "openai", "model": c.model, "base_url": c.base_url, "mode": self.mode, **how,
             "batch": c.batch if mode is None or how["list_prompts"] else 1, "tokenizer": c.tokenizer,
             "key_env": c.key_env, "fingerprint": self.fingerprint,
             "system_fingerprints": sorted(self.system_fingerprints)}
        return d | {"summary": _summary(d)}

    # ---- querying: cache, budget, batching ---------------------------------------------

    def ask(self, mode: Mode, prompts: list[str], max_tokens: int, k: int | None) -> list[dict | None]:
        """One answer dict per prompt ({"text", "logprobs"} in the completions shape), from the
        cache where asked before, else in requests of up to ``batch`` prompts (one where the
        mode or the server takes no lists); None for the empty prefix where no form of it is
        answered."""
        params = mode.params(self.config.model, max_tokens, k)
        prompts = [self.profile.empty if p == "" else p for p in prompts]
        keys = [None if p is None else query_key(self.fingerprint, mode.method, params, p) for p in prompts]
        asked = set(keys) - {None}
        answers = self.cache.get_many(list(asked))
        todo: dict[str, str] = {}
        for key, p in zip(keys, prompts):
            if key is not None and key not in answers and key not in todo:
                todo[key] = p
        self.budget.cache_hits(len(asked) - len(todo))
        items, start = list(todo.items()), 0
        while start < len(items):
            chunk = items[start:start + (self.config.batch if mode.lists and self.profile.lists else 1)]
            try:
                got = self.transport.request(mode, [p for _, p in chunk], params, first=start)
            except ListRefused:  # remembered for this endpoint; the chunk goes one by one
                self._keep_profile(replace(self.profile, lists=False))
                continue
            new = {key: a for (key, _), a in zip(chunk, got)}
            self.cache.put_many(self.fingerprint, mode.method, new)  # written as it arrives
            answers.update(new)
            start += len(chunk)
        used = [None if key is None else answers[key] for key in keys]
        self.system_fingerprints.update(a["system_fingerprint"] for a in used if a and a.get("system_fingerprint"))
        return used

    # ---- what the server supports -----------------------------------------------------

    def _resolve_mode(self) -> Mode:
        """The mode in use: probed once per endpoint (the answer cached), then adopted."""
        if self._known_profile() is None:
            self._keep_profile(Probe(self.transport, self.tokenizer, self._store).run(self.config.mode))
        return BY_NAME[self.profile.mode]

    def _known_profile(self) -> ServerProfile | None:
        """The profile in use, else the one an earlier probe cached (no request is sent)."""
        if self.profile is None and (found := self.cache.get_many([self._probe_key]).get(self._probe_key)):
            self.profile = ServerProfile.from_record(found)
        return self.profile

    def _keep_profile(self, profile: ServerProfile) -> None:
        self.profile = profile
        self.cache.put_many(self.fingerprint, "probe", {self._probe_key: profile.record()})

    def _store(self, mode: Mode, params: dict, prompt: str, answer: dict) -> None:
        key = query_key(self.fingerprint, mode.method, params, prompt)
        self.cache.put_many(self.fingerprint, mode.method, {key: answer})


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
    if d.get("system_fingerprints"):
        parts.append(f"server build {', '.join(d['system_fingerprints'])}")
    return ", ".join(parts)


def from_spec(spec, batch_size: int = 8) -> OpenAIBackend:
    """The ``openai:`` scheme's backend (``backends.spec.SCHEMES``); the spec's own ``batch``
    option sets prompts per request, ``batch_size`` is for local models only."""
    from trainspotter.backends.spec import api_config

    return OpenAIBackend(api_config(spec))
