"""The fixed-direction scorer ("fixed"): every feature's member-like direction is known in
advance, so nothing is learned but each feature's scale (beyond the paper; issue 35).

    score(r) = Σ_j s_j r_j / (c · p_s · σ_j),   σ_j² = (1/(t−1)) Σ_{i<t} (X_ij − Y_ij)²,

s_j ∈ {−1, 0, +1} the catalogued direction of feature j (trainspotter.features.orientation;
0: not used), p_s the number of features with s_j ≠ 0, σ_j the root mean square of feature j's
past pair differences (scores are 0 before the first pair, and a feature whose past
differences are all 0 has weight 0), c = ``SPREAD``. With the ``diff`` payoff the round's
payoff is u_t = tanh(score(X_t) − score(Y_t)) = tanh(mean_j s_j z_tj / c), z_tj = (X_tj −
Y_tj)/σ_j: a standardised, oriented mean of the pair's differences, bet on in the direction
fixed before any data.

Why. A twins pair differs in a few words, so each pair carries little evidence (on
tiny-pretrain-twins the best linear combination of the `twins` set's differences has a mean
of 0.19 of its standard deviation, in-sample). The online scorer must learn a direction among
p features from that signal, and its noisy early weights cost hundreds of pairs: with the
directions given by the catalogue the same features decide in ~1.5–2.5× fewer pairs
(benchmarks/results/twins/twins.md). ``SPREAD`` = 2 was chosen on those twins: c from 1.5 to 3
moved the mean pairs to decision by at most 6% on `calibrated` and the `twins` set, 11% on
`gray_ref_diff` alone.

Validity. The weights s_j/σ_j use pairs < t only (predictable), so under H0 of exchangeable
pairs (X_t, Y_t) =_d (Y_t, X_t) given the past, the difference of scores flips sign with the
pair, u_t is symmetric about 0 and E[u_t | F_{t−1}] = 0: the wealth is a test martingale
(BADI Sec. 4). The score is non-decreasing in each used feature's member-like direction, so
the one-sided argument of trainspotter.stats.sequential (a polluted held-out set costs power,
not validity) holds as for the oriented online scorer.
"""

from __future__ import annotations

import numpy as np

from trainspotter.stats.oriented_qp import check_signs

__all__ = ["FixedScorer"]


class FixedScorer:
    """score(r) = Σ_j s_j r_j / (c p_s σ_j) with σ_j from past pair differences (module docstring);
    the same shapes and methods as :class:`trainspotter.stats.newton_scorer.NewtonScorer`."""

    kind = "fixed"
    SPREAD = 2.0  # c: u = tanh(mean standardised difference / c)

    def __init__(self, n_features: int, batch: int | None = None, signs=None):
        if n_features < 1:
            raise ValueError("n_features must be ≥ 1")
        self.p, self.batch = int(n_features), batch
        self.signs = check_signs(signs, self.p)
        if self.signs is None:
            raise ValueError("the fixed scorer bets in the features' known member-like directions: it needs "
                             "catalogued features and an oriented test")
        B = 1 if batch is None else batch
        self.n_pairs = 0
        self.d2 = np.zeros((B, self.p))  # Σ_{i<t} (X_ij − Y_ij)²

    @property
    def w(self) -> np.ndarray:
        """Weights of the standardised differences z_j = d_j/σ_j: s_j/(c p_s) where σ_j > 0."""
        known = self.d2 > 1e-24
        return np.where(known, self.signs / (self.SPREAD * np.count_nonzero(self.signs)), 0.0)

    @property
    def phi(self) -> np.ndarray:
        """Weights in raw units: w_j / σ_j (0 before the first pair)."""
        sd = np.sqrt(self.d2 / max(self.n_pairs, 1))
        return np.divide(self.w, sd, out=np.zeros_like(sd), where=sd > 1e-12)

    @property
    def theta(self) -> np.ndarray:
        """[w, b] as the other scorers report it (weights of the standardised features, bias 0)."""
        return np.concatenate([self.w, np.zeros((self.w.shape[0], 1))], axis=1)

    def score(self, x):
        """φ·r for rows x: (p,) → float, (m, p) → (m,); batch (B, p) → (B,), (B, m, p) → (B, m)."""
        a = np.asarray(x, dtype=float)
        B = 1 if self.batch is None else self.batch
        s = np.einsum("bmp,bp->bm", a.reshape(B, -1, self.p), self.phi)
        if self.batch is None:
            return float(s[0, 0]) if a.ndim == 1 else s[0]
        return s[:, 0] if a.ndim == 2 else s

    def update(self, x, y) -> None:
        """Absorb pair (x suspect, y held-out): its squared differences join σ's sums."""
        B = 1 if self.batch is None else self.batch
        d = np.asarray(x, dtype=float).reshape(B, self.p) - np.asarray(y, dtype=float).reshape(B, self.p)
        self.d2 = self.d2 + d * d
        self.n_pairs += 1

    def to_dict(self) -> dict:
        return {"kind": self.kind, "n_features": self.p, "batch": self.batch, "signs": self.signs.tolist(),
                "n_pairs": self.n_pairs, "d2": self.d2.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "FixedScorer":
        obj = cls(d["n_features"], d["batch"], d["signs"])
        obj.n_pairs, obj.d2 = int(d["n_pairs"]), np.asarray(d["d2"], dtype=float)
        return obj
