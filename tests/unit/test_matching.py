"""Matched pairs (trainspotter.auditing.matching): the optimal caliper rule on hand-made logits, the
cross-fitting, and what matching does to a shift a text-only model sees."""

from __future__ import annotations

import random

import numpy as np
from sklearn.metrics import roc_auc_score

from trainspotter.auditing.auditor import blind_check
from trainspotter.auditing.matching import match_pairs, optimal_match, propensity_logits
from trainspotter.stats.sequential import TestConfig

VOCAB = [f"w{i}" for i in range(400)]


def texts(n: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCAB) for _ in range(words)).capitalize() + "." for _ in range(n)]


def test_optimal_match_keeps_every_pair_the_caliper_allows():
    """Suspect 0.0 is nearest to held-out 0.1, the only partner suspect 0.25 has within 0.2:
    the nearest-first rule (0.0 takes 0.1) pairs one; the optimal rule pairs both, 0.0 with
    -0.15. Among the most pairs, the smallest total gap: 1.0 takes 1.05, not 0.9."""
    pairs = optimal_match(np.array([0.0, 0.25]), np.array([0.1, -0.15]), caliper=0.2, seed=0)
    assert sorted(pairs) == [(0, 1), (1, 0)]
    pairs = optimal_match(np.array([0.0, 1.0, 5.0]), np.array([0.05, 0.9, 1.05]), caliper=0.2, seed=3)
    assert sorted(pairs) == [(0, 0), (1, 2)]  # 5.0 has nobody within 0.2
    assert optimal_match(np.array([0.0]), np.array([]), caliper=1.0) == []


def test_optimal_match_against_every_assignment():
    """On small random logits, the pairs are as many as the best of all one-to-one
    assignments within the caliper, and their total gap is the least among those."""
    from itertools import permutations

    rng = np.random.default_rng(7)
    for _ in range(30):
        ls, lh = rng.normal(size=4), rng.normal(size=5)
        best = (0, 0.0)
        for perm in permutations(range(5), 4):
            gaps = [abs(ls[i] - lh[j]) for i, j in enumerate(perm) if abs(ls[i] - lh[j]) <= 0.4]
            best = max(best, (len(gaps), -sum(gaps)))
        pairs = optimal_match(ls, lh, caliper=0.4, seed=1)
        assert len({i for i, _ in pairs}) == len({j for _, j in pairs}) == len(pairs)
        assert len(pairs) == best[0]
        assert np.isclose(sum(abs(ls[i] - lh[j]) for i, j in pairs), -best[1])


def test_cross_fitting_keeps_a_passage_from_scoring_its_own_label():
    """IID texts: a model fitted on every passage separates the labels it was fitted on
    (in-sample AUROC near 1); the cross-fitted propensities do not (near 0.5)."""
    from sklearn.linear_model import LogisticRegression

    from trainspotter.auditing.matching import Encoded, _design

    s, h = texts(150, 30, seed=1), texts(150, 30, seed=2)
    y = np.r_[np.ones(150), np.zeros(150)]
    every = np.arange(300)
    x, _ = _design(Encoded(s + h), every, every)
    in_sample = LogisticRegression(C=1.0, max_iter=2000).fit(x, y).decision_function(x)
    assert roc_auc_score(y, in_sample) > 0.95
    assert 0.35 < roc_auc_score(y, propensity_logits(s, h, seed=0)) < 0.65


