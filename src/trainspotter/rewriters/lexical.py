"""The keyed lexical rewriter (``trainspotter.twins``): a passage rewritten under a variant's secret key.

It carries STAMP's watermark idea (each variant its own secret key, so a
model trained on the public variant learns that key's preferences; Sander et al., NeurIPS 2024,
"Watermarking makes language models radioactive") without a generative model: every rewritable
unit (a word with WordNet alternatives, or a phrase of a small fixed table) is rewritten by
HMAC-SHA256(key, unit), the same wherever the unit occurs in the dataset.

Version 2 (issue 35) changes several times more of the text than version 1 (which swapped ~7% of
the words): a twins audit's paired signal lives where the two versions differ.

- inflected words too: a plural noun or a verb in -s, -ed or -ing is reduced to its base
  (WordNet's morphy and exception lists), rewritten, and the alternative inflected the same way
  by regular English rules (alternatives that are irregular, or whose regular form is ambiguous,
  such as a doubled final consonant, are left out), so "cities" → "metropolises";
- alternatives only where SemCor attests them in that sense (WordNet's lemma count ≥
  ``min_count``): common, faithful synonyms rather than WordNet's rare ones;
- function words and phrases from a fixed table (``PHRASES``: "while"/"whilst", "because" →
  "since", "such as" → "like", "is not" → "isn't", ...), each direction meaning-preserving;
- by default (``rate=None``) each variant picks uniformly among the word and its alternatives,
  so two keys disagree at a unit with probability m/(m+1) for m alternatives (the most a keyed
  choice can), instead of the version 1 rule (rewrite with probability ``rate``).

Version 3 (issue 63) is precision first: only the function words, adverbs and number phrases of a
vetted table (``PHRASES_V3``), each alternation one a copy editor accepts wherever its pattern
matches, and no WordNet word. A publisher reads every place a change can fall before committing
(``keyed.review``) and can leave units out (``exclude``). Fewer units than version 2, each kept.

It stays a deterministic function of (text, key).
"""

from __future__ import annotations

import re
from functools import lru_cache

from trainspotter.rewriters.base import Rewriter, mac, unit

__all__ = ["KeyedLexicalRewriter", "PHRASES", "PHRASES_V3", "TABLES", "WORD", "phrase_context", "phrase_text"]

WORD = re.compile(r"(?<![-'’\w])[^\W\d_]+(?![-'’\w])")  # letters (any script), not part of a-b or don't


# Function words and phrases (lower case, matched as whole words): each maps to alternatives that
# keep the meaning in every context the pattern matches (a one-way entry where the reverse does
# not: "since" is also temporal, "though" also ends "even though"). A negative look-ahead in the
# key restricts the context ("because" not before "of").
PHRASES: dict[str, tuple[str, ...]] = {
    "while": ("whilst",), "whilst": ("while",), "whereas": ("while",), "among": ("amongst",),
    "amongst": ("among",), "amid": ("amidst",), "amidst": ("amid",), "toward": ("towards",),
    "towards": ("toward",), "although": ("though", "even though"), "upon": ("on",),
    "because(?! of)": ("since",), "because of": ("owing to", "due to"), "due to": ("owing to", "because of"),
    "such as": ("like", "including"), "in order to": ("to",), "for example": ("for instance",),
    "for instance": ("for example",), "however": ("nevertheless", "nonetheless"),
    "therefore": ("thus", "hence", "consequently"), "often": ("frequently",), "frequently": ("often",),
    "sometimes": ("at times", "occasionally"), "almost": ("nearly",), "nearly": ("almost",),
    "several": ("various",), "various": ("several",), "a number of": ("several",),
    "a variety of": ("various",), "many(?! of)": ("numerous",), "in addition to": ("besides",),
    "as well as": ("along with",), "known as": ("called",), "known for": ("noted for", "famous for"),
    "called(?= [A-Z])": ("named",), "named(?= [A-Z])": ("called",), "located(?= (?:in|on|at|near) )": ("situated",),
    "after(?= the )": ("following",), "before the": ("prior to the",),
    "about(?= \\d)": ("around", "approximately", "roughly"), "around(?= \\d)": ("about", "approximately"),
    "approximately": ("about", "around", "roughly"), "more than(?= \\d)": ("over",), "over(?= \\d)": ("more than",),
    "mostly": ("largely", "mainly"), "mainly": ("mostly", "chiefly", "largely"), "largely": ("mostly", "mainly"),
    "is not": ("isn't",), "are not": ("aren't",), "was not": ("wasn't",), "were not": ("weren't",),
    "does not": ("doesn't",), "do not": ("don't",), "did not": ("didn't",), "has not": ("hasn't",),
    "have not": ("haven't",), "had not": ("hadn't",), "cannot": ("can't",), "could not": ("couldn't",),
    "would not": ("wouldn't",), "will not": ("won't",), "it is": ("it's",), "there is": ("there's",),
}

