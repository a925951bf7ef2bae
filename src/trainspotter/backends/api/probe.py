"""What an OpenAI-compatible server supports, found once per endpoint (the answer is
cached) and returned as a ``ServerProfile``; the probe changes nothing but the query
cache (the empty prefix's answer) and the Budget's counts of what it sent.

Real servers differ: some reject a list of prompts in one request (llama-cpp-python
answers HTTP 500 to two), some ignore ``echo`` or return its log-probs one position off,
some ignore ``logprobs``, some serve only /v1/chat/completions. The probe tries the
richest mode first and keeps what the server really does: one prompt per request where
lists are refused (three failed lists while one prompt works, so a transient fault is not
taken for a refusal; afterwards no list is sent, so the refusal is never retried as a
fault), the echo offset measured against a plain ``logprobs`` request for the same
position (``shift``), echo's rows without its token log-probs where those belong to
another row (llama-cpp-python pairs the row predicting token j+1 with its log-prob of
token j: ``echo_values`` False), what to send for the empty prefix ("" or, where
refused, the BOS text: ``empty``), the next mode when a feature is refused or silently
missing, and one ``Incompatible`` error naming every refusal when no mode works.
Decisions read exception types and HTTP statuses (errors.py), never message text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from trainspotter.backends.api.errors import (EchoIgnored, Incompatible, ListRefused, LogprobsIgnored,
                                              Unreachable, Unsupported)
from trainspotter.backends.api.modes import BY_NAME, LOGPROBS, Mode
from trainspotter.backends.api.positions import first_top
from trainspotter.backends.api.transport import Transport
from trainspotter.errors import APIRequestError

log = logging.getLogger(__name__)
PROBE_PROMPTS = ["The cat sat on the", "Once upon a time"]
PROBE_VERSION = 3  # bump when the probe learns something new: older cached answers are re-probed
LIST_TRIES = 3  # failed lists (while one prompt works) that mean "this server takes no lists"
ECHO_TOLERANCE = 0.1  # max |Δ log p| between echo's row and a plain request's for one position


@dataclass(frozen=True)
class ServerProfile:
    """How to query a server: the mode that works and what it supports."""

    mode: str  # a name in modes.BY_NAME
    lists: bool = True  # several prompts per request
    k: int | None = None  # top log-probs asked for (None: none)
    shift: int = 0  # echo's log-prob of prompt token j is at row j + shift
    empty: str | None = ""  # sent for the empty prefix: "", the BOS/EOS text, None: no form answered
    echo_values: bool = True  # echo's token log-probs are the prompt's (else read from its top-k rows)

    @classmethod
    def from_record(cls, d: dict) -> ServerProfile:
        """From the query cache's probe row (older rows lack the later fields)."""
        return cls(d["mode"], d["list"], d["k"], d.get("shift", 0), d.get("empty", ""), d.get("echo_values", True))

    def record(self) -> dict:
        return {"mode": self.mode, "list": self.lists, "k": self.k, "shift": self.shift, "empty": self.empty,
                "echo_values": self.echo_values}


def candidates(want: str) -> list[Mode]:
    """The modes a spec's ``mode=`` allows, richest first."""
    return list(BY_NAME.values()) if want == "auto" else BY_NAME[want].allows


