"""A matched audit's pairs (``shift_check="match"``, ``trainspotter.auditing.matching``), fresh or continuing
its ledger (``ledger=True``: a recurring matched audit, issue 36).

A continued run matches only the passages its ledger never bet on. ``ledger.record_run`` appends
to the ledger's ``used`` lists the ids of every pair an e-process bet on, suspect and held-out side
in the same order; a matched run bets on whole pairs, so the two lists read side by side are the
matched pairs of earlier runs. The propensity is cross-fitted exactly as in a single matched audit,
on the texts of the unused passages alone. Passages that a run's matching dropped, or matched but
never bet on (the audit stopped first, or the run queried nothing), stay unused: a later run,
given them again, offers them to its own matching.

Why the continued e-process stays valid (BADI Sec. 4, App. C.2; docs/architecture.md): continuing
multiplies new payoffs onto the stored wealth, and W_t stays a test supermartingale as long as
each new pair is fixed before anything of the model's answers on it is seen. Matching never looks
at the model: it reads the texts, which side each came from and the seed. Which passages remain
to match depends on earlier runs (and so on earlier answers) only through the pairs already bet
on, whose payoffs the stored wealth has already counted. So every pair of a continued run is chosen
before any answer on it exists, and under the matched audit's assumption (given what a text-only
model sees, the two passages of a pair are exchangeable under H0) its payoff has conditional
expectation at most 1 given the past, as any pair of a single matched audit has.

Guards, per run as in a single matched audit: the blind check before matching (kept for the
record), the blind check on the matched pairs and the placebo check, both on every matched pair of
the e-process that this run was given (earlier runs' pairs bet on, then this run's), as an ordinary
continued audit checks every available pair. A run whose new matched pairs cannot lift the stored
wealth to 1/α even if every bet won queries nothing and leaves the ledger's wealth as it was
(``audit``; guard "overlap").
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, NamedTuple

from trainspotter.auditing.auditor import blind_on
from trainspotter.auditing.matching import MatchResult, match_pairs
from trainspotter.data import Passage, make_pairs
from trainspotter.stats.blind import BlindResult

if TYPE_CHECKING:
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.stats.sequential import TestConfig

__all__ = ["MatchedRun", "continue_matching", "earlier_pairs", "match_sides", "pairs_to_reach"]

log = logging.getLogger(__name__)

Sides = tuple[list[Passage], list[Passage]]


def match_sides(config: "AuditConfig", suspect: list[Passage], heldout: list[Passage],
                blind: BlindResult | None = None, pairs_before: int = 0) -> tuple[list[Passage], list[Passage], MatchResult]:
    """The matched pairs' sides, aligned (``trainspotter.auditing.matching``), and how they were matched;
    the blind check on the pairs as drawn before matching (``blind``: already run; else run here)
    is kept for the record. ``pairs_before``: a continued ledger's matched pairs of earlier runs
    (said in the explanation)."""
    blind = blind if blind is not None else blind_on(make_pairs(suspect, heldout, seed=config.seed), config)
    match = match_pairs(*([p["text"] for p in side] for side in (suspect, heldout)), config.seed,
                        text_features=config.text_features)
    match.blind_e_value, match.pairs_before = blind.e_value, pairs_before
    log.info("matching: %d of %d suspect passages matched (AUROC %s; blind e = %.3g before matching)",
             match.matched, match.suspect_total, "-" if match.auroc is None else f"{match.auroc:.2f}", blind.e_value)
    return [suspect[i] for i, _ in match.pairs], [heldout[j] for _, j in match.pairs], match


def earlier_pairs(used: dict[str, list[str]], suspect: list[Passage], heldout: list[Passage]) -> Sides:
    """The matched pairs that earlier runs bet on (``used``: the ledger's ids by side, read side by
    side), aligned, in the order they were bet on: those whose two passages this run was given."""
    by_id = [{p["id"]: p for p in side} for side in (suspect, heldout)]
    pairs = [(by_id[0][s], by_id[1][h]) for s, h in zip(used["suspect"], used["heldout"])
             if s in by_id[0] and h in by_id[1]]
    return [x for x, _ in pairs], [y for _, y in pairs]


class MatchedRun(NamedTuple):
    """A continued matched run: this run's matched pairs (``sides``, aligned), how they were matched,
    and every matched pair of the e-process it was given (``available``: earlier pairs, then these)."""

    sides: Sides
    match: MatchResult
    available: Sides


def continue_matching(config: "AuditConfig", unused: Sides, given: Sides, ledger: dict, pairs_before: int
                      ) -> MatchedRun:
    """Match the passages the ledger never bet on (``unused``: ``ledger.unused_passages`` of ``given``,
    every passage this run was given) on their texts alone (module docstring: why this keeps the
    continued e-process valid)."""
    suspect, heldout, match = match_sides(config, *unused, pairs_before=pairs_before)
    old = earlier_pairs(ledger["used"], *given)
    return MatchedRun((suspect, heldout), match, (old[0] + suspect, old[1] + heldout))


def pairs_to_reach(wealth: float, test: "TestConfig") -> int:
    """The fewest pairs that can lift ``wealth`` to 1/α: each multiplies it by at most 1 + λ_max
    (``stats.sequential.min_pairs_to_reject`` from W = 1); 0 once it is there."""
    if wealth * test.alpha >= 1:
        return 0
    return math.ceil(math.log(1 / (test.alpha * wealth)) / math.log1p(test.lambda_max) - 1e-12)
