"""What an audit found: ``AuditResult``, the verdict the guards allow (``decide``) and the results
of the guards beside the model's test (``PlaceboResult``; the blind check's is
``stats.blind.BlindResult``, matching's ``auditing.matching.MatchResult``). How to read a verdict
is ``auditing.explain``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from trainspotter.auditing.matching import MatchResult
from trainspotter.stats.blind import BlindResult
from trainspotter.twins.draw import DrawProof

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AuditResult", "Evidence", "Guard", "PlaceboResult", "Verdict", "decide", "format_e", "matched_verdict",
           "unmatched", "with_match"]

Verdict = Literal["trained on", "no evidence", "inconclusive"]
# Which guard made a rejection "inconclusive": the blind check (texts alone), the placebo check
# (a model that saw neither set), or, without a placebo model, an audit too small for the blind
# check to rule out a shift; of twins, a draw not shown random (``twins.draw``).
Guard = Literal["blind", "placebo", "small", "overlap", "draw"]  # overlap: too few matched pairs (matching)


class PlaceboResult(BaseModel):
    """What the placebo check found: the audit's test on a model that saw neither set."""

    ran: bool  # False: no reference model, or the model's test did not reject (nothing to guard)
    model: str | None = None  # the placebo model's spec
    fired: bool = False  # its W reached 1/α: a model that never trained on the set tells the sets apart
    e_value: float = 1.0
    max_wealth: float = 1.0
    p_value: float = 1.0
    pairs_used: int = 0
    pairs_available: int = 0
    stop_time: int | None = None
    alpha: float = 0.05
    features: list[str] = []
    wealth: list[float] = Field([], repr=False)
    _rows: list[dict] = PrivateAttr(default_factory=list)  # the rows bet on (the sealed record keeps them)


class Evidence(Protocol):
    """What a result keeps of the test that made it (an ``auditing.auditor.Auditor``): the rows bet
    on, each pair's round, the e-process (``stats.sequential.SequentialTest``) and this run's steps."""

    rows: list[dict]
    round_of: list[int]
    test: object | None

    @property
    def history(self) -> dict[str, list[float]]: ...

    def features(self) -> pd.DataFrame: ...


def decide(model_reject: bool, evidence: bool, blind: BlindResult, placebo: PlaceboResult,
           unguarded_min_pairs: int = 0, draw: str | None = None) -> tuple[Verdict, Guard | None]:
    """The verdict and the guard that stands in the way of "trained on" (None: none).
    ``evidence``: the model's e-value reached the guards' 1/α (for one audit, the same as
    ``model_reject``; for one of K suspect sets, what e-BH may reject on). The blind check makes
    the verdict inconclusive whatever the model says (the sets are not exchangeable), and so does,
    before it, a twins draw that ``failed`` to re-derive (``draw``; the public versions may have
    been chosen);
    the placebo check, a twins draw ``unproven`` random (which a choice by a model's preference
    passes, measured: ``benchmarks/results/framing.md``), and without a placebo model an audit of
    fewer than ``unguarded_min_pairs`` available pairs stand in the way only of evidence. None of
    them reads the model's evidence, so each can only turn a rejection into "inconclusive", never
    the other way."""
    guard: Guard | None = None
    if draw == "failed":  # evidence of tampering, said first: more specific than what the texts show
        guard = "draw"
    elif blind.fired:
        guard = "blind"
    elif evidence and placebo.fired:
        guard = "placebo"
    elif evidence and draw == "unproven":
        guard = "draw"
    elif evidence and placebo.model is None and blind.pairs_available < unguarded_min_pairs:
        guard = "small"
    if guard == "blind" or draw == "failed" or (model_reject and guard):
        return "inconclusive", guard
    return ("trained on" if model_reject else "no evidence"), guard


def format_e(e: float, alpha: float) -> str:
    """An e-value for people: 3 significant digits, more where rounding would land on or across
    the threshold 1/α (20.019 at α = 0.05 prints as 20.02, not 20; 19.996 as 19.996)."""
    threshold = 1 / alpha
    for digits in range(3, 12):
        text = f"{e:.{digits}g}"
        shown = float(text)
        if (shown >= threshold) == (e >= threshold) and (shown != threshold or e == threshold):
            return text
    return repr(e)


