"""Query budget for API backends: limits on requests, tokens and money, and the count of
every HTTP attempt.

Black-box audits pay per query (BADI App. E), so every request is checked against the
budget *before* it is sent; ``BudgetExhausted`` stops the audit with nothing overspent.
Token counts before a request are estimates (local tokenizer for the prompt, ``max_tokens``
per prompt for the answer); after the request the server's ``usage`` replaces them.
Failed attempts are counted too, as ``retries`` (re-sent: a fault) or ``rejected`` (the
server refused the request, or it was given up on); what a failure was is sometimes
learnt only later, and then ``refusal`` / ``faults_after_all`` recount it here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trainspotter.errors import BudgetExhausted


@dataclass
class Budget:
    max_requests: float = math.inf
    max_tokens: float = math.inf  # prompt + completion tokens
    max_cost: float = math.inf  # in the currency of the prices below
    price_prompt_1k: float = 0.0  # price per 1,000 prompt tokens
    price_completion_1k: float = 0.0  # price per 1,000 completion tokens
    _used: dict = field(init=False, repr=False, default_factory=lambda: {
        "requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0,
        "cache_hits": 0, "retries": 0, "rejected": 0})

    def cost_of(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.price_prompt_1k + completion_tokens * self.price_completion_1k) / 1000

    def check(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Raise BudgetExhausted if one more request of about this size would exceed a limit."""
        u = self._used
        tokens = u["prompt_tokens"] + u["completion_tokens"] + prompt_tokens + completion_tokens
        cost = u["cost"] + self.cost_of(prompt_tokens, completion_tokens)
        for name, value, limit in (("requests", u["requests"] + 1, self.max_requests),
                                   ("tokens", tokens, self.max_tokens), ("cost", cost, self.max_cost)):
            if value > limit:
                raise BudgetExhausted(
                    f"query budget: the next request would bring {name} to {value:g} > limit {limit:g} "
                    f"(used so far: {u['requests']} requests, "
                    f"{u['prompt_tokens'] + u['completion_tokens']} tokens, cost {u['cost']:.4g})")

    def charge(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Record one answered request (failed attempts count as retries, not requests)."""
        self._used["requests"] += 1
        self._used["prompt_tokens"] += int(prompt_tokens)
        self._used["completion_tokens"] += int(completion_tokens)
        self._used["cost"] += self.cost_of(prompt_tokens, completion_tokens)

    def cache_hits(self, n: int) -> None:
        """``n`` prompts answered from the query cache (nothing sent, nothing billed)."""
        self._used["cache_hits"] += n

    def retry(self) -> None:
        """One failed attempt that is sent again (a fault)."""
        self._used["retries"] += 1

    def reject(self) -> None:
        """One failed attempt given up on (no retry left, or none wanted)."""
        self._used["rejected"] += 1

    def refusal(self, row: int) -> None:
        """The attempt that just failed ends a row of ``row`` failures that were one refusal
        (a server that answers a feature it lacks with HTTP 500 every time): the ``row - 1``
        counted as retries before it were rejected too."""
        self._used["retries"] -= row - 1
        self._used["rejected"] += row

    def faults_after_all(self, n: int) -> None:
        """The last ``n`` attempts counted as rejected were faults after all (a later try of
        the same request was answered): they count as retries."""
        moved = min(n, self._used["rejected"])
        self._used["rejected"] -= moved
        self._used["retries"] += moved

    def usage(self) -> dict:
        """The counts, with ``total_tokens`` and ``http_requests`` (every attempt sent)."""
        u = dict(self._used)
        u["total_tokens"] = u["prompt_tokens"] + u["completion_tokens"]
        u["http_requests"] = u["requests"] + u["retries"] + u["rejected"]
        return u
