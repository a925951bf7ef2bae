"""The query modes of the API backend, one object each: what it sends (``params``,
``send``), how it reads the answer (``parse``) and how answers become per-position
scores of the local tokenizer (``score``; positions.py). The modes are described in
backends/openai_compat.py's docstring; ``BY_NAME`` lists every one, richest first.

``params`` is also what the query cache keys an answer by (cache.query_key), so a
change to it re-asks every cached prompt.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from trainspotter.backends.api.errors import LogprobsIgnored, MalformedResponse
from trainspotter.backends.api.positions import LocalTokens, nan_scores
from trainspotter.backends.base import TokenScores

# top-k log-probs asked for where a spec leaves ``top_logprobs`` open: the largest the server
# accepts (OpenAI: 5 for completions, 20 for chat; vLLM: 20 by default). Where the true token
# is not among them its log-prob is only bounded by the k-th (positions.lookup): more is better.
TOP_KS = (20, 5)

CHAT_INSTRUCTION = ("Continue the following text exactly where it stops. "
                    "Reply with the continuation only, no commentary.")

# ask(mode, prompts, max_tokens, k) -> one answer per prompt ({"text", "logprobs"}; None:
# the empty prefix, which the server answers in no form); cached, batched, budgeted
Ask = Callable[["Mode", list[str], int, "int | None"], list["dict | None"]]


class Mode:
    """A mode over /v1/completions that asks one prompt per position (label, logprobs)."""

    name: str
    method = "completions"  # the endpoint, and the query cache's method
    lists = True  # several prompts may go in one request
    echo = False
    uses_k = True  # asks for the top-k log-probs

    @property
    def plain(self) -> Mode:
        """The mode that asks single prefixes and generates (itself, except echo's)."""
        return self

    @property
    def allows(self) -> list[Mode]:
        """The modes a spec asking for this one lets the probe choose, richest first."""
        return [self]

    def k(self, profile) -> int | None:
        return profile.k if self.uses_k else None

    def probe_ks(self, k0: int | None) -> tuple:
        """The top-k values the probe tries, most first: ``k0`` (a spec's ``top_logprobs``),
        else the largest of ``TOP_KS`` the server accepts; then 1."""
        return tuple(dict.fromkeys((*_asked(k0), 1))) if self.uses_k else (None,)

    # ---- the request and its answer ----------------------------------------------------

    def params(self, model: str, max_tokens: int, k: int | None) -> dict:
        return {"model": model, "max_tokens": max_tokens, "temperature": 0, "logprobs": k, "echo": self.echo}

    def send(self, client, prompts: list[str], params: dict):
        extra = {k: params[k] for k in ("logprobs", "echo") if params[k] not in (None, False)}
        return client.completions.with_raw_response.create(
            model=params["model"], prompt=prompts if len(prompts) > 1 else prompts[0],
            max_tokens=params["max_tokens"], temperature=0, **extra)

    def parse(self, body: dict, prompts: list[str], params: dict, where: str) -> list[dict]:
        """Check the shape (OpenAI API reference); one completions-shaped dict per prompt."""
        return [self.parse_choice(c, i, params, where) for i, c in enumerate(_choices(body, len(prompts)))]

    def parse_choice(self, c: dict, i: int, params: dict, where: str) -> dict:
        if not isinstance(c.get("text"), str):
            raise MalformedResponse(f"prompt {i}: choice has no text")
        if params.get("logprobs") is None:
            return {"text": c["text"], "logprobs": None}
        lp = c.get("logprobs")
        if not isinstance(lp, dict):
            raise LogprobsIgnored(f"{where}, prompt {i}: logprobs requested but not returned")
        fields = [lp.get(f) for f in ("tokens", "token_logprobs", "top_logprobs", "text_offset")]
        if not all(isinstance(f, list) for f in fields) or len({len(f) for f in fields}) != 1:
            raise MalformedResponse(f"prompt {i}: logprobs lists missing or of unequal length")
        return {"text": c["text"], "logprobs": lp}

    # ---- answers to scores ---------------------------------------------------------------

    def score(self, texts: list[str], local: LocalTokens, profile, ask: Ask) -> list[TokenScores]:
        """One prompt per prefix position, batched across texts."""
        per_text = [local.positions(t) for t in texts]
        k = self.k(profile)
        answers = iter(ask(self, [p for _, prefs, _ in per_text for p in prefs], 1, k))
        out = []
        for ids, prefs, pieces in per_text:
            ts = nan_scores(ids, len(prefs))
            for i in range(len(prefs)):
                local.fill(ts, i, ids, prefs[i], pieces[i], next(answers), k)
            out.append(ts)
        return out

    def describe(self, profile) -> dict:
        """How this mode queries the server ``profile`` describes (backend.describe())."""
        return {"list_prompts": profile.lists, "top_logprobs": self.k(profile), "echo_shift": None,
                "echo_values": None, "empty_prompt": profile.empty}


class LabelMode(Mode):
    """Label-only (App. A.6): the greedy next token of every prefix; log-probs NaN."""

    name = "label"
    uses_k = False


class LogprobsMode(Mode):
    """``logprobs`` without ``echo``: the actual token's log-prob read from each prefix's
    top-k, censored at the k-th log-prob where it is not among them."""

    name = "logprobs"

    @property
    def allows(self) -> list[Mode]:
        return [ECHO, self]  # log-probs, from echo where the server gives them


class EchoMode(Mode):
    """``echo`` + ``logprobs``: one request per text gives every position's log-prob and
    top-k; the server's tokens are aligned to local ones by character end offsets."""

    name = "logprobs-echo"
    echo = True

    @property
    def plain(self) -> Mode:
        return LOGPROBS

    def score(self, texts: list[str], local: LocalTokens, profile, ask: Ask) -> list[TokenScores]:
        per_text = [local.positions(t) for t in texts]
        prompts = [t[: len(prefs[-1]) + len(pieces[-1])] if pieces else t
                   for t, (_, prefs, pieces) in zip(texts, per_text)]
        answers = ask(self, prompts, 1, profile.k)
        out = [self._read(local, profile, prompt, pos, a["logprobs"])
               for prompt, pos, a in zip(prompts, per_text, answers)]
        # positions echo gives no log-prob (the first token in OpenAI's shape; the first two
        # where rows are shifted past them, as llama-cpp-python's) are asked as in the plain
        # logprobs mode: one prompt per such prefix (the empty one is shared by every text)
        holes = [(ts, n, i) for n, ts in enumerate(out) for i in np.flatnonzero(np.isnan(ts.logprobs))]
        if holes:
            answers = ask(LOGPROBS, [per_text[n][1][i] for _, n, i in holes], 1, profile.k)
            for (ts, n, i), a in zip(holes, answers):
                ids, prefs, pieces = per_text[n]
                local.fill(ts, i, ids, prefs[i], pieces[i], a, profile.k)
        return out

    def _read(self, local: LocalTokens, profile, prompt: str, pos: tuple, lp: dict) -> TokenScores:
        """One text's scores from its echo: each server token's log-prob summed into the
        local token that owns it (the log-likelihood is kept), read ``profile.shift`` rows
        on, or from its row's top-k where echo's values are another row's."""
        ids, prefs, pieces = pos
        n = len(prefs)
        ts = nan_scores(ids, n)
        sums, got, bad = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        owner = self.align(local.pieces(ids[1:]), [len(p) + len(x) for p, x in zip(prefs, pieces)],
                           lp["tokens"], lp["text_offset"], len(prompt))
        values, tops = shifted(lp["token_logprobs"], profile.shift), shifted(lp["top_logprobs"], profile.shift)
        for j, (tok, v, top) in enumerate(zip(lp["tokens"], values, tops)):
            i = owner[j]
            if i < 0:
                continue
            if not profile.echo_values:  # its values are another row's: read the token in its row
                v = local.lookup(top, tok, profile.k) if top else None
            elif v is not None:
                local.read["logprob_values"] += 1
            if v is None:
                bad[i] = True
                continue
            if top and not got[i]:  # the first server token in local token i predicts it
                ts.argmax[i] = local.to_local(ids[1:i + 1], prefs[i], max(top, key=top.get))
                ts.mu[i], ts.sigma2[i] = local.moments(top)
            sums[i] += v
            got[i] = True
        ts.logprobs[:] = np.where(bad, np.nan, np.where(got, sums, 0.0))
        return ts

    @staticmethod
    def align(pieces: list[str], local_ends: list[int], tokens: list[str], offs: list[int],
              prompt_len: int) -> list[int]:
        """Local position owning each echoed server token (-1: BOS, generated or outside).
        Same tokenizer (the echoed prompt ends with the local tokens' strings ``pieces``):
        one to one; otherwise each server token goes to the local token containing its
        last character (by character end offsets; ``local_ends``)."""
        n = len(local_ends)
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

    def describe(self, profile) -> dict:
        return super().describe(profile) | {"echo_shift": profile.shift, "echo_values": profile.echo_values}


class ChatMode(Mode):
    """Chat-only models: one prefix per request with a continuation instruction; log-probs
    from the answer's top logprobs when the server gives them, else NaN."""

    name = "chat"
    method = "chat"
    lists = False

    def probe_ks(self, k0: int | None) -> tuple:
        return (*_asked(k0), None)

    def params(self, model: str, max_tokens: int, k: int | None) -> dict:
        return {"model": model, "max_tokens": max_tokens, "temperature": 0, "top_logprobs": k,
                "instruction": CHAT_INSTRUCTION}

    def send(self, client, prompts: list[str], params: dict):
        extra = {"logprobs": True, "top_logprobs": params["top_logprobs"]} if params["top_logprobs"] else {}
        return client.chat.completions.with_raw_response.create(
            model=params["model"], max_tokens=params["max_tokens"], temperature=0,
            messages=[{"role": "system", "content": params["instruction"]},
                      {"role": "user", "content": prompts[0]}], **extra)

    def parse_choice(self, c: dict, i: int, params: dict, where: str) -> dict:
        """The chat answer in the completions shape (its top logprobs as ``top_logprobs``)."""
        msg = c.get("message")
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
            raise MalformedResponse(f"prompt {i}: choice has no message content")
        if not params.get("top_logprobs"):
            return {"text": msg["content"], "logprobs": None}
        content = (c.get("logprobs") or {}).get("content")
        if not isinstance(content, list) or not content:
            raise LogprobsIgnored(f"{where}, prompt {i}: chat logprobs requested but not returned")
        return {"text": msg["content"], "logprobs": {
            "tokens": [t["token"] for t in content], "token_logprobs": [t["logprob"] for t in content],
            "top_logprobs": [{x["token"]: x["logprob"] for x in t.get("top_logprobs", [])} for t in content],
            "text_offset": None}}

    def describe(self, profile) -> dict:
        return super().describe(profile) | {"list_prompts": False, "empty_prompt": ""}


class ChoiceMode(Mode):
    """One token after a token-id prompt, sampled ``n`` times with a ``logit_bias`` (a keyed audit's
    forced choice, ``trainspotter.keyed.queries.choose``): only the answers' texts are read."""

    name = "choice"
    lists = False
    uses_k = False

    def send(self, client, prompts: list, params: dict):
        return client.completions.with_raw_response.create(
            model=params["model"], prompt=prompts[0], max_tokens=1, temperature=params["temperature"],
            logit_bias=params["logit_bias"], n=params["n"], seed=params["seed"])

    def parse(self, body: dict, prompts: list, params: dict, where: str) -> list[dict]:
        texts = [c.get("text") for c in _choices(body, params["n"])]
        if not all(isinstance(t, str) for t in texts):
            raise MalformedResponse(f"{where}: a choice without text")
        return [{"texts": texts}]


LABEL, LOGPROBS, ECHO, CHAT = LabelMode(), LogprobsMode(), EchoMode(), ChatMode()
CHOICE = ChoiceMode()  # not a scoring mode: asked by name, never probed
BY_NAME: dict[str, Mode] = {m.name: m for m in (ECHO, LOGPROBS, LABEL, CHAT)}
MODES = ("auto", *BY_NAME)  # what a spec's mode= may ask for ("auto": the probe chooses)


def _asked(k0: int | None) -> tuple:
    return (k0,) if k0 else TOP_KS


def _choices(body: dict, n: int) -> list[dict]:
    """The n choices of an answer in prompt order (each index once)."""
    choices = body.get("choices")
    if not isinstance(choices, list) or len(choices) != n:
        raise MalformedResponse(f"expected {n} choices, got {len(choices) if isinstance(choices, list) else 'none'}")
    by_index: dict[int, dict] = {}
    for c in choices:
        i = c.get("index") if isinstance(c, dict) else None
        if not isinstance(i, int) or not 0 <= i < n or i in by_index:
            raise MalformedResponse(f"choice with a bad or repeated index {i!r}")
        by_index[i] = c
    return [by_index[i] for i in range(n)]


def shifted(values: list, shift: int) -> list:
    """values[j + shift] at j (None outside)."""
    n = len(values)
    return [values[j + shift] if 0 <= j + shift < n else None for j in range(n)]