class Probe:
    """One probe of one server. ``store(mode, params, prompt, answer)`` keeps an answer in
    the query cache (the empty prefix's, asked as score() asks it)."""

    def __init__(self, transport: Transport, tokenizer, store: Callable[[Mode, dict, str, dict], None]):
        self.transport, self.tokenizer, self.store = transport, tokenizer, store
        self.config = transport.config
        self.lists: bool | None = None  # whether lists of prompts work (None: not known yet)

    def run(self, want: str) -> ServerProfile:
        """Try the modes ``want`` allows, richest first; the first that works is kept.
        Refusals (4xx, a list that fails while one prompt works, log-probs or echo missing
        from a 200 answer) move on to the next mode at once; transient faults are retried as
        usual, and a server that answers nothing at all raises ``APIRequestError``."""
        reasons, skip = [], set()
        for mode in candidates(want):
            for k in mode.probe_ks(self.config.top_logprobs):
                if mode.method in skip or (mode.method, k is not None) in skip or (mode.echo and "echo" in skip):
                    continue
                try:
                    return self.trial(mode, k)
                except Unsupported as err:
                    reasons.append(f"{mode.name}{'' if k is None else f' (top-{k})'}: {err}")
                    if err.endpoint_missing:
                        skip.add(mode.method)  # no other mode of it will work
                    elif isinstance(err, LogprobsIgnored):
                        skip.add((mode.method, True))  # no k will bring them
                    elif isinstance(err, EchoIgnored):
                        skip.add("echo")
        raise Incompatible(f"server {self.config.base_url} (model {self.config.model!r}) supports none of "
                           f"the modes tried for mode={want}: " + "; ".join(reasons))

    def trial(self, mode: Mode, k: int | None) -> ServerProfile:
        """``mode`` with top-k ``k`` on the probe prompts; learns whether lists work.
        Raises Unsupported when the mode does not work."""
        params = mode.params(self.config.model, 1, k)
        lists, answers, listed = self.lists, None, None
        if mode.lists and lists is not False:
            try:
                answers = self.transport.request(mode, PROBE_PROMPTS, params, retries=0)
                lists = True
            except ListRefused as err:  # a 4xx: the endpoint, the parameters or the list?
                if err.endpoint_missing:
                    raise
                listed = err
            except (Unsupported, Unreachable):
                raise  # answered without what was asked (the mode is refused), or no server there
            except APIRequestError as err:  # e.g. HTTP 500 (llama-cpp-python on a list)
                listed = err
        if answers is None:  # one prompt, usual retries (a feature answered by 500s is refused)
            answers = self.transport.request(mode, PROBE_PROMPTS[:1], params, refuse_after=LIST_TRIES)
            if mode.lists and lists is None:  # one works: was the list refused?
                lists = self._lists_work(mode, params, listed)
        self.lists = lists
        shift, echo_values = self._echo_shape(answers[0], PROBE_PROMPTS[0], k) if mode.echo else (0, True)
        empty = ""  # chat sends "" as it is
        if mode.method == "completions":  # asked as score() asks a single prefix
            empty = self._empty_prompt(mode.plain, mode.plain.params(self.config.model, 1, k))
        return ServerProfile(mode.name, bool(lists) and mode.lists, k, shift, empty, echo_values)

    def _lists_work(self, mode: Mode, params: dict, first: APIRequestError | None) -> bool:
        """After a failed list while one prompt works: LIST_TRIES - 1 more lists, with the
        usual backoff. Any answer: it was a transient fault (the failures count as retries);
        all fail: lists are refused (they count as rejected) and none is sent again."""
        for attempt in range(1, LIST_TRIES):
            self.transport.pause(attempt - 1)
            try:
                self.transport.request(mode, PROBE_PROMPTS, params, retries=0)
            except APIRequestError as err:
                first = err
                continue
            self.transport.budget.faults_after_all(attempt)
            return True
        log.warning("%s refuses a list of prompts (%s): one prompt per request from now on",
                    self.config.base_url, first)
        return False

    def _empty_prompt(self, mode: Mode, params: dict) -> str | None:
        """The prompt sent for the empty prefix (position 1 of every text): "" where the server
        answers it; else the BOS (or EOS) token's text, which servers that parse special tokens
        read as that token, the context the local tokenizer gives position 1 (llama-cpp-python
        answers "" with HTTP 500 for models that add no BOS, as SmolLM2's gguf); None where no
        form is answered (position 1 stays unknown). The answer is cached as score() asks it."""
        tok = self.tokenizer
        for prompt in dict.fromkeys(p for p in ("", tok.bos_token, tok.eos_token) if p is not None):
            try:
                answers = self.transport.request(mode, [prompt], params, refuse_after=LIST_TRIES)
            except Unsupported:
                continue
            if prompt:
                log.warning("%s answers no empty prompt: position 1 is asked with %r", self.config.base_url, prompt)
            self.store(mode, params, prompt, answers[0])
            return prompt
        log.warning("%s answers no empty prompt and no BOS/EOS text: position 1 is unknown", self.config.base_url)
        return None

    def _echo_shape(self, answer: dict, prompt: str, k: int) -> tuple[int, bool]:
        """(shift, echo_values). Where echo puts the log-probs of prompt token j: at j (shift
        0, the OpenAI shape), or one off. Measured on the prompt's last token: the plain
        ``logprobs`` answer for the text before it is the distribution that predicts it; the
        echo row whose top-k matches it (same top token, log-probs within ECHO_TOLERANCE)
        tells the shift. Echo without prompt log-probs (EchoIgnored), or matching no row:
        Unsupported (the next mode is tried)."""
        lp = answer["logprobs"]
        offs, tops = lp["text_offset"], lp["top_logprobs"]
        inside = [j for j, o in enumerate(offs) if 0 < o < len(prompt)]
        if len(lp["tokens"]) < 3 or not inside or all(v is None for v in lp["token_logprobs"][:inside[-1] + 1]):
            raise EchoIgnored("echo gives no log-probs for the prompt (echo ignored)")
        j = inside[-1]
        try:
            plain = self.transport.request(LOGPROBS, [prompt[:offs[j]]], LOGPROBS.params(self.config.model, 1, k))
        except Unsupported:
            return 0, True  # a plain request does not give log-probs: echo's own shape is taken as is
        want = first_top(plain[0])
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
        # rows right, values not: llama-cpp-python 0.3.36 puts at token j the row predicting
        # token j+1 and that row's log-prob of token j (the token fed, not the one predicted).
        # Each token's log-prob is then read in its own row, censored where it is not in the
        # top-k, as in the plain logprobs mode, but one request per text, not per position.
        echo_values = not (token in want and (value is None or abs(value - want[token]) > ECHO_TOLERANCE))
        if not echo_values:
            log.warning("%s: echo's token log-probs are not the prompt's; read from its top-k rows",
                        self.config.base_url)
        if best[1]:
            log.warning("%s: echo log-probs are one position off (shift %+d); realigned",
                        self.config.base_url, best[1])
        return best[1], echo_values


def _top_gap(want: dict | None, row: dict | None) -> float | None:
    """Largest |Δ log p| over the tokens both top-k dicts name; None when their top tokens differ."""
    if not want or not row or max(want, key=want.get) != max(row, key=row.get):
        return None
    return max(abs(want[t] - row[t]) for t in want.keys() & row.keys())
