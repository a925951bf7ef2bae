"""Model-free text features for the blind check (trainspotter.stats.blind).

What a text looks like without any language model: surface statistics (length, word
length, digits, casing, punctuation, repetition) and hashed word and character n-grams.
"Blind" classifiers on such features separate the members and non-members of published
membership benchmarks (Das et al. 2024, "Blind baselines beat membership inference
attacks"; Duan et al. 2024): when they separate an audit's suspect and held-out sets,
the sets differ in distribution and a model's test on them is not evidence of training.
"""

from __future__ import annotations

import re
import zlib

import numpy as np
from scipy import sparse

__all__ = ["SURFACE", "NGRAM_BUCKETS", "surface_stats", "ngram_counts"]

NGRAM_BUCKETS = 2 ** 15  # hashed n-gram columns; collisions only add noise

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")

SURFACE = (  # one column each, in this order
    "log_chars", "log_words", "mean_word_length", "type_token_ratio", "digit_fraction",
    "upper_fraction", "punctuation_fraction", "space_fraction", "non_ascii_fraction",
    "capitalised_words", "words_per_sentence", "zlib_ratio", "newlines", "starts_upper", "ends_sentence",
)


def _surface(text: str) -> list[float]:
    n = max(len(text), 1)
    words = _WORD.findall(text)
    w = max(len(words), 1)
    letters = sum(c.isalpha() for c in text)
    raw = text.encode("utf-8")
    return [
        np.log(n), np.log(w), sum(map(len, words)) / w, len({x.lower() for x in words}) / w,
        sum(c.isdigit() for c in text) / n, sum(c.isupper() for c in text) / max(letters, 1),
        sum(not (c.isalnum() or c.isspace()) for c in text) / n, sum(c.isspace() for c in text) / n,
        sum(ord(c) > 127 for c in text) / n, sum(x[:1].isupper() for x in words) / w,
        w / max(len(_SENTENCE_END.findall(text)), 1), len(zlib.compress(raw)) / max(len(raw), 1),
        float(text.count("\n")),
        float(text.lstrip()[:1].isupper()), float(text.rstrip()[-1:] in ".!?\"')"),  # where the passage was cut
    ]


def surface_stats(texts: list[str]) -> np.ndarray:
    """(n, len(SURFACE)) surface statistics of each text, in ``SURFACE`` order."""
    return np.array([_surface(t) for t in texts], dtype=float).reshape(len(texts), len(SURFACE))


def ngram_counts(texts: list[str], buckets: int = NGRAM_BUCKETS) -> sparse.csr_matrix:
    """Binary bag of hashed n-grams per text (n, buckets): lower-cased word uni- and bigrams
    and case-kept character 3-grams within word boundaries (style, casing, punctuation).
    scikit-learn's HashingVectorizer (stateless, so every text maps the same way
    whichever set it is in)."""
    from sklearn.feature_extraction.text import HashingVectorizer

    kw = {"n_features": buckets, "alternate_sign": False, "norm": None, "binary": True}
    words = HashingVectorizer(analyzer="word", ngram_range=(1, 2), lowercase=True, **kw)
    chars = HashingVectorizer(analyzer="char_wb", ngram_range=(3, 3), lowercase=False, **kw)
    m = words.transform(texts) + chars.transform(texts)
    m.data = np.minimum(m.data, 1.0)  # a word and a char gram in one bucket still count once
    return m.tocsr()
