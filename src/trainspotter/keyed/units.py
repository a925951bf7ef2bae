"""The scoring units of a keyed release and their outcomes (``trainspotter.stats.exact_null``: the test).

Black-box, a model's continuations of prompts that are not the release:

- generative key: the continuation re-tokenised with the watermark's tokenizer; every distinct
  window (previous token, next token) once ever (``Seen``, kept across batches and ledger runs),
  windows present in the prompt skipped (Sander et al., NeurIPS 2024: otherwise a clean model
  copying a watermarked prompt looks radioactive) and, with ``strict`` (for a prompt that may carry
  the key, such as the release's own text), every window whose previous token occurs as one in the
  prompt (the prompt then shows nothing of that token's green list);
- lexical key: every rewritable unit u of the release (``LexicalForms``: a word with WordNet
  alternatives, or a phrase of the table, found in the originals) once ever, scored at the first
  occurrence of any of its forms (u, a_1, ..., a_m) in a continuation whose prompt shows none of
  them: x = 1[the form written is the key's], null probability 1/(m+1) (the key picks each form
  with that probability, independently per unit, and the model's form is independent of the key
  under H0 because nothing it read showed the key's choice for u).

Black-box forced choice (``keyed.queries.choose``): each unit once ever, in its first context in
each of the first few neutral passages that show it, the model's draws restricted to the unit's
forms; x = the share of all its draws on the key's form, null mean 1/(m+1) as for the gray-box
shares below.

Gray-box, on neutral passages: the key's form against its others in the same context (x: the
model's probability of the key's form, normalised over the forms; null mean 1/(m+1)), or the
model's next-token mass on the green list after each distinct previous token once ever (null mean
γ × the mass).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from trainspotter.rewriters.lexical import WORD, KeyedLexicalRewriter, phrase_context, phrase_text

__all__ = ["LexicalForms", "Seen", "lexical_units", "window_units"]

_EDGE_L, _EDGE_R = r"(?<![-'’\w])", r"(?![-'’\w])"


@dataclass
class Seen:
    """Units already scored (counted once ever: across batches and ledger runs) and, for a
    fixed-size green list, each previous token's [windows, green] so far (the hypergeometric null)."""

    units: set[str] = field(default_factory=set)
    counts: dict[int, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"units": sorted(self.units), "counts": {str(a): c for a, c in sorted(self.counts.items())}}

    @classmethod
    def from_dict(cls, data: dict | None) -> Seen:
        data = data or {}
        return cls(set(data.get("units", ())), {int(a): list(c) for a, c in data.get("counts", {}).items()})


def window_units(prompt_ids: list[int], continuation_ids: list[int], seen: Seen, strict: bool = False,
                 also_skip: frozenset[int] = frozenset()) -> list[tuple[int, int]]:
    """The continuation's windows to score, in order (module docstring); adds them to ``seen``.
    ``also_skip``: previous tokens never scored after a prompt that may carry the key (the
    watermark's generation prompt ended with them, so the release's first tokens depend on their lists)."""
    in_prompt = set(zip(prompt_ids, prompt_ids[1:]))
    prompt_prevs = set(prompt_ids[:-1]) | also_skip if strict else set()
    out = []
    for a, b in zip(continuation_ids, continuation_ids[1:]):
        name = f"{a},{b}"
        if name in seen.units or (a, b) in in_prompt or a in prompt_prevs:
            continue
        seen.units.add(name)
        out.append((a, b))
    return out


