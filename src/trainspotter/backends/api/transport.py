"""One request to an OpenAI-compatible server: checked against the Budget before it is
sent, retried a bounded number of times with exponential backoff and jitter on faults
(429, 5xx, timeouts, dropped connections, malformed bodies; the openai client's own
retries are off so every retry is counted), its answer validated by the mode that asked.
A server never reached (connection refused or an unknown host on the first request) fails
at once with ``Unreachable``: a retry cannot fix a wrong URL or a server that is not
running; once the server has answered, a refused connection is retried (a restart)."""

from __future__ import annotations

import json
import os
import random
import time

from trainspotter.backends.api.config import APIConfig
from trainspotter.backends.api.errors import (ListRefused, MalformedResponse, Unsupported, connect_failure,
                                              describe_error, transient, unreachable)
from trainspotter.backends.api.modes import Mode
from trainspotter.backends.api.positions import LocalTokens
from trainspotter.backends.budget import Budget
from trainspotter.errors import APIRequestError


class Transport:
    """The HTTP client, its retry policy and the count of every attempt (``budget``)."""

    def __init__(self, config: APIConfig, budget: Budget, local: LocalTokens):
        import openai

        self.config, self.budget, self.local = config, budget, local
        self.client = openai.OpenAI(api_key=os.environ.get(config.key_env) or "sk-no-key",
                                    base_url=config.base_url, max_retries=0, timeout=config.timeout)
        self._rng = random.Random(config.seed)
        self.reached = False  # whether the server has answered any request yet

    def pause(self, attempt: int) -> None:
        """Backoff before retry ``attempt + 1``: backoff * 2^attempt * (1 + U[0,1))."""
        time.sleep(self.config.backoff * 2 ** attempt * (1 + self._rng.random()))

    def request(self, mode: Mode, prompts: list[str], params: dict, first: int = 0,
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
        est_prompt, est_completion = self.local.prompt_tokens(prompts), params["max_tokens"] * len(prompts)
        self.budget.check(est_prompt, est_completion)
        where = (f"{mode.method} request (model {self.config.model!r}, prompts {first}..{first + len(prompts) - 1}"
                 f" of this call)")
        for attempt in range(retries + 1):
            try:
                body = self._send(mode, prompts, params)
                answers = mode.parse(body, prompts, params, where)
                if isinstance(body.get("system_fingerprint"), str):  # the server's build, kept with each answer
                    answers = [a | {"system_fingerprint": body["system_fingerprint"]} for a in answers]
                break
            except Unsupported:  # answered (and billed) without what was asked
                self._charge(body, est_prompt, est_completion)
                raise
            except (openai.APIError, MalformedResponse) as err:
                if not self.reached and (why := connect_failure(err)):
                    self.budget.reject()
                    raise unreachable(self.config.base_url, self.config.model, why) from None
                self.reached = self.reached or isinstance(err, openai.APIStatusError)  # it answered
                errors_500 = errors_500 + 1 if getattr(err, "status_code", None) == 500 else 0
                if not transient(err) or (refuse_after and errors_500 >= refuse_after):
                    self.budget.refusal(max(1, errors_500))  # the earlier 500s of the row were refusals too
                    kind = ListRefused if len(prompts) > 1 else Unsupported
                    raise kind(f"{where}: the server rejected it{' every time' if errors_500 > 1 else ''}: "
                               f"{describe_error(err)}", getattr(err, "status_code", None)) from None
                if attempt == retries:
                    self.budget.reject()
                    kind = MalformedResponse if isinstance(err, MalformedResponse) else APIRequestError
                    raise kind(f"{where}: failed after {attempt + 1} attempts; last: {describe_error(err)}") from None
                self.budget.retry()
                self.pause(attempt)
        self._charge(body, est_prompt, est_completion)
        return answers

    def _charge(self, body: dict, est_prompt: int, est_completion: int) -> None:
        """One answered request: the server's token counts, else the estimates."""
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        self.budget.charge(usage.get("prompt_tokens", est_prompt), usage.get("completion_tokens", est_completion))

    def _send(self, mode: Mode, prompts: list[str], params: dict) -> dict:
        raw = mode.send(self.client, prompts, params)
        self.reached = True
        try:
            body = json.loads(raw.text)
        except ValueError:
            raise MalformedResponse("the body is not JSON") from None
        if not isinstance(body, dict):
            raise MalformedResponse("the body is not a JSON object")
        return body
