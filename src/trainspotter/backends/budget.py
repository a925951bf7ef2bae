"""Query budget for API backends: limits on requests, tokens and money.

Black-box audits pay per query (BADI App. E), so every request is checked against the
budget *before* it is sent; ``BudgetExhausted`` stops the audit with nothing overspent.
Token counts before a request are estimates (local tokenizer for the prompt, ``max_tokens``
per prompt for the answer); after the request the server's ``usage`` replaces them.
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
    used: dict = field(default_factory=lambda: {
        "requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0,
        "cache_hits": 0, "retries": 0, "rejected": 0})

    def cost_of(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.price_prompt_1k + completion_tokens * self.price_completion_1k) / 1000

    def check(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Raise BudgetExhausted if one more request of about this size would exceed a limit."""
        u = self.used
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
        self.used["requests"] += 1
        self.used["prompt_tokens"] += int(prompt_tokens)
        self.used["completion_tokens"] += int(completion_tokens)
        self.used["cost"] += self.cost_of(prompt_tokens, completion_tokens)