class LexicalForms:
    """The rewritable units of a keyed lexical release, read from its originals (committed before
    the key existed, so the set of units is independent of the key): each unit's forms (the unit
    first, then its alternatives, as ``KeyedLexicalRewriter`` chooses among them) and where each
    form can be found in a text."""

    def __init__(self, rewriter: KeyedLexicalRewriter, originals: list[str]):
        if rewriter.rate is not None:
            raise ValueError("a keyed release picks uniformly among a unit's forms (rate=None)")
        self.rewriter = rewriter
        self.forms: dict[str, tuple[str, ...]] = {}
        for text in originals:
            for pattern, alts in rewriter.table.items():
                if pattern not in self.forms and re.search(_EDGE_L + pattern + _EDGE_R, text):
                    self.forms[pattern] = (phrase_text(pattern), *alts)
            for m in WORD.finditer(text):
                w = m.group()
                if w not in self.forms and w.islower() and (alts := rewriter.alternatives(w)):
                    self.forms[w] = (w, *alts)
        self._words: dict[str, list[str]] = {}  # a one-word form -> the units it is a form of
        self._phrases: dict[str, tuple[re.Pattern, list[str]]] = {}  # any other form, with its context
        for unit, forms in self.forms.items():
            behind, look = phrase_context(unit) if unit in rewriter.table else ("", "")
            for form in forms:
                if not behind + look and re.fullmatch(r"[^\W\d_]+", form):
                    self._words.setdefault(form, []).append(unit)
                else:
                    key = behind + form + look
                    pattern = self._phrases.get(key, (re.compile(_EDGE_L + behind + re.escape(form) + look + _EDGE_R),
                                                      []))
                    pattern[1].append(unit)
                    self._phrases[key] = pattern
        # n_u: how often the release shows each unit (the unit itself in the originals, which the
        # release writes in the key's form), for ``keyed.score``'s weights; key-blind like the units
        self.count = Counter(unit for text in originals for _, unit, form in self.occurrences(text)
                             if form == self.forms[unit][0])

    def key_form(self, key: bytes, unit: str) -> int:
        """The index of the key's form of ``unit`` in ``forms[unit]``."""
        forms = self.forms[unit]
        return self.rewriter.choice(key, unit, forms[1:])

    def occurrences(self, text: str) -> list[tuple[int, str, str]]:
        """(start, unit, form) for every occurrence of a form of a unit in ``text``, in order."""
        found = [(m.start(), unit, m.group()) for m in WORD.finditer(text) for unit in self._words.get(m.group(), ())]
        for pattern, units in self._phrases.values():
            found += [(m.start(), unit, m.group()) for m in pattern.finditer(text) for unit in units]
        return sorted(found, key=lambda r: r[0])

    def contexts(self, text: str, seen: Seen) -> list[tuple[str, str]]:
        """Gray-box: (unit, the text before it) at the first occurrence in ``text`` of each unit not
        in ``seen`` (none of its forms earlier in that input); adds them to ``seen``."""
        out = []
        for start, unit, _ in self.occurrences(text):
            if unit not in seen.units:
                seen.units.add(unit)
                out.append((unit, text[:start]))
        return out

    def asked_first(self, texts: list[str], seen: Seen, contexts: int = 1) -> list[tuple[str, list[tuple[int, str]]]]:
        """Black-box forced choice: (unit, [(text index, context), ...]) for each unit not in ``seen``,
        its first context in each of the first ``contexts`` texts that show it (a model's preference
        varies from context to context more than its draws in one do: measured,
        ``benchmarks/bench_keyed_contexts.py``), the units the release shows most (n_u) first, so that
        the bets on the units that carry most of the effect come first (an order of the units and the
        committed originals, never of the key); ``seen`` is left as it is (a unit counts once it is asked)."""
        asked: dict[str, list[tuple[int, str]]] = {}
        for i, text in enumerate(texts):
            for unit, context in self.contexts(text, Seen()):
                if unit not in seen.units and len(where := asked.setdefault(unit, [])) < contexts:
                    where.append((i, context))
        return sorted(asked.items(), key=lambda r: -self.count[r[0]])

    def choice_record(self, unit: str, draws: list[int]) -> dict | None:
        """A forced choice's unit record: the share of the draws that fell on each form; None where
        an API answered none of the forms (no draw: the unit is asked, and counted, but not scored,
        a rule of the answers alone, never of the key)."""
        if not draws:
            return None
        return {"unit": unit, "h": (np.bincount(draws, minlength=len(self.forms[unit])) / len(draws)).tolist()}


def lexical_units(forms: LexicalForms, prompt: str, continuation: str, seen: Seen) -> list[tuple[str, int]]:
    """(unit, index of the form written) for each unit first written in ``continuation`` and
    shown in no form by ``prompt`` (module docstring); adds them to ``seen``."""
    shown = {unit for _, unit, _ in forms.occurrences(prompt)}
    out = []
    for _, unit, form in forms.occurrences(continuation):
        if unit in shown or unit in seen.units:
            continue
        seen.units.add(unit)
        out.append((unit, forms.forms[unit].index(form)))
    return out


def lexical_outcomes(forms: LexicalForms, key: bytes, units: list[tuple[str, int]]) -> tuple[np.ndarray, np.ndarray]:
    """x (whether the written form is the key's) and p (1/(m+1)) of black-box lexical units."""
    x = np.array([float(forms.key_form(key, u) == j) for u, j in units])
    p = np.array([1.0 / len(forms.forms[u]) for u, _ in units])
    return x, p
