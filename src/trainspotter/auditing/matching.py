"""Matched pairs for a held-out set that differs from the suspect set (issue 36).

When the blind check shows that suspect and held-out passages differ in what a text-only
model can see, an audit can still compare like with like:

1. each passage's propensity e(x) = P(suspect | text) is estimated from its text alone
   (Rosenbaum & Rubin 1983, Sec. 2, Theorems 1–2: e(x) is the coarsest balancing score): a logistic
   regression on TF-IDF word and character n-grams and the blind check's standardised
   surface statistics (``features.text.SURFACE``) and, with ``text_features="ngrams+minilm"``,
   the text's MiniLM sentence embedding (``features.text.sentence_embeddings``: 384 columns,
   unit norm, a fixed pre-trained map of the text alone that nothing here fits, so it adds
   columns without adding a way for a label to leak), **cross-fitted** — K folds, each scored
   by a model fitted on the others — so that no passage's score has seen its own label
   (Chernozhukov et al. 2018, Sec. 3: K-fold cross-fitting, Definitions 3.1–3.2);
2. suspect and held-out passages are paired one to one within a caliper of 0.2 standard
   deviations of logit e(x) (Austin 2011), optimally: the most pairs the caliper allows, and
   among those the smallest total gap in logit e (optimal matching without replacement,
   Rosenbaum 1989, Sec. 3: a minimum-cost assignment); the others are dropped. Greedy
   nearest-neighbour matching, which this replaced, gives a partner away to whichever suspect
   passage asks first and so dropped a third of IID pairs at 20 a side
   (benchmarks/results/shift-matched);
3. the matched pairs are put in a seeded random order for the e-processes.

What it assumes, and every verdict on matched pairs says so: given what a text-only model
can see, the suspect and held-out passages are exchangeable under H0 (the propensity model
sees all of the difference). The audit then runs a fresh blind check on the matched pairs
(the visible part of the assumption) and, with a reference, the placebo check (the part a
language model sees); neither proves the assumption.
"""

from __future__ import annotations

import random

import numpy as np
from pydantic import BaseModel, Field, computed_field

from trainspotter.features.text import DEFAULT_TEXT_FEATURES

__all__ = ["Encoded", "MatchResult", "match_pairs", "optimal_match", "propensity_logits"]

CALIPER_SD = 0.2  # Austin (2011): 0.2 SD of the logit propensity
MIN_SIDE = 2  # passages a side that cross-fitting (two folds, both sets in each) needs


class MatchResult(BaseModel):
    """Which pairs were matched, and how well the sets overlap."""

    pairs: list[tuple[int, int]] = Field(exclude=True)  # (suspect row, held-out row), in the e-processes' order
    suspect_total: int
    heldout_total: int
    caliper: float  # on the logit propensity
    auroc: float | None  # of the cross-fitted propensity, suspect vs held-out (0.5: no visible difference;
    # None: fewer than MIN_SIDE passages on a side, nothing fitted or matched)
    smd_before: float  # standardised mean difference of logit e, all passages
    smd_after: float  # the same on the matched passages
    blind_e_value: float | None = None  # the blind check on the pairs before matching (set by the audit)
    # a matched audit that continues a ledger (trainspotter.loop.matched_ledger): the matched pairs its
    # e-process bet on in earlier runs; this run matched only passages never bet on
    pairs_before: int = 0

    @computed_field
    @property
    def matched(self) -> int:
        return len(self.pairs)

    @computed_field
    @property
    def dropped(self) -> int:
        return self.suspect_total - self.matched

    def describe(self) -> str:
        """What the matched audit rests on, in two sentences (three for a continued ledger: this
        run's matching, counted per run, and the matched pairs of earlier runs)."""
        before = f", blind e-value {self.blind_e_value:.3g} before matching" if self.blind_e_value is not None else ""
        overlap = "too few passages to fit a propensity" if self.auroc is None else f"AUROC {self.auroc:.2f}"
        which = "suspect passages" if not self.pairs_before else "suspect passages not bet on before"
        earlier = (f" The e-process continues from {self.pairs_before} matched pairs of earlier runs."
                   if self.pairs_before else "")
        return (f"Matched audit: {self.matched} of {self.suspect_total} {which} were paired with held-out "
                f"passages of the same text-only propensity ({overlap} between the sets{before}).{earlier} "
                f"It assumes that what a text-only model can see of the difference between the sets is all the "
                f"difference.")


