"""Model-free text features for the blind check (its e-process: trainspotter.stats.blind).

What a text looks like without any language model: surface statistics (length, word
length, digits, casing, punctuation, repetition) and hashed word and character n-grams.
"Blind" classifiers on such features separate the members and non-members of published
membership benchmarks (Das et al. 2024, "Blind baselines beat membership inference
attacks"; Duan et al. 2024): when they separate an audit's suspect and held-out sets,
the sets differ in distribution and a model's test on them is not evidence of training.

With ``text_features="ngrams+minilm"`` each text also gets its all-MiniLM-L6-v2 sentence
embedding (384-d, unit norm; the encoder BADI App. A.6 names, packaged offline): what a
text is about and how it is phrased, beyond the words it shares with other texts. The
embedding is a fixed, pre-trained function of the text alone — never fitted on an audit's
texts or labels — so everything the blind check and the matching's cross-fitting rest on
holds as with n-grams alone (``stats.blind``, ``trainspotter.auditing.matching``).
"""

from __future__ import annotations

import re
import zlib

import numpy as np

__all__ = ["DEFAULT_TEXT_FEATURES", "EMBEDDING_DIM", "SURFACE", "NGRAM_BUCKETS", "TEXT_FEATURES", "TextRows",
           "describe_differences", "ngram_counts", "sentence_embeddings", "surface_stats", "wants_embeddings"]

NGRAM_BUCKETS = 2 ** 15  # hashed n-gram columns; collisions only add noise
# What the text-only models (the blind check, matching's propensity) read of each text.
TEXT_FEATURES = ("ngrams", "ngrams+minilm")
DEFAULT_TEXT_FEATURES = "ngrams"  # benchmarks/results/shift-matched/text-features.md: why
EMBEDDING_DIM = 384  # all-MiniLM-L6-v2
_EMBEDDINGS: dict[str, np.ndarray] = {}  # text -> its embedding, this process (exact: see below)
_EMBEDDINGS_MAX = 50_000  # ~150 MB of float64 rows at most; then the cache starts afresh

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


def ngram_counts(texts: list[str], buckets: int = NGRAM_BUCKETS):
    """Binary bag of hashed n-grams per text (n, buckets): lower-cased word uni- and bigrams
    and case-kept character 3-grams within word boundaries (style, casing, punctuation).
    scikit-learn's HashingVectorizer (stateless, so every text maps the same way
    whichever set it is in)."""
    from scipy import sparse
    from sklearn.feature_extraction.text import HashingVectorizer

    if not texts:  # (the hasher cannot transform an empty list)
        return sparse.csr_matrix((0, buckets))
    kw = {"n_features": buckets, "alternate_sign": False, "norm": None, "binary": True}
    words = HashingVectorizer(analyzer="word", ngram_range=(1, 2), lowercase=True, **kw)
    chars = HashingVectorizer(analyzer="char_wb", ngram_range=(3, 3), lowercase=False, **kw)
    m = words.transform(texts) + chars.transform(texts)
    m.data = np.minimum(m.data, 1.0)  # a word and a char gram in one bucket still count once
    return m.tocsr()


def wants_embeddings(text_features: str) -> bool:
    """Whether ``text_features`` (one of ``TEXT_FEATURES``) includes the MiniLM embeddings."""
    if text_features not in TEXT_FEATURES:
        raise ValueError(f"text features {text_features!r}: expected one of {', '.join(TEXT_FEATURES)}")
    return text_features.endswith("+minilm")


