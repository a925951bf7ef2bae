"""What an audit found and how to read it: ``AuditResult``, its verdict's explanation,
and how the fixed-n DI p-value reads beside the e-value (the audit table's caption, the report)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, PrivateAttr

from trainspotter.stats.blind import BlindResult

if TYPE_CHECKING:
    from trainspotter.auditor import Auditor

__all__ = ["AuditResult", "BASELINE_CAPTION", "Verdict", "explain", "explain_baseline"]

Verdict = Literal["trained on", "no evidence", "inconclusive"]


class AuditResult(BaseModel):
    """What an audit found. ``e_value`` is W at the stopping time (the product of
    (1 + λ_t u_t) over every pair of the e-process, BADI Eq. for W_t, times ``wealth_start``
    for this run's pairs); ``p_value`` = 1 / max_s W_s is anytime-valid."""

    model_config = ConfigDict(extra="forbid")

    name: str
    verdict: Verdict  # "inconclusive" whenever the blind check fired (the sets differ without the model)
    reject: bool  # verdict == "trained on": the model's test rejected H0 and the blind check did not fire
    model_reject: bool  # the model's e-process reached 1/α (with or without the blind check)
    explanation: str  # what the verdict rests on and, if inconclusive, what to do
    blind: BlindResult  # the model-free e-process on every available pair
    e_value: float
    pairs_used: int  # pairs in the e-process so far (all runs of a recurring audit)
    pairs_this_run: int
    pairs_queried: int  # this run; can exceed pairs_this_run by the rest of the rejecting batch
    pairs_available: int
    stop_time: int | None
    stopped_by: Literal["rejected", "budget", "data", "shift"]  # shift: the blind check fired, nothing queried
    wealth_start: float  # W before this run (1 for a fresh audit)
    wealth: float
    max_wealth: float
    p_value: float
    alpha: float
    features: list[str]
    baseline_p_value: float | None  # fixed-n DI p-value, comparison only (BADI App. A.8)
    baseline_disagrees: bool  # it and the e-value are on two sides of α (baseline_note says why)
    baseline_note: str  # how to read it beside the e-value, and why they disagree when they do
    feature_weights: dict[str, float]  # scorer weights on normalised features (App. A.5)
    usage: dict[str, float] | None = None  # API backends only
    api: dict[str, dict] | None = None  # API backends only: "MODEL@URL" -> how it was queried (mode, ...)
    saved_by_stopping: dict[str, float] | None = None
    ledger: str | None = None  # path of the saved evidence ledger
    history: dict[str, list[float]]  # this run's steps t0+1..t: wealth, lambda, u, score_x, score_y
    _auditor: "Auditor | None" = PrivateAttr(None)  # set by Auditor.result; not serialised

    def features_table(self) -> pd.DataFrame:
        """The feature rows bet on in this run: id, set and the test's columns (empty for a
        result loaded from JSON)."""
        if self._auditor is None:
            return pd.DataFrame(columns=["id", "set", *self.features])
        return self._auditor.features()

    def wealth_path(self) -> list[float]:
        """W_1..W_t of the whole e-process, earlier runs of a recurring audit included
        (this run's part only for a result loaded from JSON)."""
        if self._auditor is None or self._auditor.test is None:
            return self.history["wealth"]
        return [float(w) for w in self._auditor.test.history["wealth"]]


# A black-box "no evidence" is weak evidence of absence (README, "What a black-box audit can see").
BLACK_BOX_CAVEAT = (
    " With greedy tokens only (black-box) this says little: a model changes its greedy token only "
    "where the true token was already close to the top, and text seen once in pre-training moved "
    "log-probabilities mostly elsewhere (measured on tiny-pretrain-2k: no black-box test decided "
    "within 2000 pairs where gray-box access did; text seen twice was found). Log-probabilities "
    "(--access gray), several reference models and more pairs are what help.")


def explain(verdict: str, blind: BlindResult, alpha: float, black_box: bool = False) -> str:
    """One paragraph: what the verdict rests on and, when inconclusive, what to do;
    ``black_box``: every feature came from greedy tokens (how little "no evidence" says then)."""
    if verdict == "trained on":
        return (f"The model's e-value reached 1/α = {1 / alpha:g}: evidence that the suspect set was "
                f"used to train the model. The blind check, which sees only the texts, could not tell "
                f"the sets apart (blind e-value {blind.e_value:.3g} after {blind.pairs_used} pairs), so "
                f"the evidence is about the model, not about how the sets were drawn.")
    if verdict == "no evidence":
        return (f"The model's e-value stayed below 1/α = {1 / alpha:g}: no evidence (yet) that the suspect "
                f"set was trained on. More pairs, a reference model or the full feature set may still "
                f"find it; the e-process can be continued (--name NAME --ledger)."
                + (BLACK_BOX_CAVEAT if black_box else ""))
    what = "; ".join(blind.differences) or "no single statistic stands out"
    return (f"Inconclusive: the held-out set differs from the suspect set. A check that sees only the "
            f"texts tells them apart (blind e-value {blind.e_value:.3g} ≥ 1/α = {1 / blind.alpha:g} after "
            f"{blind.pairs_used} pairs), so they are not exchangeable and a model's test would find a "
            f"difference whether or not the model was trained on the suspect set. What to do: draw the "
            f"held-out passages from the same source and period as the suspect ones, with the same "
            f"topics, lengths and formatting (ideally a random part of the same collection that was "
            f"never published); bring a reference model trained on similar data and audit with "
            f"--features calibrated; then audit again. What differs: {what}.")


# What the two numbers use and which one decides: the audit table's caption, the report.
BASELINE_CAPTION = (
    "The decision rests on the e-value: reject H0 once it reaches 1/α (anytime-valid p = 1/max W), "
    "valid wherever the audit stopped. The fixed-n DI p-value (Maini et al., BADI App. A.8) is a "
    "comparison only: it trains a classifier on half of the same pairs and t-tests the other half, "
    "and holds only for a number of pairs fixed in advance, not one the e-process chose; with few "
    "pairs the two can disagree.")


def explain_baseline(model_reject: bool, e_value: float, alpha: float, baseline: float | None,
                     pairs: int) -> str:
    """How to read this audit's fixed-n DI p-value beside its e-value, and, where they
    disagree at α, why; the decision rests on the e-value either way."""
    threshold = f"1/α = {1 / alpha:g}"
    if baseline is None:
        return (f"The decision rests on the e-value ({e_value:.3g}, against {threshold}); the fixed-n DI "
                f"p-value needs at least 4 pairs and {pairs} were tested.")
    head = (f"The decision rests on the e-value ({e_value:.3g} {'≥' if model_reject else '<'} {threshold}). "
            f"The fixed-n DI p-value ({baseline:.3g}) is a comparison only: it fits a classifier on half of "
            f"these {pairs} pairs and t-tests the other half, while the e-process bet on every pair with a "
            f"scorer fitted on the pairs before it and chose when to stop.")
    if model_reject and baseline > alpha:
        return head + (" They disagree: the audit stopped as soon as the evidence sufficed, and on so few "
                       "pairs the half-split test has little power; its p-value above α is not evidence "
                       "against training, and the e-value's guarantee holds at this stopping time.")
    if not model_reject and baseline <= alpha:
        return head + (" They disagree: a fixed-n p-value is valid only for a sample size fixed before "
                       "looking at the data, which this one was not, so it is no evidence on its own; "
                       "continue the audit on more pairs (--name NAME --ledger) or fix n in advance.")
    return head + " Here they agree."
