"""The blind check: can the suspect and held-out sets be told apart without the model?

Dataset inference is valid when suspect and held-out passages are exchangeable under H0
(BADI Sec. 4). A held-out set that differs in date, topic, length, source or style breaks
that without any training, and the model's test then rejects on evidence that is not
about training (Das et al. 2024, "Blind baselines beat membership inference attacks";
Duan et al. 2024; Meeus et al.'s SoK). The blind check is a second e-process on the same
pairs with the same betting machinery (BADI Sec. 4, App. C: W_t = W_{t−1}(1 + λ_t u_t)),
whose scores come from the texts alone:

1. per passage, the surface statistics of ``trainspotter.features.text.SURFACE``, and
2. the log-odds of a multinomial naive Bayes over hashed word and character n-grams,
   log p(x | suspect) − log p(x | held-out) with Laplace-smoothed counts of the pairs
   before t (McCallum & Nigam 1998),

aggregated by the online scorer fitted on pairs before t (App. A.4, A.7) with no sign
constraints: any difference counts, in either direction. Every input to round t is a
function of pairs < t and of pair t's own texts, so under exchangeability W_t is a test
martingale and P(sup_t W_t ≥ 1/α) ≤ α (Ville): the check rarely fires on sets that do
not differ. It needs no model query, so an audit runs it on every available pair first.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field
from scipy import sparse

from trainspotter.features.text import NGRAM_BUCKETS, SURFACE, ngram_counts, surface_stats
from trainspotter.stats.sequential import SequentialTest, TestConfig

__all__ = ["BlindResult", "BlindTest", "TextRows", "blind_check", "blind_config", "blind_stops"]


class TextRows:
    """The blind inputs of a list of texts: surface statistics (n, k) and their hashed
    n-grams as padded index/value rows (n, m) — pad index = ``buckets`` (a dummy column),
    pad value 0 — so that B streams gather one row each with plain array indexing."""

    def __init__(self, texts: list[str], buckets: int = NGRAM_BUCKETS):
        self.buckets = buckets
        self.surface = surface_stats(texts)
        counts: sparse.csr_matrix = ngram_counts(texts, buckets)
        lengths = np.diff(counts.indptr)
        m = max(int(lengths.max(initial=0)), 1)
        self.idx = np.full((len(texts), m), buckets, dtype=np.int64)
        self.val = np.zeros((len(texts), m), dtype=np.float64)
        cols = np.arange(m)[None, :] < lengths[:, None]
        self.idx[cols] = counts.indices
        self.val[cols] = counts.data

    def __len__(self) -> int:
        return len(self.surface)


class NaiveBayes:
    """Online multinomial naive Bayes over hashed n-grams, B streams at once.

    ``llr(idx, val)`` = Σ_j v_j [log(a + c_S,j) − log(a + c_H,j)] − (Σ_j v_j)[log(aD + N_S) −
    log(aD + N_H)] with the counts c of past suspect (S) and held-out (H) rows, N their
    totals, D buckets, Laplace a = 1: 0 before any data."""

    def __init__(self, buckets: int = NGRAM_BUCKETS, batch: int | None = None, smoothing: float = 1.0):
        B = 1 if batch is None else batch
        self.D, self.a = buckets, smoothing
        self.counts = np.zeros((2, B, buckets + 1), dtype=np.float32)  # exact for counts < 2^24
        self.totals = np.zeros((2, B))

    def llr(self, idx: np.ndarray, val: np.ndarray) -> np.ndarray:
        rows = np.arange(idx.shape[0])[:, None]
        logs = np.log(self.a + self.counts[:, rows, idx].astype(float))  # (2, B, m)
        norm = np.log(self.a * self.D + self.totals)  # (2, B)
        return ((logs[0] - logs[1]) * val).sum(axis=1) - val.sum(axis=1) * (norm[0] - norm[1])

    def update(self, x: tuple[np.ndarray, np.ndarray], y: tuple[np.ndarray, np.ndarray]) -> None:
        for side, (idx, val) in enumerate((x, y)):
            rows = np.arange(idx.shape[0])[:, None]
            self.counts[side, rows, idx] += val.astype(np.float32)  # indices unique per row (pad adds 0)
            self.totals[side] += val.sum(axis=1)


def blind_config(test: TestConfig) -> TestConfig:
    """The model test's betting settings (α, strategy, payoff, λ_max) with the online scorer,
    whose cost per pair does not grow with the number of pairs."""
    return test.model_copy(update={"scorer": "online"})


class BlindTest:
    """The blind e-process: ``update(ix, iy)`` plays round t on rows ix of the suspect
    ``TextRows`` and iy of the held-out ones (ints for one stream, (B,) arrays for B)."""

    def __init__(self, suspect: TextRows, heldout: TextRows, config: TestConfig, batch: int | None = None):
        self.sides, self.batch = (suspect, heldout), batch
        self.nb = NaiveBayes(suspect.buckets, batch)
        self.test = SequentialTest(len(SURFACE) + 1, blind_config(config), batch)

    def _rows(self, side: int, i) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        rows = self.sides[side]
        i = np.atleast_1d(i)
        grams = (rows.idx[i], rows.val[i])
        features = np.column_stack([rows.surface[i], self.nb.llr(*grams)])
        return (features[0] if self.batch is None else features), grams

    def update(self, ix, iy) -> dict:
        (fx, gx), (fy, gy) = self._rows(0, ix), self._rows(1, iy)
        step = self.test.update(fx, fy)  # scored and bet on with the fit of pairs < t
        self.nb.update(gx, gy)           # only then absorb pair t
        return step


def blind_stops(suspect: TextRows, heldout: TextRows, idx_x: np.ndarray, idx_y: np.ndarray,
                config: TestConfig) -> tuple[np.ndarray, np.ndarray]:
    """B streams of the blind check at once (Monte Carlo): round t pairs suspect row
    idx_x[:, t] with held-out row idx_y[:, t]. Returns each stream's first crossing of 1/α
    (0 = none) and its largest wealth over all rounds (to read other thresholds)."""
    test = BlindTest(suspect, heldout, config, batch=idx_x.shape[0])
    for t in range(idx_x.shape[1]):
        test.update(idx_x[:, t], idx_y[:, t])
    return test.test.stop_time, test.test.max_wealth


class BlindResult(BaseModel):
    """What the blind check found on an audit's pairs."""

    fired: bool  # W reached 1/α: the sets differ without any model (sup W ≥ 1/α has P ≤ α if they do not)
    e_value: float
    max_wealth: float
    p_value: float  # anytime-valid, 1 / max W
    pairs_used: int
    pairs_available: int
    stop_time: int | None
    alpha: float
    wealth: list[float] = Field(repr=False)
    differences: list[str] = []  # what differs most, measured on all pairs (for the reader only)


def blind_check(suspect: list[str], heldout: list[str], config: TestConfig) -> BlindResult:
    """Run the blind e-process over the pairs (suspect[t], heldout[t]) in order, stopping at
    the first W_t ≥ 1/α, as the model's test does."""
    n = min(len(suspect), len(heldout))
    if n == 0:  # (a matched audit where nothing matched)
        return BlindResult(fired=False, e_value=1.0, max_wealth=1.0, p_value=1.0, pairs_used=0, pairs_available=0,
                           stop_time=None, alpha=config.alpha, wealth=[])
    rows = TextRows(suspect[:n]), TextRows(heldout[:n])
    test = BlindTest(*rows, config)
    for t in range(n):
        test.update(t, t)
        if test.test.rejected:
            break
    e = test.test
    return BlindResult(fired=bool(e.rejected), e_value=float(e.e_value), max_wealth=float(e.max_wealth),
                       p_value=float(e.p_value), pairs_used=int(e.t), pairs_available=n, stop_time=e.stop_time,
                       alpha=config.alpha, wealth=[float(w) for w in e.history["wealth"]],
                       differences=describe_differences(suspect[:n], heldout[:n], rows))


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