def sentence_embeddings(texts: list[str]) -> np.ndarray:
    """(n, 384) unit-norm all-MiniLM-L6-v2 sentence embeddings (mean-pooled, as the model is
    meant to be used; BADI App. A.6's encoder), float64. One text per forward pass: no padding,
    so a row is a function of its text alone, bit for bit, whatever else is encoded beside it or
    before it (batching would change the last bits with the batch's padding). Each distinct text
    is encoded once per process (the audit embeds its passages for the blind check, matching
    and the blind check on the matched pairs). The encoder: ``features.probability.minilm``
    (loaded once per process; ``AssetMissing`` says what to install when it is not there)."""
    out = np.zeros((len(texts), EMBEDDING_DIM))
    todo = list(dict.fromkeys(t for t in texts if t not in _EMBEDDINGS))
    new = {}
    if todo:
        from transformers.utils import logging as hf_logging

        from trainspotter.features.probability import minilm

        hf_logging.disable_progress_bar()  # "Loading weights" on stderr
        vectors = minilm().encode(todo, batch_size=1, convert_to_numpy=True, normalize_embeddings=True,
                                  show_progress_bar=False)
        new = dict(zip(todo, np.asarray(vectors, dtype=np.float64)))
    for i, t in enumerate(texts):
        out[i] = new[t] if t in new else _EMBEDDINGS[t]
    if len(_EMBEDDINGS) + len(new) > _EMBEDDINGS_MAX:
        _EMBEDDINGS.clear()
    _EMBEDDINGS.update(new)
    return out


class TextRows:
    """The blind inputs of a list of texts: surface statistics (n, k) and their hashed
    n-grams as padded index/value rows (n, m) — pad index = ``buckets`` (a dummy column),
    pad value 0 — so that B streams gather one row each with plain array indexing
    (``stats.blind.BlindTest`` reads ``surface``, ``idx``, ``val``, ``buckets`` and
    ``embedding``); ``embedding``: the texts' MiniLM embeddings (n, 384) with
    ``text_features="ngrams+minilm"``, else None."""

    def __init__(self, texts: list[str], buckets: int = NGRAM_BUCKETS, text_features: str = DEFAULT_TEXT_FEATURES):
        self.buckets = buckets
        self.surface = surface_stats(texts)
        self.embedding = sentence_embeddings(texts) if wants_embeddings(text_features) else None
        counts = ngram_counts(texts, buckets)  # scipy.sparse.csr_matrix
        lengths = np.diff(counts.indptr)
        m = max(int(lengths.max(initial=0)), 1)
        self.idx = np.full((len(texts), m), buckets, dtype=np.int64)
        self.val = np.zeros((len(texts), m), dtype=np.float64)
        cols = np.arange(m)[None, :] < lengths[:, None]
        self.idx[cols] = counts.indices
        self.val[cols] = counts.data

    def __len__(self) -> int:
        return len(self.surface)


def describe_differences(suspect: list[str], heldout: list[str], rows: tuple[TextRows, TextRows],
                         top: int = 3) -> list[str]:
    """A few human-readable differences between the sets: the surface statistics with the
    largest standardised mean difference (|d| ≥ 0.2) and the words most over-represented on
    each side (smoothed log-odds of document frequencies, words in ≥ 1% of passages)."""
    out = []
    s, h = rows[0].surface, rows[1].surface
    pooled = np.sqrt((s.var(axis=0) + h.var(axis=0)) / 2)
    d = np.divide(s.mean(axis=0) - h.mean(axis=0), pooled, out=np.zeros(len(SURFACE)), where=pooled > 0)
    for j in np.argsort(-np.abs(d))[:top]:
        if abs(d[j]) >= 0.2:
            out.append(f"{SURFACE[j].replace('_', ' ')}: suspect {s[:, j].mean():.3g} vs held-out "
                       f"{h[:, j].mean():.3g} (d = {d[j]:+.2f})")
    from sklearn.feature_extraction.text import CountVectorizer

    n = len(suspect)
    try:
        vec = CountVectorizer(binary=True, min_df=max(2, int(0.01 * 2 * n)))
        m = vec.fit_transform(suspect + heldout)
    except ValueError:  # no word is frequent enough
        return out
    words = vec.get_feature_names_out()
    cs, ch = np.asarray(m[:n].sum(axis=0)).ravel(), np.asarray(m[n:].sum(axis=0)).ravel()
    logodds = np.log((cs + 0.5) / (n - cs + 0.5)) - np.log((ch + 0.5) / (n - ch + 0.5))
    for side, order in (("suspect", np.argsort(-logodds)), ("held-out", np.argsort(logodds))):
        picked = [f"{words[j]!r} ({cs[j] / n:.0%} vs {ch[j] / n:.0%})" for j in order[:top]
                  if abs(logodds[j]) >= 0.5]
        if picked:
            out.append(f"words more frequent in the {side} set: " + ", ".join(picked))
    return out
