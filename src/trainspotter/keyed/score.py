"""A keyed release's units as outcomes under a key (``trainspotter.stats.exact_null`` tests them).

A unit's record holds what the model answered and nothing of the key: black-box lexical
``{"unit", "form"}`` (the form written, an index into the unit's forms), gray-box lexical
``{"unit", "h"}`` (the model's probabilities of the unit's forms in one context, normalised), black-box
window ``{"prev", "next"}``, gray-box window ``{"prev", "top": [[v, q], ...]}`` (the model's ``TOP``
most likely next tokens and their probabilities). ``outcomes(records, key)`` turns them into
(x, p): x whatever the key's choice makes of the answer, p its exact null mean given the units before:

- lexical: x = h[key's form] (h an indicator of the form written, black-box), p = mean(h) = 1/(m+1);
- window: x = 1[next green after prev]; p = γ' for the keyed scheme, the hypergeometric
  (G − g)/(V − n) for a fixed-size list (``stats.exact_null.hypergeometric_null``);
- gray window: x = the share of the top answers' probability q on green entries, p = γ' (the
  answers and their q are the model's, so each is green with probability γ' for a random key).

``outcomes_many`` does the same under M keys at once (the random-key null, ``stats.exact_null.key_rank``);
``weights`` gives each unit's weight w ∈ [0, 1] in the payoff (``stats.exact_null``), a function of the
unit, the release and the probe alone: lexical, w_u = min(1, n_u / n_95) with n_u the times the
release shows the unit (its originals' occurrences of it, each written in the key's form) and n_95
the 95th percentile of n over the release's units. A model learns the key's form of a unit from
those n_u sightings, so a unit shown once carries almost none of the effect but all of the noise
(measured, ``benchmarks/bench_keyed_effect.py``: the effect per unit grows with n_u). The forced
choice weighs every unit 1: its plan asks the units the release shows most first and no others
(``LexicalForms.asked_first``; at 13.5% the ~307 units 20,000 tokens pay for all have n_u ≥ 9),
so the weights would only shrink the bets on units chosen for their n_u (exploration trials
100–105, ``benchmarks/bench_keyed_contexts.py``: unweighted ahead on 10 of 10 plans). Windows: 1.
"""

from __future__ import annotations

import numpy as np

from trainspotter.keyed.units import LexicalForms, Seen
from trainspotter.stats.exact_null import hypergeometric_null
from trainspotter.keyed.watermark import KeyedGreenList, green_many

__all__ = ["SATURATION", "TOP", "GreenScoring", "LexicalScoring"]

TOP = 256  # gray-box windows: the model's most likely next tokens read (fixed in advance, key-blind)
SATURATION = 0.95  # lexical: a unit shown n times weighs min(1, n / this quantile of n) (module docstring)


class LexicalScoring:
    """Outcomes of a keyed lexical release's units (module docstring)."""

    kind = "lexical"

    def __init__(self, forms: LexicalForms):
        self.forms = forms
        n = [forms.count[u] for u in forms.forms]
        self.n_95 = max(1.0, float(np.quantile(n, SATURATION))) if n else 1.0

    def _h(self, records: list[dict]) -> list[np.ndarray]:
        out = []
        for r in records:
            if "h" in r:
                out.append(np.asarray(r["h"], dtype=float))
            else:
                h = np.zeros(len(self.forms.forms[r["unit"]]))
                h[r["form"]] = 1.0
                out.append(h)
        return out

    def outcomes(self, records: list[dict], key: bytes, seen: Seen | None = None) -> tuple[np.ndarray, np.ndarray]:
        hs = self._h(records)
        x = np.array([h[self.forms.key_form(key, r["unit"])] for r, h in zip(records, hs)])
        return x, np.array([h.mean() for h in hs])

    def weights(self, records: list[dict], forced_choice: bool = False) -> np.ndarray:
        if forced_choice:
            return np.ones(len(records))
        return np.array([min(1.0, self.forms.count[r["unit"]] / self.n_95) for r in records])

    def outcomes_many(self, records: list[dict], keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        hs = self._h(records)
        x = np.array([[h[self.forms.key_form(k, r["unit"])] for r, h in zip(records, hs)] for k in keys])
        return x, np.tile([h.mean() for h in hs], (len(keys), 1))


class GreenScoring:
    """Outcomes of a watermarked release's windows under a green-list scheme: ``green(key)`` gives
    the scheme's list for a key (``KeyedGreenList`` by default; a fixed-size one such as
    ``CudaRandpermGreenList`` makes later windows after one token hypergeometric)."""

    kind = "green"

    def __init__(self, vocab_size: int, gamma: float = 0.25, green=None):
        self.vocab_size, self.gamma = vocab_size, gamma
        self.green = green or (lambda key: KeyedGreenList(key, vocab_size, gamma))

    @staticmethod
    def weights(records: list[dict], forced_choice: bool = False) -> np.ndarray:
        return np.ones(len(records))

    def outcomes(self, records: list[dict], key: bytes, seen: Seen | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``seen``: where a fixed-size list's counts per previous token are kept (a ledger's);
        they are updated with these windows."""
        green = self.green(key)
        black = [r for r in records if "next" in r]
        if len(black) not in (0, len(records)):
            raise ValueError("black- and gray-box windows are tested apart")
        if black:
            prev, nxt = np.array([r["prev"] for r in records]), np.array([r["next"] for r in records])
            x = green.is_green(prev, nxt).astype(float)
            if getattr(green, "fixed_size", False):
                counts = seen.counts if seen is not None else {}
                return x, hypergeometric_null(prev, x, green.size, green.vocab_size, counts)
            return x, np.full(len(x), green.gamma)
        return self._gray(records, lambda prev, nxt: green.is_green(prev, nxt)[None], green.gamma)

    def outcomes_many(self, records: list[dict], keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """Under M keys: of the keyed scheme at once (one HMAC per key and previous token), of
        another scheme key by key."""
        if not isinstance(self.green(bytes(32)), KeyedGreenList):
            xs, ps = zip(*(self.outcomes(records, key, Seen()) for key in keys))
            return np.stack(xs), np.stack(ps)
        if records and "next" in records[0]:
            prev, nxt = np.array([r["prev"] for r in records]), np.array([r["next"] for r in records])
            x = green_many(keys, prev, nxt, self.gamma).astype(float)
            return x, np.full(x.shape, KeyedGreenList(bytes(8), self.vocab_size, self.gamma).gamma)
        gamma = KeyedGreenList(bytes(8), self.vocab_size, self.gamma).gamma
        return self._gray(records, lambda prev, nxt: green_many(keys, prev, nxt, self.gamma), gamma)

    @staticmethod
    def _gray(records: list[dict], colour, gamma: float) -> tuple[np.ndarray, np.ndarray]:
        """x = Σ q over the green entries of each record's top answers / Σ q; p = γ'."""
        sizes = [len(r["top"]) for r in records]
        prev = np.repeat([r["prev"] for r in records], sizes)
        flat = np.array([v for r in records for v, _ in r["top"]], dtype=np.int64)
        q = np.array([w for r in records for _, w in r["top"]], dtype=float)
        green = colour(prev, flat)  # (M, Σ sizes)
        ends = np.cumsum(sizes)[:-1]
        mass = np.array([s.sum() for s in np.split(q, ends)])
        x = np.stack([np.array([s.sum() for s in np.split(row * q, ends)]) for row in green]) / mass
        x = np.clip(x, 0.0, 1.0)
        return (x[0], np.full(len(mass), gamma)) if x.shape[0] == 1 else (x, np.full(x.shape, gamma))