_ANALYZERS = ({"analyzer": "word", "ngram_range": (1, 2)}, {"analyzer": "char_wb", "ngram_range": (3, 5)})
MIN_DF, MAX_FEATURES = 2, 50_000


class Encoded:
    """What the propensity model reads of each text, computed once per text: the raw counts of
    every word 1–2-gram and character 3–5-gram (one column per term, in the sorted order
    scikit-learn's vectorizers use), the surface statistics and, with ``text_features``
    "ngrams+minilm", the MiniLM embeddings (``embedding``, else None). All are stateless per text;
    only the TF-IDF vocabulary and weights and the scaling of the surface statistics depend on
    the training texts, and ``_design`` computes those per fold, exactly as a ``TfidfVectorizer``
    (sublinear tf, min_df 2, at most 50,000 terms) fitted on the fold's training texts would
    (tests/unit/test_matching.py compares the two). ``rows`` picks passages (e.g. one Monte
    Carlo draw) without encoding them again."""

    def __init__(self, texts: list[str], text_features: str = DEFAULT_TEXT_FEATURES):
        from sklearn.feature_extraction.text import CountVectorizer

        from trainspotter.features.text import sentence_embeddings, surface_stats, wants_embeddings

        self.counts = []
        for kwargs in _ANALYZERS:
            try:
                self.counts.append(CountVectorizer(**kwargs).fit_transform(texts).tocsr().astype(np.float64))
            except ValueError:  # no term at all
                pass
        self.surface = surface_stats(texts)
        self.embedding = sentence_embeddings(texts) if wants_embeddings(text_features) else None

    def rows(self, index) -> "Encoded":
        out = Encoded.__new__(Encoded)
        out.counts = []
        for c in self.counts:  # only the terms these rows have (the others never pass min_df), in order
            c = c[index]
            out.counts.append(c[:, np.unique(c.indices)])
        out.surface = self.surface[index]
        out.embedding = None if self.embedding is None else self.embedding[index]
        return out

    def __len__(self) -> int:
        return len(self.surface)


def _tfidf(counts, train: np.ndarray, test: np.ndarray):
    """TfidfVectorizer(sublinear_tf=True, min_df=MIN_DF, max_features=MAX_FEATURES) fitted on the
    ``train`` rows of a count matrix and applied to them and to the ``test`` rows, or None
    (no term in two training texts): the vocabulary chosen here as the vectorizer chooses it,
    the weighting by scikit-learn's own TfidfTransformer."""
    from sklearn.feature_extraction.text import TfidfTransformer

    x_train, x_test = counts[train], counts[test]
    df = np.bincount(x_train.indices, minlength=counts.shape[1])
    mask = df >= MIN_DF
    if mask.sum() > MAX_FEATURES:  # the most frequent terms, ties as scikit-learn breaks them
        tfs = np.asarray(x_train.sum(axis=0)).ravel()
        keep = np.zeros(len(mask), dtype=bool)
        keep[np.where(mask)[0][(-tfs[mask]).argsort()[:MAX_FEATURES]]] = True
        mask = keep
    if not mask.any():
        return None
    cols = np.where(mask)[0]
    weights = TfidfTransformer(sublinear_tf=True).fit(x_train[:, cols])
    return weights.transform(x_train[:, cols]), weights.transform(x_test[:, cols])


def _design(encoded: Encoded, train: np.ndarray, test: np.ndarray):
    """Sparse design matrices of the training and scored rows: TF-IDF word 1–2-grams and
    character 3–5-grams (vocabulary and weights from the training texts only), the
    surface statistics, standardised on the training texts, and the embeddings as they are
    (unit norm, as each TF-IDF block's rows)."""
    from scipy import sparse
    from sklearn.preprocessing import StandardScaler

    blocks = ([], [])
    for counts in encoded.counts:
        pair = _tfidf(counts, train, test)
        if pair is not None:
            blocks[0].append(pair[0])
            blocks[1].append(pair[1])
    scaler = StandardScaler().fit(encoded.surface[train])
    blocks[0].append(sparse.csr_matrix(scaler.transform(encoded.surface[train])))
    blocks[1].append(sparse.csr_matrix(scaler.transform(encoded.surface[test])))
    if encoded.embedding is not None:
        blocks[0].append(sparse.csr_matrix(encoded.embedding[train]))
        blocks[1].append(sparse.csr_matrix(encoded.embedding[test]))
    return sparse.hstack(blocks[0]).tocsr(), sparse.hstack(blocks[1]).tocsr()


