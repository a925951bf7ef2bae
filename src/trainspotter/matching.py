"""Matched pairs for a held-out set that differs from the suspect set (issue 36).

When the blind check shows that suspect and held-out passages differ in what a text-only
model can see, an audit can still compare like with like:

1. each passage's propensity e(x) = P(suspect | text) is estimated from its text alone
   (Rosenbaum & Rubin 1983): a logistic regression on TF-IDF word and character n-grams
   and the blind check's standardised surface statistics (``features.text.SURFACE``),
   **cross-fitted** — K folds, each scored by a model fitted on the others — so that no
   passage's score has seen its own label (Chernozhukov et al. 2018);
2. suspect passages, in a seeded random order, each take the unused held-out passage
   nearest in logit e(x), if within a caliper of 0.2 standard deviations of logit e
   (greedy matching without replacement, Austin 2011); the others are dropped;
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

__all__ = ["MatchResult", "greedy_match", "match_pairs", "propensity_logits"]

CALIPER_SD = 0.2  # Austin (2011): 0.2 SD of the logit propensity


class MatchResult(BaseModel):
    """Which pairs were matched, and how well the sets overlap."""

    pairs: list[tuple[int, int]] = Field(exclude=True)  # (suspect row, held-out row), in the e-processes' order
    suspect_total: int
    heldout_total: int
    caliper: float  # on the logit propensity
    auroc: float  # of the cross-fitted propensity, suspect vs held-out (0.5: no visible difference)
    smd_before: float  # standardised mean difference of logit e, all passages
    smd_after: float  # the same on the matched passages
    blind_e_value: float | None = None  # the blind check on the pairs before matching (set by the audit)

    @computed_field
    @property
    def matched(self) -> int:
        return len(self.pairs)

    @computed_field
    @property
    def dropped(self) -> int:
        return self.suspect_total - self.matched

    def describe(self) -> str:
        """What the matched audit rests on, in two sentences."""
        before = f", blind e-value {self.blind_e_value:.3g} before matching" if self.blind_e_value is not None else ""
        return (f"Matched audit: {self.matched} of {self.suspect_total} suspect passages were paired with held-out "
                f"passages of the same text-only propensity (AUROC {self.auroc:.2f} between the sets{before}). "
                f"It assumes that what a text-only model can see of the difference between the sets is all the "
                f"difference.")


def _design(train: list[str], test: list[str]):
    """Sparse design matrices of the training and scored texts: TF-IDF word 1–2-grams and
    character 3–5-grams (vocabulary and weights from the training texts only) and the
    surface statistics, standardised on the training texts."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import StandardScaler

    from trainspotter.features.text import surface_stats

    blocks = ([], [])
    for kwargs in ({"analyzer": "word", "ngram_range": (1, 2)}, {"analyzer": "char_wb", "ngram_range": (3, 5)}):
        vec = TfidfVectorizer(sublinear_tf=True, min_df=2, max_features=50_000, **kwargs)
        try:
            blocks[0].append(vec.fit_transform(train))
            blocks[1].append(vec.transform(test))
        except ValueError:  # no term in two training texts
            pass
    scaler = StandardScaler().fit(surface_stats(train))
    blocks[0].append(sparse.csr_matrix(scaler.transform(surface_stats(train))))
    blocks[1].append(sparse.csr_matrix(scaler.transform(surface_stats(test))))
    return sparse.hstack(blocks[0]).tocsr(), sparse.hstack(blocks[1]).tocsr()


def propensity_logits(suspect: list[str], heldout: list[str], folds: int = 5, seed: int = 0) -> np.ndarray:
    """Cross-fitted logit e(x) of every passage, suspect rows first: fold k is scored by a
    logistic regression fitted on the other folds (stratified, seeded)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    texts = list(suspect) + list(heldout)
    y = np.r_[np.ones(len(suspect), dtype=int), np.zeros(len(heldout), dtype=int)]
    folds = max(2, min(folds, len(suspect), len(heldout)))
    logits = np.zeros(len(texts))
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(texts, y):
        x_train, x_test = _design([texts[i] for i in train], [texts[i] for i in test])
        model = LogisticRegression(C=1.0, max_iter=2000).fit(x_train, y[train])
        logits[test] = model.decision_function(x_test)
    return logits


def _smd(a: np.ndarray, b: np.ndarray) -> float:
    pooled = np.sqrt((a.var() + b.var()) / 2)
    return float((a.mean() - b.mean()) / pooled) if pooled > 0 else 0.0


def greedy_match(ls: np.ndarray, lh: np.ndarray, caliper: float, seed: int = 0) -> list[tuple[int, int]]:
    """Suspect rows in a seeded random order each take the free held-out row nearest in
    logit (ties: the lowest row), if no farther than ``caliper``; the pairs come back in
    a seeded random order."""
    free = np.ones(len(lh), dtype=bool)
    pairs = []
    order = list(range(len(ls)))
    random.Random(f"{seed}:match").shuffle(order)
    for i in order:
        gaps = np.where(free, np.abs(lh - ls[i]), np.inf)
        j = int(np.argmin(gaps)) if len(lh) else 0
        if len(lh) and gaps[j] <= caliper:
            free[j] = False
            pairs.append((i, j))
    random.Random(f"{seed}:matched-order").shuffle(pairs)
    return pairs


def match_pairs(suspect: list[str], heldout: list[str], seed: int = 0, folds: int = 5,
                caliper_sd: float = CALIPER_SD) -> MatchResult:
    """Greedy caliper matching on the cross-fitted logit propensity (module docstring)."""
    from sklearn.metrics import roc_auc_score

    n_s, n_h = len(suspect), len(heldout)
    logits = propensity_logits(suspect, heldout, folds, seed)
    ls, lh = logits[:n_s], logits[n_s:]
    caliper = caliper_sd * float(logits.std())
    pairs = greedy_match(ls, lh, caliper, seed)
    xs, ys = [i for i, _ in pairs], [j for _, j in pairs]
    y = np.r_[np.ones(n_s), np.zeros(n_h)]
    return MatchResult(pairs=pairs, suspect_total=n_s, heldout_total=n_h, caliper=caliper,
                       auroc=float(roc_auc_score(y, logits)), smd_before=_smd(ls, lh),
                       smd_after=_smd(ls[xs], lh[ys]) if pairs else 0.0)
