"""Positions of the LOCAL tokenizer and the mapping of a server's answer strings to them
(the scheme is described in backends/openai_compat.py's docstring)."""

from __future__ import annotations

import math

import numpy as np

from trainspotter.backends.base import TokenScores


class LocalTokens:
    """The local tokenizer that defines positions: text [BOS] x_1..x_n, position i asked
    with the prefix text ``text[:end(x_{i-1})]``; answers mapped back to local ids."""

    def __init__(self, tokenizer, max_length: int = 512):
        self.tokenizer = tokenizer
        self.max_length = max_length
        # log-probs read: the server's value, or (the token not in its top-k) the k-th one, a bound
        self.read = {"logprob_values": 0, "logprob_bounds": 0}

    def lookup(self, top: dict[str, float], piece: str, k: int | None) -> float:
        """``lookup``, counted: a value where ``piece`` is in the top-k, else a bound."""
        self.read["logprob_values" if piece in top else "logprob_bounds"] += 1
        return lookup(top, piece, k)

    def positions(self, text: str) -> tuple[list[int], list[str], list[str]]:
        """[BOS]+ids, the prefix text of every position, and each token's text in context."""
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = enc["input_ids"][: self.max_length - 1]
        ends = [e for _, e in enc["offset_mapping"][: len(ids)]]
        starts = [0] + ends[:-1]
        bos = self.tokenizer.bos_token_id
        return (([bos] if bos is not None else []) + ids, [text[:s] for s in starts],
                [text[s:e] for s, e in zip(starts, ends)])

    def ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def pieces(self, ids: list[int]) -> list[str]:
        """Each token's own text."""
        return [self.tokenizer.decode([x]) for x in ids]

    def prompt_tokens(self, prompts: list[str]) -> int:
        """Estimate of the prompt tokens a request bills, before the server says."""
        return sum((len(p) if isinstance(p, list) else len(self.tokenizer(p)["input_ids"])) + 1 for p in prompts)

    def to_local(self, prefix_ids: list[int], prefix: str, answer: str) -> int:
        """Local id of an answer string: the first local token after the prefix's in the
        re-encoding of prefix + answer (else the answer's own first token); "" is EOS
        (-1 if none), a leading U+FFFD (part of a character) is -1 (unknown)."""
        if not answer:
            eos = self.tokenizer.eos_token_id
            return eos if eos is not None else -1
        if answer.startswith("\ufffd"):
            return -1  # a fragment of a multi-byte character: no text says which bytes
        full = self.ids(prefix + answer)
        n = len(prefix_ids)
        if full[:n] == list(prefix_ids) and len(full) > n:
            return full[n]
        return self.ids(answer)[0]

    def continuation(self, prefix: str, answer: str) -> list[int]:
        """Local ids of a generated answer (re-encoded after its prefix where that splits)."""
        p, full = self.ids(prefix), self.ids(prefix + answer)
        return full[len(p):] if full[:len(p)] == p else self.ids(answer)

    def moments(self, top: dict[str, float]) -> tuple[float, float]:
        """Mean and variance of log p(z) under z ~ p from the top-k, the remaining mass spread
        evenly over the other V - k local tokens (an estimate; exact when k = V)."""
        lp = np.array(list(top.values()), dtype=np.float64)
        p = np.exp(lp)
        rest, others = max(0.0, 1.0 - p.sum()), max(1, len(self.tokenizer) - len(lp))
        log_q = math.log(rest / others) if rest > 0 else 0.0
        mu = float((p * lp).sum() + rest * log_q)
        return mu, max(0.0, float((p * lp ** 2).sum() + rest * log_q ** 2) - mu ** 2)

    def fill(self, ts: TokenScores, i: int, ids: list[int], prefix: str, piece: str, answer: dict | None,
             k: int | None) -> None:
        """Position i from the answer to its prefix (None: not askable, left unknown)."""
        if answer is None:
            return
        ts.argmax[i] = self.to_local(ids[1:i + 1], prefix, answer["text"])
        top = first_top(answer)
        if top:
            ts.logprobs[i] = self.lookup(top, piece, k)
            ts.mu[i], ts.sigma2[i] = self.moments(top)


def nan_scores(ids: list[int], n: int) -> TokenScores:
    """Scores of n positions, all unknown until an answer fills them."""
    return TokenScores(token_ids=np.asarray(ids[1:n + 1], dtype=np.int64), logprobs=np.full(n, np.nan),
                       argmax=np.full(n, -1, dtype=np.int64), mu=np.full(n, np.nan),
                       sigma2=np.full(n, np.nan))


def lookup(top: dict[str, float], piece: str, k: int | None) -> float:
    """log p of ``piece`` from a top-k dict; where it is absent, the k-th largest log-prob, an
    upper bound (not the smallest entry: llama-cpp-python adds the fed token's own entry)."""
    if piece in top:
        return top[piece]
    values = sorted(top.values(), reverse=True)
    return values[min(k or len(values), len(values)) - 1]


def bound_note(usage: dict | None) -> str | None:
    """How many of the log-probs an API gave are upper bounds (the token not among the top-k
    the server returns, so the k-th log-prob stands in for it: docs/guide/reliability.md), as
    one sentence; None where every one was a value or no log-prob was read."""
    usage = usage or {}
    bounds, values = usage.get("logprob_bounds", 0), usage.get("logprob_values", 0)
    if not bounds:
        return None
    share = bounds / (bounds + values)
    return (f"{bounds:g} of {bounds + values:g} token log-probs read from the API ({share:.0%}) are upper bounds, "
            f"not values: the token was not in the server's top-k, so the k-th log-prob stands in for it "
            f"and those gray features overstate how likely the text is.")


def first_top(answer: dict) -> dict | None:
    """The top-k log-probs of the first answered position (None without log-probs)."""
    lp = answer.get("logprobs")
    if not lp or not lp.get("top_logprobs"):
        return None
    return lp["top_logprobs"][0] or None