def propensity_logits(suspect: list[str], heldout: list[str], folds: int = 5, seed: int = 0,
                      encoded: Encoded | None = None, text_features: str = DEFAULT_TEXT_FEATURES) -> np.ndarray:
    """Cross-fitted logit e(x) of every passage, suspect rows first: fold k is scored by a
    logistic regression fitted on the other folds (stratified, seeded). ``encoded``: the
    texts, suspect rows first, already encoded (``Encoded``; default: encoded here with
    ``text_features``)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    texts = list(suspect) + list(heldout)
    encoded = encoded if encoded is not None else Encoded(texts, text_features)
    y = np.r_[np.ones(len(suspect), dtype=int), np.zeros(len(heldout), dtype=int)]
    folds = max(2, min(folds, len(suspect), len(heldout)))
    logits = np.zeros(len(texts))
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(texts, y):
        x_train, x_test = _design(encoded, train, test)
        model = LogisticRegression(C=1.0, max_iter=2000).fit(x_train, y[train])
        logits[test] = model.decision_function(x_test)
    return logits


def _smd(a: np.ndarray, b: np.ndarray) -> float:
    pooled = np.sqrt((a.var() + b.var()) / 2)
    return float((a.mean() - b.mean()) / pooled) if pooled > 0 else 0.0


def optimal_match(ls: np.ndarray, lh: np.ndarray, caliper: float, seed: int = 0) -> list[tuple[int, int]]:
    """(suspect row, held-out row) pairs, each row in at most one, every pair within ``caliper``
    in logit: the most such pairs, and among those the smallest total gap (module docstring,
    step 2). A minimum-cost assignment (scipy's ``linear_sum_assignment``) in which a pair
    beyond the caliper costs more than all permitted gaps together, so the assignment never
    gives up a permitted pair to shorten others; its forbidden pairs are then dropped. The
    pairs come back in a seeded random order."""
    from scipy.optimize import linear_sum_assignment

    if not len(ls) or not len(lh):
        return []
    gaps = np.abs(ls[:, None] - lh[None, :])
    allowed = gaps <= caliper
    rows, cols = linear_sum_assignment(np.where(allowed, gaps, caliper * min(len(ls), len(lh)) + 1.0))
    pairs = [(int(i), int(j)) for i, j in zip(rows, cols) if allowed[i, j]]
    random.Random(f"{seed}:matched-order").shuffle(pairs)
    return pairs


def match_pairs(suspect: list[str], heldout: list[str], seed: int = 0, folds: int = 5,
                caliper_sd: float = CALIPER_SD, encoded: Encoded | None = None,
                text_features: str = DEFAULT_TEXT_FEATURES) -> MatchResult:
    """Optimal caliper matching on the cross-fitted logit propensity (module docstring).
    ``encoded``: the texts, suspect rows first, already encoded (``Encoded.rows`` of a pool's
    encoding; the same result, without encoding a text twice); else encoded here with
    ``text_features`` (``features.text.TEXT_FEATURES``)."""
    from sklearn.metrics import roc_auc_score

    n_s, n_h = len(suspect), len(heldout)
    if min(n_s, n_h) < MIN_SIDE:  # (a continued ledger's few unused passages) cross-fitting needs two a side
        return MatchResult(pairs=[], suspect_total=n_s, heldout_total=n_h, caliper=0.0, auroc=None,
                           smd_before=0.0, smd_after=0.0)
    logits = propensity_logits(suspect, heldout, folds, seed, encoded, text_features)
    ls, lh = logits[:n_s], logits[n_s:]
    caliper = caliper_sd * float(logits.std())
    pairs = optimal_match(ls, lh, caliper, seed)
    xs, ys = [i for i, _ in pairs], [j for _, j in pairs]
    y = np.r_[np.ones(n_s), np.zeros(n_h)]
    return MatchResult(pairs=pairs, suspect_total=n_s, heldout_total=n_h, caliper=caliper,
                       auroc=float(roc_auc_score(y, logits)), smd_before=_smd(ls, lh),
                       smd_after=_smd(ls[xs], lh[ys]) if pairs else 0.0)