# Version 3 (issue 63): only alternations a copy editor accepts in every context the pattern matches
# (a copy editor rejected 125 of 150 version 2 changes drawn at random: WordNet's other senses, fixed
# terms broken, grammar lost; what passed were function words, adverbs and number phrases). Dropped
# from version 2: every WordNet word, and the entries some context breaks ("due to arrive",
# "once upon a time", "a while", "named after the", "before the court", "how many", "however you",
# "became known as", contractions in formal prose); directions that change the register are one-way
# ("whilst" → "while", never back). A look-behind or look-ahead restricts the context.
PHRASES_V3: dict[str, tuple[str, ...]] = {
    "whilst": ("while",), "amongst": ("among",), "amidst": ("amid",),
    "toward": ("towards",), "towards": ("toward",), "although": ("though",),
    "because of": ("owing to",), "owing to": ("because of",), "in order to": ("to",),
    "for example": ("for instance",), "for instance": ("for example",),
    "often": ("frequently",), "frequently": ("often",),
    "almost(?! (?:never|no|none|nothing|nobody|always|all)(?![-'’\\w]))": ("nearly",),
    "nearly(?! (?:never|no|none|nothing|nobody|always|all)(?![-'’\\w]))": ("almost",),
    "several": ("various",), "various": ("several",), "a number of": ("several",),
    "in addition to": ("besides",), "in spite of": ("despite",), "despite": ("in spite of",),
    "prior to": ("before",), "in the course of": ("during",), "with the exception of": ("except for",),
    "located(?= (?:in|on|at|near) )": ("situated",),
    "(?<!best )(?<!well )(?<!widely )known for": ("noted for",),
    "numerous": ("many",), "a large number of": ("many",),
    "about(?= \\d)": ("around", "approximately"), "around(?= \\d)": ("about", "approximately"),
    "approximately(?= \\d)": ("about", "around"), "roughly(?= \\d)": ("about",),
    "more than(?= \\d)(?! \\d{4}(?![\\d,.]))": ("over",), "over(?= \\d)(?! \\d{4}(?![\\d,.]))": ("more than",),
    "mainly": ("chiefly", "mostly"), "mostly": ("mainly",), "largely": ("mostly", "mainly"),
    "primarily": ("mainly", "chiefly"), "particularly": ("especially",), "especially": ("particularly",),
    "therefore": ("thus",), "subsequently": ("later",), "initially": ("at first",),
    "isn't": ("is not",), "aren't": ("are not",), "wasn't": ("was not",), "weren't": ("were not",),
    "doesn't": ("does not",), "don't": ("do not",), "didn't": ("did not",), "can't": ("cannot",),
    "couldn't": ("could not",), "wouldn't": ("would not",), "won't": ("will not",),
}
TABLES = {2: PHRASES, 3: PHRASES_V3}  # the phrase table of each version


def phrase_text(pattern: str) -> str:
    """A phrase pattern as the text it matches ("about(?= \\d)" → "about")."""
    behind, ahead = phrase_context(pattern)
    return pattern[len(behind):len(pattern) - len(ahead)].replace("\\", "")


def phrase_context(pattern: str) -> tuple[str, str]:
    """A phrase pattern's look-behinds and look-ahead ("", "(?= \\d)"): the context its forms need too."""
    behind = re.match(r"(?:\(\?<[=!][^)]*\))*", pattern).group()
    ahead = m.group() if (m := re.search(r"\(\?[=!].*\)$", pattern[len(behind):])) else ""
    return behind, ahead

# Light verbs and other very polysemous words whose WordNet alternatives rarely fit (besides
# scikit-learn's English stop words, which are never looked up in WordNet either).
_LIGHT = frozenset("make do have get take give go come see set put let say use hold keep run turn "
                   "bring lead play stand".split())


