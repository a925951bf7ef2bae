"""Text perturbations for perturbation-based membership features (BADI App. A.3).

The six NL-Augmenter perturbations with the paper's rates, re-implemented here so
that each is exactly reproducible and its rate is exactly the documented one:

=================  ====================================================  ==========
kind               what happens, independently per unit                   rate
=================  ====================================================  ==========
synonym            a word with a WordNet synonym is replaced by one       p = 0.25
butter_fingers     a letter a–z/A–Z becomes a QWERTY neighbour            p = 0.1
deletion           a whitespace-separated word is deleted                 p = 0.25
case               a cased character has its case swapped                 p = 0.1
whitespace         a space is removed / a space is added after a          0.1 / 0.05
                   non-space character
underscore         a space becomes ``_``                                  p = 0.25
=================  ====================================================  ==========

Why not nlpaug (the specified stack names it): it cannot produce these six. It has
no case-swap, no whitespace (remove/add spaces) and no underscore augmenter; its
synonym augmenter (SynonymAug) POS-tags every text with NLTK's perceptron tagger,
whose data is not available offline; and its ``aug_p`` changes a fixed number of
units, ceil(p·n) clipped to [aug_min, aug_max] (aug_max 10 by default) drawn without
replacement, not each unit independently with probability p as the paper's rates
mean. It also draws from the global ``random``/``numpy`` state.

Determinism: every call draws from its own ``random.Random`` seeded by
sha256(seed, kind, text), so the output depends only on (text, kind, seed) and
never on call order or global random state.

Synonyms: tagger-free on NLTK's WordNet 3.0 reader. NLTK's POS-tagger data is not
available offline, so instead of tagging we take the synonyms of the word across
all parts of speech (lemma names of every synset ``wn.synsets(word)`` returns,
which lemmatises via morphy), minus the word itself, sorted, and draw one
uniformly. This sometimes picks a synonym of another sense or part of speech; for
a membership feature the perturbation only has to change the text a little
without destroying it. The WordNet files are installed by ``scripts/install.sh``
under ``<venv>/share/nltk_data``, which this module puts on ``nltk.data.path``.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import sys
from functools import lru_cache
from pathlib import Path

KINDS = ("synonym", "butter_fingers", "deletion", "case", "whitespace", "underscore")

RATES = {"synonym": 0.25, "butter_fingers": 0.1, "deletion": 0.25, "case": 0.1,
         "whitespace": (0.1, 0.05), "underscore": 0.25}

_OWN_DATA = os.environ.get("TRAINSPOTTER_NLTK_DATA")  # WordNet's folder, if not the venv's (then only there)
NLTK_DATA = Path(_OWN_DATA or Path(sys.prefix) / "share" / "nltk_data")

# QWERTY neighbours (NL-Augmenter butter_fingers' table without the key itself, so
# that a drawn perturbation always changes the letter; 'g' -> t,b,f,h,e,d,c,y,j,n
# as in BADI App. A.3).
KEYBOARD = {
    "q": "wasedzx", "w": "qesadrfcx", "e": "wrsfdqazxcvgt", "r": "etdgfwsxcvgt",
    "t": "ryfhgedcvbnju", "y": "tugjhrfvbnji", "u": "yihkjtgbnmlo", "i": "uojlkyhnmlp",
    "o": "ipklujm", "p": "lo['ik", "a": "qszwxwdce", "s": "wxadrfv", "d": "ecsfaqgbv",
    "f": "dgrvwsxyhn", "g": "tbfhedcyjn", "h": "yngjfrvkim", "j": "hknugtblom",
    "k": "jlinyhn", "l": "okmpujn", "z": "axsvde", "x": "zcsdbvfrewq", "c": "xvdfzswergb",
    "v": "cfbgxdertyn", "b": "vnghcftyun", "n": "bmhjvgtuik", "m": "nkjloik",
}

_WORD = re.compile(r"[A-Za-z]+")


def _rng(text: str, kind: str, seed: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}\0{kind}\0{text}".encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def wordnet_root():
    """Where NLTK finds WordNet (``NLTK_DATA`` first; only there when $TRAINSPOTTER_NLTK_DATA
    names it); ``AssetMissing`` (one line saying what to install and what needs it) where it
    finds none: install.sh skips the Debian package without root."""
    import nltk

    from trainspotter.assets import AssetMissing

    if str(NLTK_DATA) not in nltk.data.path:
        nltk.data.path.insert(0, str(NLTK_DATA))
    try:
        return nltk.data.find("corpora/wordnet", paths=[str(NLTK_DATA)] if _OWN_DATA else None)
    except LookupError:
        raise AssetMissing(f"WordNet is not installed (looked in {NLTK_DATA} and NLTK's folders): the synonym "
                           f"perturbation needs it; as root run `apt-get install wordnet-base wordnet-sense-index` "
                           f"and scripts/install.sh, or leave synonym out (--features lean; benchmark "
                           f"--perturbations without synonym)") from None


def check_kinds(kinds) -> None:
    """Before any work: ``AssetMissing`` when ``kinds`` needs WordNet and it is not there."""
    if "synonym" in kinds:
        wordnet_root()


@lru_cache(maxsize=1)
def _wordnet():
    """NLTK's WordNet 3.0 reader on the files install.sh put under ``NLTK_DATA``.

    Built directly rather than via ``nltk.corpus.wordnet``: the stock reader maps
    itself onto "WordNet 3.0" for the multilingual (OMW) data on every load, reading
    index.sense twice (~10 s); we need English synonyms only, so that map is skipped."""
    import warnings

    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class _EnglishWordNet(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):
            return None

    root = wordnet_root()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available": intended
        return _EnglishWordNet(root, None)


@lru_cache(maxsize=50_000)
def synonyms(word: str) -> tuple[str, ...]:
    """Single- or multi-word WordNet synonyms of ``word`` across all parts of speech,
    sorted, without the word itself (case-insensitive). Empty if none."""
    low = word.lower()
    names = {lemma.name().replace("_", " ") for s in _wordnet().synsets(low) for lemma in s.lemmas()}
    return tuple(sorted(n for n in names if n.lower() != low))


def _match_case(template: str, word: str) -> str:
    if template.isupper() and len(template) > 1:
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def synonym_substitution(text: str, p: float = 0.25, seed: int = 0) -> str:
    """Each word (maximal run of ASCII letters) that has a WordNet synonym is
    replaced, with probability p, by a synonym drawn uniformly; capitalisation of
    the first letter (or all-caps) is kept. Words without synonyms never change."""
    rng = _rng(text, "synonym", seed)

    def sub(m: re.Match) -> str:
        cands = synonyms(m.group())
        if cands and rng.random() < p:
            return _match_case(m.group(), rng.choice(cands))
        return m.group()

    return _WORD.sub(sub, text)


def butter_fingers(text: str, p: float = 0.1, seed: int = 0) -> str:
    """Each letter a–z (either case) becomes, with probability p, a uniformly drawn
    QWERTY neighbour, keeping its case (NL-Augmenter butter_fingers)."""
    rng = _rng(text, "butter_fingers", seed)
    out = []
    for c in text:
        low = c.lower()
        if low in KEYBOARD and rng.random() < p:
            new = rng.choice(KEYBOARD[low])
            c = new.upper() if c.isupper() else new
        out.append(c)
    return "".join(out)


def random_deletion(text: str, p: float = 0.25, seed: int = 0) -> str:
    """Each whitespace-separated word is deleted with probability p; survivors are
    joined by single spaces. If every word would go, one random word stays
    (NL-Augmenter random_deletion)."""
    rng = _rng(text, "deletion", seed)
    words = text.split()
    if not words:
        return text
    kept = [w for w in words if rng.random() >= p]
    return " ".join(kept) if kept else rng.choice(words)


def change_char_case(text: str, p: float = 0.1, seed: int = 0) -> str:
    """Each cased character has its case swapped with probability p
    (NL-Augmenter change_char_case; 'which' -> 'WhIcH')."""
    rng = _rng(text, "case", seed)
    return "".join(c.swapcase() if c.lower() != c.upper() and rng.random() < p else c for c in text)


def whitespace_perturbation(text: str, p_remove: float = 0.1, p_add: float = 0.05, seed: int = 0) -> str:
    """Each space ' ' is removed with probability p_remove; after each other character
    a space is inserted with probability p_add (NL-Augmenter whitespace_perturbation)."""
    rng = _rng(text, "whitespace", seed)
    out = []
    for c in text:
        if c == " ":
            if rng.random() >= p_remove:
                out.append(c)
        else:
            out.append(c)
            if rng.random() < p_add:
                out.append(" ")
    return "".join(out)


def underscore_trick(text: str, p: float = 0.25, seed: int = 0) -> str:
    """Each space ' ' becomes '_' with probability p ('Hello world' -> 'Hello_world')."""
    rng = _rng(text, "underscore", seed)
    return "".join("_" if c == " " and rng.random() < p else c for c in text)


def perturb(text: str, kind: str, seed: int = 0) -> str:
    """The ``kind`` perturbation of ``text`` at the paper's rate (BADI App. A.3).
    Used on whole passages (token-level features) and on prefixes (sequence-perturb)."""
    if kind == "synonym":
        return synonym_substitution(text, RATES[kind], seed)
    if kind == "butter_fingers":
        return butter_fingers(text, RATES[kind], seed)
    if kind == "deletion":
        return random_deletion(text, RATES[kind], seed)
    if kind == "case":
        return change_char_case(text, RATES[kind], seed)
    if kind == "whitespace":
        return whitespace_perturbation(text, *RATES[kind], seed=seed)
    if kind == "underscore":
        return underscore_trick(text, RATES[kind], seed)
    raise ValueError(f"unknown perturbation {kind!r}; expected one of {', '.join(KINDS)}")
