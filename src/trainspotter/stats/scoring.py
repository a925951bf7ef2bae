"""Online scoring models: aggregate membership features into one score.

BADI paper Sec. 3 ("Scoring Model for Feature Aggregation"), App. A.4 and A.7.
Labels: suspect = 1, held-out = 0, so a higher score (a logit) means "more
member-like". (The paper labels the other way round; only the sign changes.)

Three scorers, chosen by ``TestConfig.scorer`` (``SCORER_REGISTRY``):

* ``"paper"`` — :class:`AdamScorer`, the paper's protocol (A.4): a linear layer
  trained with binary cross-entropy and Adam (lr 0.01, 30 full-batch epochs over
  ALL past pairs per round, warm-started). Each round costs O(n·p·epochs).
* ``"online"`` — :class:`NewtonScorer`, the same logistic layer fitted from
  running sufficient statistics: one Newton (IRLS) step from θ = 0 on the
  ridge-penalised BCE of all past rows. Each round costs O(p³), independent of n,
  and its state does not grow with n.
* ``"fixed"`` — :class:`FixedScorer` (beyond the paper): no weights learned; each
  feature's catalogued member-like direction, scaled by its past pair differences
  (trainspotter.stats.fixed_scorer; the twins audit's default, issue 35).

Predictability (docs/architecture.md, "Statistics that must hold", 1): pair t is scored by
weights *and* normalisation statistics fitted on pairs 1..t−1 only; ``update`` absorbs pair
t afterwards.

Pre-processing (A.7, Eq. 6–9), applied per feature with statistics of the
past rows (both sides of all past pairs, so it is symmetric in X and Y):
z = (x − μ) / σ with the population σ (Eq. 7); values strictly beyond the
past 2.5% / 97.5% quantiles are replaced by the past mean (0 after
normalisation). The paper scorer reads exact order-statistic quantiles; the
online scorer keeps P² estimates of them (bounded memory).

Orientation (beyond the paper; ``signs``, see trainspotter.features.orientation): with
s ∈ {−1, 0, +1}^p the layer's weights are constrained to s_j w_j ≥ 0, so the score can
only grow in the member-like direction of every feature whose direction is known (s_j = 0:
learned freely). The fit is then the minimiser under these constraints
(trainspotter.stats.oriented_qp), and values beyond the trimming bounds are clipped to them
rather than replaced by the mean (a monotone map, which the one-sided argument in
trainspotter.stats.sequential needs).

Everything is vectorised with numpy over a leading batch axis of B independent
streams (Monte Carlo trials).
"""

from __future__ import annotations

from trainspotter.stats.adam_scorer import AdamScorer
from trainspotter.stats.fixed_scorer import FixedScorer
from trainspotter.stats.newton_scorer import NewtonScorer

__all__ = ["SCORERS", "SCORER_REGISTRY", "make_scorer", "scorer_from_dict"]

# The one list of scorers (name -> class): TestConfig's check and the CLI's --scorer choices derive from it.
SCORER_REGISTRY = {"online": NewtonScorer, "paper": AdamScorer, "fixed": FixedScorer}
SCORERS = tuple(SCORER_REGISTRY)


def make_scorer(kind: str, n_features: int, *, lr: float = 0.01, epochs: int = 30, ridge: float = 2.0,
                trim: float = 0.025, seed: int = 0, batch: int | None = None, signs=None):
    """Scorer by name: "online" (NewtonScorer), "paper" (AdamScorer, A.4 as published) or
    "fixed" (FixedScorer); ``signs``: the features' member-like directions (module docstring)."""
    if kind == "online":
        return NewtonScorer(n_features, ridge, trim, batch, signs)
    if kind == "paper":
        return AdamScorer(n_features, lr, epochs, trim, seed, batch, signs)
    if kind == "fixed":
        return FixedScorer(n_features, batch, signs)
    raise ValueError(f"unknown scorer {kind!r}; choose one of {', '.join(SCORERS)}")


def scorer_from_dict(d: dict):
    """Rebuild a saved scorer; states saved before "kind" existed are the paper scorer."""
    return SCORER_REGISTRY[d.get("kind", "paper")].from_dict(d)