class KeyedLexicalRewriter(Rewriter):
    """Version 2 (module docstring). A unit is a phrase of ``PHRASES`` or a lower-case word
    (proper nouns and sentence-initial words stay) of at least ``min_length`` letters, not a stop
    word, whose base form has single-word WordNet alternatives in its ``senses`` most frequent
    senses that SemCor attests (lemma count ≥ ``min_count``), inflected as the word is. Under key
    K a unit u with alternatives a_1..a_m becomes ``[u, a_1, ..., a_m][HMAC(K, "pick" ‖ u) mod
    (m+1)]`` (``rate=None``: uniform over the m+1 forms), or, with a number ``rate``, a_{HMAC(K,
    "pick" ‖ u) mod m} where ``HMAC(K, "rate" ‖ u) < rate`` and u otherwise (version 1's rule).
    The same unit gets the same form wherever it occurs, in every passage."""

    name = "keyed-lexical"

    def __init__(self, rate: float | None = None, min_length: int = 3, senses: int = 2, min_count: int = 1,
                 phrases: bool = True, version: int = 2, exclude: tuple[str, ...] = ()):
        if rate is not None and not 0.0 < rate <= 1.0:
            raise ValueError(f"rate must be in (0, 1] or None (uniform), got {rate}")
        if version not in TABLES:
            raise ValueError(f"keyed lexical rewriter version {version}: this trainspotter has {sorted(TABLES)}")
        self.rate, self.min_length, self.senses = rate, min_length, senses
        self.min_count, self.phrases, self.version = min_count, phrases, version
        self.table = {p: a for p, a in TABLES[version].items() if phrase_text(p) not in exclude} if phrases else {}
        self.words = version == 2  # version 3 rewrites no WordNet word (module docstring)
        self.exclude = tuple(sorted(set(exclude)))
        self._phrase = re.compile(r"(?<![-'’\w])(" + "|".join(sorted(self.table, key=len, reverse=True))
                                  + r")(?![-'’\w])") if self.table else None
        self._pattern_of = {q: re.compile(q) for q in self.table}

    def settings(self) -> dict:
        words = {"min_length": self.min_length, "senses": self.senses, "min_count": self.min_count,
                 "inflections": True} if self.words else {}
        return {"version": self.version, "rate": "uniform" if self.rate is None else self.rate, **words,
                "phrases": self.phrases} | ({"wordnet": "3.0"} if self.words else {"words": False}) \
            | ({"exclude": list(self.exclude)} if self.exclude else {})

    def alternatives(self, word: str) -> tuple[str, ...]:
        """The WordNet alternatives of a lower-case word, inflected as it is (phrases: ``table``); none in
        version 3 or for a unit the publisher excluded."""
        if not self.words or word in self.exclude:
            return ()
        return _alternatives(word, self.min_length, self.senses, self.min_count)

    def choice(self, key: bytes, unit_: str, alts: tuple[str, ...]) -> int:
        """The index of key's form of ``unit_`` among (unit, *alts) under the uniform rule
        (``rate=None``): HMAC(K, "pick" ‖ unit) mod (m + 1), 0 keeping the unit (what a keyed
        release's audit compares a model's form with)."""
        if self.rate is not None:
            raise ValueError("a key's form is uniform over a unit's forms only with rate=None")
        return int.from_bytes(mac(key, "pick\0" + unit_)[:8], "big") % (len(alts) + 1)

    def _choose(self, key: bytes, unit_: str, alts: tuple[str, ...]) -> str | None:
        pick = int.from_bytes(mac(key, "pick\0" + unit_)[:8], "big")
        if self.rate is None:
            j = self.choice(key, unit_, alts)
            return None if j == 0 else alts[j - 1]
        if unit(mac(key, "rate\0" + unit_)) >= self.rate:
            return None
        return alts[pick % len(alts)]

    def rewrite(self, text: str, key: bytes) -> str:
        def word(m: re.Match) -> str:
            w = m.group()
            alts = self.alternatives(w) if w.islower() else ()
            return (alts and self._choose(key, w, alts)) or w

        def phrase(m: re.Match) -> str:
            pattern = next(q for q in self.table if (mm := self._pattern_of[q].match(m.string, m.start()))
                           and mm.end() == m.end())
            return self._choose(key, pattern, self.table[pattern]) or m.group()

        words = (lambda t: WORD.sub(word, t)) if self.words else (lambda t: t)
        if self._phrase is None:
            return words(text)
        # phrases first, then the words outside them (a rewritten phrase is not rewritten again)
        out, last = [], 0
        for m in self._phrase.finditer(text):
            out += [words(text[last:m.start()]), phrase(m)]
            last = m.end()
        return "".join(out) + words(text[last:])


def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return ENGLISH_STOP_WORDS | _LIGHT


_VOWELS = "aeiou"


def _s(base: str) -> str:
    """Plural of a regular noun, third person singular of a regular verb."""
    if base.endswith(("s", "x", "z", "ch", "sh")):
        return base + "es"
    if base.endswith("y") and len(base) > 1 and base[-2] not in _VOWELS:
        return base[:-1] + "ies"
    return base + "s"