class AuditResult(BaseModel):
    """What an audit found. ``e_value`` is W at the stopping time (the product of
    (1 + λ_t u_t) over every pair of the e-process, BADI Eq. for W_t, times ``wealth_start``
    for this run's pairs); ``p_value`` = 1 / max_s W_s is anytime-valid."""

    model_config = ConfigDict(extra="forbid")

    name: str
    verdict: Verdict  # "inconclusive" whenever a guard fired (``guard``: which)
    reject: bool  # verdict == "trained on": the model's test rejected H0 and no guard fired
    model_reject: bool  # the model's e-process reached 1/α (with or without the blind check)
    explanation: str  # what the verdict rests on and, if inconclusive, what to do
    blind: BlindResult  # the model-free e-process on every available pair
    placebo: PlaceboResult = PlaceboResult(ran=False)  # the same test on a model that saw neither set
    match: MatchResult | None = None  # --shift-check match: how the pairs were matched
    draw: DrawProof | None = None  # twins: what the folder shows of its draw (trainspotter.twins.draw)
    guard: Guard | None = None  # the guard in the way of "trained on" (``decide``)
    e_value: float
    pairs_used: int  # pairs in the e-process so far (all runs of a recurring audit)
    pairs_this_run: int
    pairs_queried: int  # this run; can exceed pairs_this_run by the rest of the rejecting batch
    # a twins audit of every private variant (``twins_private`` "all"): its pairs are rounds of sub-pairs
    # (one passage each) and this run sent the model this many texts (``twins.rounds.batch_queries``)
    texts_queried: int | None = None
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
    usage: dict[str, float | str] | None = None  # API backends only (UsageMeter.report)
    api: dict[str, dict] | None = None  # API backends only: "MODEL@URL" -> how it was queried (mode, ...)
    saved_by_stopping: dict[str, float] | None = None
    ledger: str | None = None  # path of the saved evidence ledger
    history: dict[str, list[float]]  # this run's steps t0+1..t: wealth, lambda, u, score_x, score_y
    record_digest: str | None = None  # sha256 of the sealed audit record (trainspotter.record)
    _auditor: Evidence | None = PrivateAttr(None)  # set by Auditor.result; not serialised
    _record: dict | None = PrivateAttr(None)  # set by trainspotter.record.seal; not serialised

    @property
    def record(self) -> dict | None:
        """The sealed audit record (``trainspotter.record``; check it with ``trainspotter verify``)."""
        return self._record

    def features_table(self) -> pd.DataFrame:
        """The feature rows bet on in this run: id, set and the test's columns (empty for a
        result loaded from JSON)."""
        if self._auditor is None:
            import pandas as pd

            return pd.DataFrame(columns=["id", "set", *self.features])
        return self._auditor.features()

    def wealth_path(self) -> list[float]:
        """W_1..W_t of the whole e-process, earlier runs of a recurring audit included
        (this run's part only for a result loaded from JSON)."""
        if self._auditor is None or self._auditor.test is None:
            return self.history["wealth"]
        return [float(w) for w in self._auditor.test.history["wealth"]]


def matched_verdict(verdict: Verdict, guard: Guard | None, matched: int, needed: int) -> tuple[Verdict, Guard | None]:
    """A matched audit's verdict from ``decide``'s: fewer matched pairs than ``needed`` to ever reach
    1/α make it inconclusive ("overlap") unless the blind check did (audit and shift suite use it)."""
    return ("inconclusive", "overlap") if matched < needed and guard != "blind" else (verdict, guard)


def unmatched(result: AuditResult) -> AuditResult:
    """The result of ``--shift-check match`` where the blind check saw no difference between the
    sets: the ordinary audit ran on every pair, and its explanation says why nothing was matched."""
    return result.model_copy(update={"explanation": (
        f"Nothing was matched: the blind check saw no difference between the sets (e = "
        f"{result.blind.e_value:.3g} on all {result.blind.pairs_available} pairs), so the audit ran on every "
        f"pair, as without --shift-check match. {result.explanation}")})


def with_match(result: AuditResult, match: MatchResult, needed: int, alpha: float,
               start: float | None = None) -> AuditResult:
    """The result of a matched audit: its explanation says what it rests on, and an audit whose
    matched pairs are too few (``needed``: the fewest pairs that can reach 1/α) is inconclusive
    ("overlap"), not "no evidence". ``start``: a continued ledger's stored wealth (``needed`` counts
    from it; such a run queried nothing and left the ledger's wealth as it was)."""
    update = {"match": match, "explanation": f"{match.describe()} {result.explanation}"}
    if matched_verdict(result.verdict, result.guard, match.matched, needed)[1] == "overlap":
        passages = f"{match.suspect_total} suspect passages" + (" not bet on before" if start is not None else "")
        reach = (f"the test needs at least {needed} pairs to ever reach 1/α = {1 / alpha:g}" if start is None else
                 f"from the stored e-value {start:.3g} the test needs at least {needed} more pairs to reach "
                 f"1/α = {1 / alpha:g}, so this run queried nothing and left the ledger's e-value as it was; the "
                 f"passages not bet on stay unused, for a later run given them again with new ones")
        update |= {"verdict": "inconclusive", "reject": False, "guard": "overlap", "explanation": (
            f"Inconclusive: only {match.matched} of {passages} have a held-out passage of the same text-only "
            f"propensity, and {reach}. Find held-out text closer to the suspect set (the same "
            f"source and period); for data not yet released, twins (`trainspotter twins make`) avoid the problem.")}
    return result.model_copy(update=update)
