"""The blind check: can the suspect and held-out sets be told apart without the model?

Dataset inference is valid when suspect and held-out passages are exchangeable under H0
(BADI Sec. 4). A held-out set that differs in date, topic, length, source or style breaks
that without any training, and the model's test then rejects on evidence that is not
about training (Das et al. 2024, "Blind baselines beat membership inference attacks";
Duan et al. 2024; Meeus et al.'s SoK). The blind check is a second e-process on the same
pairs with the same betting machinery (BADI Sec. 4, App. C: W_t = W_{t−1}(1 + λ_t u_t)),
whose scores come from the texts alone:

1. per passage, its surface statistics (``trainspotter.features.text.SURFACE``), and
2. the log-odds of a multinomial naive Bayes over hashed word and character n-grams,
   log p(x | suspect) − log p(x | held-out) with Laplace-smoothed counts of the pairs
   before t (McCallum & Nigam 1998),
3. with sentence embeddings (``text_features="ngrams+minilm"``), the nearest-centroid
   discriminant e(x)·(μ̂_S − μ̂_H): the embedding against the difference of the mean suspect
   and held-out embeddings of the pairs before t (Fisher's linear discriminant with a
   spherical covariance; the log-odds of two Gaussians of equal spherical covariance, up to
   a constant that cancels within a pair),

aggregated by the online scorer fitted on pairs before t (App. A.4, A.7) with no sign
constraints: any difference counts, in either direction. Every input to round t is a
function of pairs < t and of pair t's own texts (the embeddings are a fixed pre-trained map
of a text alone, fitted on nothing of the audit), so under exchangeability W_t is a test
martingale and P(sup_t W_t ≥ 1/α) ≤ α (Ville): the check rarely fires on sets that do
not differ. It needs no model query, so an audit runs it on every available pair first.

This module takes the texts' numbers, not the texts: each side's ``rows`` hold ``surface`` (n, k)
and the hashed n-grams as padded ``idx``/``val`` rows (n, m) with pad index ``buckets``, and
``embedding`` (n, d) or None (``trainspotter.features.text.TextRows`` makes them;
``trainspotter.auditing.auditor.blind_check`` runs the check on texts).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from trainspotter.stats.sequential import SequentialTest, TestConfig

__all__ = ["BlindResult", "BlindTest", "Centroids", "NaiveBayes", "blind_config", "blind_stops", "run_blind"]


class NaiveBayes:
    """Online multinomial naive Bayes over hashed n-grams, B streams at once.

    ``llr(idx, val)`` = Σ_j v_j [log(a + c_S,j) − log(a + c_H,j)] − (Σ_j v_j)[log(aD + N_S) −
    log(aD + N_H)] with the counts c of past suspect (S) and held-out (H) rows, N their
    totals, D buckets, Laplace a = 1: 0 before any data."""

    def __init__(self, buckets: int, batch: int | None = None, smoothing: float = 1.0):
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


class Centroids:
    """Online nearest-centroid discriminant over embeddings, B streams at once:
    ``score(e)`` = e·(μ_S − μ_H) with μ the mean embedding of the past suspect (S) and
    held-out (H) rows (0 for a side with none): 0 before any data."""

    def __init__(self, dim: int, batch: int | None = None):
        B = 1 if batch is None else batch
        self.sums = np.zeros((2, B, dim))
        self.n = 0

    def score(self, e: np.ndarray) -> np.ndarray:
        if self.n == 0:
            return np.zeros(e.shape[0])
        return np.einsum("bd,bd->b", e, (self.sums[0] - self.sums[1]) / self.n)

    def update(self, ex: np.ndarray, ey: np.ndarray) -> None:
        self.sums[0] += ex
        self.sums[1] += ey
        self.n += 1


def blind_config(test: TestConfig) -> TestConfig:
    """The model test's betting settings (α, strategy, payoff, λ_max) with the online scorer,
    whose cost per pair does not grow with the number of pairs."""
    return test.model_copy(update={"scorer": "online"})


class BlindTest:
    """The blind e-process: ``update(ix, iy)`` plays round t on rows ix of the suspect
    ``rows`` and iy of the held-out ones (ints for one stream, (B,) arrays for B)."""

    def __init__(self, suspect, heldout, config: TestConfig, batch: int | None = None):
        self.sides, self.batch = (suspect, heldout), batch
        self.nb = NaiveBayes(suspect.buckets, batch)
        embedding = getattr(suspect, "embedding", None)
        self.centroids = None if embedding is None else Centroids(embedding.shape[1], batch)
        columns = suspect.surface.shape[1] + 1 + (self.centroids is not None)
        self.test = SequentialTest(columns, blind_config(config), batch)

    def _rows(self, side: int, i) -> tuple[np.ndarray, tuple]:
        rows = self.sides[side]
        i = np.atleast_1d(i)
        grams = (rows.idx[i], rows.val[i])
        columns = [rows.surface[i], self.nb.llr(*grams)]
        embedding = None
        if self.centroids is not None:
            embedding = rows.embedding[i]
            columns.append(self.centroids.score(embedding))
        features = np.column_stack(columns)
        return (features[0] if self.batch is None else features), (grams, embedding)

    def update(self, ix, iy) -> dict:
        (fx, (gx, ex)), (fy, (gy, ey)) = self._rows(0, ix), self._rows(1, iy)
        step = self.test.update(fx, fy)  # scored and bet on with the fit of pairs < t
        self.nb.update(gx, gy)           # only then absorb pair t
        if self.centroids is not None:
            self.centroids.update(ex, ey)
        return step


def blind_stops(suspect, heldout, idx_x: np.ndarray, idx_y: np.ndarray,
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


def run_blind(suspect, heldout, config: TestConfig) -> BlindResult:
    """Run the blind e-process over the pairs (row t of ``suspect``, row t of ``heldout``) in
    order, stopping at the first W_t ≥ 1/α, as the model's test does."""
    n = min(len(suspect.surface), len(heldout.surface))
    if n == 0:  # (a matched audit where nothing matched)
        return BlindResult(fired=False, e_value=1.0, max_wealth=1.0, p_value=1.0, pairs_used=0, pairs_available=0,
                           stop_time=None, alpha=config.alpha, wealth=[])
    test = BlindTest(suspect, heldout, config)
    for t in range(n):
        test.update(t, t)
        if test.test.rejected:
            break
    e = test.test
    return BlindResult(fired=bool(e.rejected), e_value=float(e.e_value), max_wealth=float(e.max_wealth),
                       p_value=float(e.p_value), pairs_used=int(e.t), pairs_available=n, stop_time=e.stop_time,
                       alpha=config.alpha, wealth=[float(w) for w in e.history["wealth"]])