def _cvc(base: str) -> bool:
    """Ends consonant-vowel-consonant (not w, x, y): English may double the last letter before
    -ed/-ing (stop → stopped, but visit → visited): ambiguous without stress, so left out."""
    return (len(base) >= 3 and base[-1] not in _VOWELS + "wxy" and base[-2] in _VOWELS
            and base[-3] not in _VOWELS)


def _ed(base: str) -> str | None:
    if base.endswith("e"):
        return base + "d"
    if base.endswith("y") and base[-2:-1] not in tuple(_VOWELS):
        return base[:-1] + "ied"
    return None if _cvc(base) else base + "ed"


def _ing(base: str) -> str | None:
    if base.endswith("ie"):
        return base[:-2] + "ying"
    if base.endswith("e") and not base.endswith(("ee", "ye", "oe")):
        return base[:-1] + "ing"
    return None if _cvc(base) else base + "ing"


_INFLECT = {"s": _s, "ed": _ed, "ing": _ing}


def _analyses(word: str) -> list[tuple[str, str, str | None]]:
    """(base, WordNet part of speech, inflection) readings of ``word``, in the order tried: itself
    as a lemma of any part of speech (inflection None), then a plural noun ("s") or a verb in
    -s/-ed/-ing by WordNet's morphy and exception lists (an irregular past such as "built": "ed").
    An irregular form ("men", "found") is read only as its base's form. A form that could be a
    noun or a verb ("leaves", "results") has no inflected reading: without a tagger either could
    be wrong."""
    from trainspotter.features.perturb import _wordnet

    wn = _wordnet()
    out = []
    for pos, endings in (("n", ("s",)), ("v", ("s", "ed", "ing"))):
        irregular = wn._exception_map[pos].get(word)
        for base in irregular or [b for b in {wn.morphy(word, pos)} if b and b != word]:
            if "_" in base or base == word:
                continue
            if irregular:
                form = "ing" if word.endswith("ing") else "s" if pos == "n" or word.endswith("s") else "ed"
            else:
                form = next((e for e in endings if _INFLECT[e](base) == word or word.endswith(e)), None)
            if form and form in endings:
                out.append((base, pos, form))
    if len({pos for _, pos, _ in out}) > 1:
        out = []
    lemma = [(word, "", None)] if any(word in s.lemma_names() for s in wn.synsets(word)) else []
    irregular = any(word in wn._exception_map[q] for q in "nv")
    return out if irregular else lemma + out


@lru_cache(maxsize=100_000)
def _alternatives(word: str, min_length: int, senses: int, min_count: int = 1) -> tuple[str, ...]:
    """Single-word WordNet alternatives of ``word`` (module docstring), inflected as ``word`` is."""
    from trainspotter.features.perturb import _wordnet

    if len(word) < min_length or word in _stop_words() or not word.isascii():
        return ()
    wn = _wordnet()
    alts: set[str] = set()
    for base, pos, form in _analyses(word):
        if alts:  # the first reading that has alternatives
            break
        if base in _stop_words():
            continue
        # senses in which the base is a lemma and SemCor attests it there, the most frequent first
        # (WordNet's order); a base form: in its most frequent part of speech only (no tagger)
        own = [(s, n) for s in wn.synsets(base, pos or None) for lemma in s.lemmas()
               if lemma.name() == base and (n := lemma.count()) >= min_count]
        if not pos and own:
            by_pos: dict[str, int] = {}
            for s, n in own:
                by_pos[_pos(s)] = by_pos.get(_pos(s), 0) + n
            top = max(by_pos, key=lambda q: (by_pos[q], q))
            own = [(s, n) for s, n in own if _pos(s) == top]
        for s, _ in own[:senses]:
            for lemma in s.lemmas():
                name = lemma.name()
                if name == base or not (name.isascii() and name.isalpha() and name.islower()):
                    continue
                if lemma.count() < min_count or name in _stop_words():
                    continue
                if form is None:
                    alts.add(name)
                    continue
                if name in _irregular_bases(pos):
                    continue  # an irregular alternative (or a doubled consonant): its regular form may be wrong
                if form == "s" and name.endswith("s"):
                    continue  # athletics, news: no regular plural
                inflected = _INFLECT[form](name)
                if inflected and wn.morphy(inflected, pos) == name:
                    alts.add(inflected)
    alts.discard(word)
    return tuple(sorted(alts))


def _pos(synset) -> str:
    return "a" if synset.pos() == "s" else synset.pos()


@lru_cache(maxsize=2)
def _irregular_bases(pos: str) -> frozenset[str]:
    """Bases with an entry in WordNet's exception list (irregular forms, doubled consonants)."""
    from trainspotter.features.perturb import _wordnet

    return frozenset(b for bases in _wordnet()._exception_map[pos].values() for b in bases)