def _sklearn_design(train: list[str], test: list[str], max_features: int = 50_000):
    """The design as it was written before ``Encoded`` (TfidfVectorizer fitted per fold)."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import StandardScaler

    from trainspotter.features.text import surface_stats

    blocks = ([], [])
    for kwargs in ({"analyzer": "word", "ngram_range": (1, 2)}, {"analyzer": "char_wb", "ngram_range": (3, 5)}):
        vec = TfidfVectorizer(sublinear_tf=True, min_df=2, max_features=max_features, **kwargs)
        blocks[0].append(vec.fit_transform(train))
        blocks[1].append(vec.transform(test))
    scaler = StandardScaler().fit(surface_stats(train))
    blocks[0].append(sparse.csr_matrix(scaler.transform(surface_stats(train))))
    blocks[1].append(sparse.csr_matrix(scaler.transform(surface_stats(test))))
    return sparse.hstack(blocks[0]).tocsr(), sparse.hstack(blocks[1]).tocsr()


def test_encoding_once_gives_the_design_a_tfidf_vectorizer_per_fold_gives(monkeypatch):
    """``Encoded`` counts every text once and weights per fold: the design matrices equal those of
    TfidfVectorizer fitted on the fold, also when max_features cuts the vocabulary (ties
    included), and matching a draw from a pool's encoding equals matching its texts."""
    import trainspotter.auditing.matching as matching
    from trainspotter.auditing.matching import Encoded, _design

    rng = random.Random(9)
    pool = [" ".join(rng.choice(VOCAB[:60]) for _ in range(rng.randint(3, 25))) + rng.choice([".", "!", ""])
            for _ in range(120)]
    enc = Encoded(pool)
    train, test = np.arange(0, 120, 3), np.setdiff1d(np.arange(120), np.arange(0, 120, 3))
    for cap in (50_000, 40):
        monkeypatch.setattr(matching, "MAX_FEATURES", cap)
        ours = _design(enc, train, test)
        theirs = _sklearn_design([pool[i] for i in train], [pool[i] for i in test], cap)
        assert cap > 40 or ours[0].shape[1] == 2 * 40 + 15  # the cut applied to both n-gram blocks
        for a, b in zip(ours, theirs):
            assert a.shape == b.shape
            np.testing.assert_allclose(a.toarray(), b.toarray(), atol=1e-12)
    monkeypatch.setattr(matching, "MAX_FEATURES", 50_000)
    draw = [5, 17, 3, 40, 41, 99, 60, 12, 77, 8, 30, 31, 90, 2, 65, 66, 20, 110]
    s, h = [pool[i] for i in draw[:9]], [pool[i] for i in draw[9:]]
    direct = match_pairs(s, h, seed=4)
    reused = match_pairs(s, h, seed=4, encoded=enc.rows(draw))
    assert direct.pairs == reused.pairs and np.isclose(direct.auroc, reused.auroc)


def test_iid_sets_lose_few_passages_to_matching():
    result = match_pairs(texts(150, 30, seed=3), texts(150, 30, seed=4), seed=0)
    assert result.matched >= 0.7 * 150 and result.dropped == 150 - result.matched
    assert len({i for i, _ in result.pairs}) == len({j for _, j in result.pairs}) == result.matched


def test_matching_balances_a_length_shift_the_blind_check_sees():
    """Suspect passages are all short; half the held-out passages are long. On the pairs as
    they come the blind check fires; matched, suspect passages meet short held-out ones and
    a fresh blind check on those pairs stays quiet (deterministic: no model is involved)."""
    suspect = texts(150, 20, seed=5)
    heldout = texts(150, 20, seed=6) + texts(150, 80, seed=7)
    random.Random(0).shuffle(heldout)
    config = TestConfig(alpha=0.05)
    assert blind_check(suspect, heldout[:150], config).fired
    result = match_pairs(suspect, heldout, seed=0)
    # the best any text-only model can do here is AUROC 0.75 (short passages are even odds)
    assert result.auroc > 0.65 and abs(result.smd_after) < 0.2 * abs(result.smd_before)
    assert result.matched >= 100
    assert sum(len(heldout[j].split()) == 20 for _, j in result.pairs) >= 0.95 * result.matched
    matched = blind_check([suspect[i] for i, _ in result.pairs], [heldout[j] for _, j in result.pairs], config)
    assert not matched.fired
