"""The audit as a library call: pairs → features in small batches → online scoring and
betting → stop as soon as W_t ≥ 1/α (BADI Sec. 4, App. C) → an ``AuditResult``.

    from trainspotter import audit, AuditConfig
    result = audit(AuditConfig(suspect="s.jsonl", heldout="h.jsonl", model="hf:/models/m"))

No Prefect or MLflow here: the audit flow (flows/audit.py) passes a cached feature
extractor as ``extract_fn`` and logs every batch to MLflow through ``on_batch``. The
settings are ``trainspotter.auditing.config``; the test fed batch by batch,
``trainspotter.auditing.auditor``; the result and how to read it, ``trainspotter.auditing.verdict``;
the inputs, ``trainspotter.loop.inputs``; several suspect sets under one FDR level,
``trainspotter.loop.sets``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping

from trainspotter.auditing.auditor import Auditor, UsageMeter, blind_on
from trainspotter.auditing.config import AuditConfig, ExtractFn
from trainspotter.auditing.placebo import run_placebo
from trainspotter.auditing.verdict import AuditResult, PlaceboResult, unmatched, with_match
from trainspotter.data import Passage
from trainspotter.errors import BudgetExhausted, InputError
from trainspotter.loop.inputs import Checked, check_inputs, draw_of, model_extract, read_sides
from trainspotter.loop.ledger import (as_stored, check_setup, ledger_lock, load_ledger, new_ledger, record_run,
                                      save_ledger, setup_of, sweep_temps, unused_passages, with_ledger)
from trainspotter.loop.matched_ledger import continue_matching, match_sides, pairs_to_reach
from trainspotter.record.seal import prior_of, seal
from trainspotter.stats.blind import BlindResult
from trainspotter.stats.sequential import SequentialTest, min_pairs_to_reject
from trainspotter.twins.draw import DrawProof
from trainspotter.twins.rounds import audit_guard_pairs, audit_rounds, batch_queries

__all__ = ["Guards", "audit"]

log = logging.getLogger(__name__)


def audit(config: AuditConfig | None = None, /, *, extract_fn: ExtractFn | None = None,
          on_batch: Callable[[Auditor], None] | None = None, run_id: str | None = None,
          passages: Mapping[str, list[Passage]] | None = None, placebo_fn: ExtractFn | None = None,
          **settings) -> AuditResult:
    """Run one sequential audit, or continue the stored one when ``config.ledger``.

    ``config`` or AuditConfig keyword settings. ``extract_fn(passages, batch_no)`` returns
    one feature row per passage (default: ``model_extract(config)``); each batch passes
    its suspect passages, then its held-out ones. ``on_batch(auditor)`` runs after every
    batch. ``run_id`` names this run in the ledger (default: a fresh uuid). ``passages``:
    files already read, by path (``read_passages``; the rest are read here).
    ``placebo_fn``: ``extract_fn`` of the placebo audit (``config.placebo_config``; default:
    ``model_extract`` of it), run on every available pair once the model's test rejects. Stops at
    rejection, when a query budget runs out (BudgetExhausted) or at the end of the data.
    A continued audit holds the ledger's file lock from load to save, so overlapping runs
    of one audit name take turns and never bet on the same state or pairs twice. The inputs are
    checked here (``check_inputs``) unless ``passages`` were checked for this config already
    (``loop.inputs.Checked``)."""
    if config is None:
        config = AuditConfig(**settings)
    elif settings:
        raise TypeError("pass either an AuditConfig or keyword settings, not both")
    checked = isinstance(passages, Checked) and passages.has_checked(config)
    config = with_ledger(config)  # (a continued audit: as stored where not chosen, e.g. which private twins)
    extract_fn = extract_fn or model_extract(config)
    suspect, heldout = read_sides(config, passages)
    if not checked:
        check_inputs(config, suspect, heldout)
    draw = draw_of(config)  # twins: what the folder shows of its draw, before any query
    if config.ledger:
        return _continue(config, suspect, heldout, extract_fn, on_batch, run_id, placebo_fn, draw)
    match, blind = None, None
    if config.shift_check == "match":
        # Matching only where the blind check sees the sets differ: where it does not, the ordinary
        # audit runs on every pair, so a matched audit never answers less than the default does.
        plain = config.model_copy(update={"shift_check": "stop"})
        blind = _blind(audit_guard_pairs(plain, suspect, heldout), plain)
        if blind.fired:  # from here on the sides are the matched pairs, aligned
            suspect, heldout, match = match_sides(config, suspect, heldout, blind)
            blind = None  # the matched pairs get a blind check of their own
        else:
            config = plain
    # The blind check sees every available pair, in the audit's pair order, before any query;
    # it never sees model evidence.
    every = audit_guard_pairs(config, suspect, heldout)  # twins "all": the drawn private variant's (twins.rounds)
    guards = Guards(blind if blind is not None else _blind(every, config), every[:config.max_pairs], placebo_fn, draw)
    if match is not None and match.matched < min_pairs_to_reject(config.test):  # cannot reach 1/α: no query
        result = Auditor(config.test).result(guards.blind, config.name, "shift", len(every), config.seed)
    else:
        result = _run(config, Auditor(config.test), suspect, heldout, extract_fn, on_batch, guards)
    if match is not None:
        result = with_match(result, match, min_pairs_to_reject(config.test), config.test.alpha)
    elif blind is not None:
        result = unmatched(result)
    return seal(result, config, suspect, heldout, run_id=run_id)


def _continue(config: AuditConfig, suspect: list[Passage], heldout: list[Passage], extract_fn: ExtractFn,
              on_batch: Callable[[Auditor], None] | None, run_id: str | None,
              placebo_fn: ExtractFn | None, draw: DrawProof | None) -> AuditResult:
    """``audit`` continuing the stored e-process of ``config.name`` on pairs never bet on before,
    holding the ledger's lock from load to save. The guards see every available pair (of a matched
    audit: every matched pair of the e-process, ``trainspotter.loop.matched_ledger``), in the audit's
    pair order, before any query."""
    with ledger_lock(config.name):
        sweep_temps(config.name)  # left by a run killed mid-save
        ledger = load_ledger(config.name) or new_ledger(config.name, setup_of(config))
        config = as_stored(config, ledger["setup"])
        check_setup(ledger, setup_of(config))
        state = SequentialTest.from_dict(ledger["state"]) if ledger["state"] is not None else None
        auditor = Auditor(config.test, state, ledger["columns"] if state is not None else None)
        available, match = (suspect, heldout), None  # available: for the sealed record
        unused_sides = unused_passages(config, suspect, heldout, ledger)  # only these may enter the e-process
        if config.shift_check == "match":  # matched on their texts alone (matched_ledger: why that is valid)
            unused_sides, match, available = continue_matching(config, unused_sides, available, ledger, auditor.t0)
        every = audit_guard_pairs(config, *available)
        guards = Guards(_blind(every, config), every, placebo_fn, draw)
        needed = 0 if auditor.rejected else pairs_to_reach(auditor.w0, config.test)
        if match is not None and match.matched < needed:  # cannot reach 1/α this run: no query, wealth unchanged
            result = auditor.result(guards.blind, config.name, "shift", auditor.t0 + match.matched, config.seed)
        else:
            result = _run(config, auditor, *unused_sides, extract_fn, on_batch, guards)
        if match is not None:
            result = with_match(result, match, needed, config.test.alpha, auditor.w0 if state is not None else None)
        result = seal(result, config, *available, prior_of(ledger), run_id)
        record_run(ledger, config, auditor, result, run_id or uuid.uuid4().hex)
        return result.model_copy(update={"ledger": str(save_ledger(ledger))})


def _blind(pairs: list[tuple[Passage, Passage]], config: AuditConfig) -> BlindResult:
    """The blind check on the audit's available pairs (``blind_on``), said when it fires."""
    blind = blind_on(pairs, config)
    if blind.fired:
        log.warning("blind check fired (e = %.3g after %d pairs): the held-out set differs from the "
                    "suspect set", blind.e_value, blind.pairs_used)
    return blind


class Guards:
    """What the audit's guards need: the blind check's result, every available pair (the
    placebo check's), the placebo audit's extractor (None: the library default) and, of twins,
    what the folder shows of its draw."""

    def __init__(self, blind: BlindResult, pairs: list[tuple[Passage, Passage]], placebo_fn: ExtractFn | None,
                 draw: DrawProof | None = None):
        self.blind, self.pairs, self.placebo_fn, self.draw = blind, pairs, placebo_fn, draw

    def placebo(self, config: AuditConfig, evidence: bool) -> PlaceboResult:
        """The placebo check, run when it can change the verdict: the model's e-value reached
        the guards' 1/α (``Auditor.evidence``)."""
        placebo = config.placebo_config
        if placebo is None:
            return PlaceboResult(ran=False, alpha=config.blind_test.alpha)
        if not evidence:
            return PlaceboResult(ran=False, model=placebo.model.text, alpha=config.blind_test.alpha)
        result = run_placebo(placebo.model.text, self.pairs, self.placebo_fn or model_extract(placebo),
                             config.blind_test, config.batch_pairs)
        log.info("placebo check (%s): e = %.3g after %d pairs%s", placebo.model.text, result.e_value,
                 result.pairs_used, ", fired" if result.fired else "")
        return result


def _run(config: AuditConfig, auditor: Auditor, suspect: list[Passage], heldout: list[Passage],
         extract_fn: ExtractFn, on_batch: Callable[[Auditor], None] | None, guards: Guards) -> AuditResult:
    rounds = audit_rounds(config, suspect, heldout)  # one pair each, or twins "all": the passage's sub-pairs
    blind = guards.blind
    if blind.fired and config.shift_check != "continue":  # (matched: the blind check on the matched pairs)
        return auditor.result(blind, config.name, "shift", auditor.t0 + len(rounds), config.seed,
                              twins=config.twins is not None, references=len(config.reference), draw=guards.draw)
    meter = UsageMeter([config.model, *config.reference, config.placebo])
    stopped_by, texts = "data", 0
    for batch_no, start in enumerate(range(0, len(rounds), config.batch_pairs)):
        if auditor.rejected:
            break  # evidence reached 1/α: stop querying
        batch = rounds[start:start + config.batch_pairs]
        passages, where, sizes = batch_queries(batch, config.every_private, config.features.twin_positions)
        try:
            rows = extract_fn(passages, batch_no)
        except BudgetExhausted as e:
            stopped_by = "budget"
            log.warning("query budget reached after %d pairs: %s", auditor.pairs_queried, e)
            break
        if len(rows) != len(passages):
            raise InputError(f"extract_fn returned {len(rows)} rows for {len(passages)} passages")
        texts += len(passages)
        sides = ["suspect"] * (len(where) // 2) + ["heldout"] * (len(where) // 2)
        auditor.feed([dict(rows[n], id=passages[n]["id"], set=s) for n, s in zip(where, sides)], sizes)
        log.info("pairs %d, wealth %.3g", auditor.test.t, auditor.test.wealth)
        if on_batch is not None:
            on_batch(auditor)
    if auditor.test is None:
        raise InputError(f"audit {config.name!r}: no pairs to test" if stopped_by == "data" else
                         f"audit {config.name!r}: the query budget ran out before the first pair")
    placebo = guards.placebo(config, auditor.evidence(config.blind_test.alpha))
    return auditor.result(
        blind, config.name, "rejected" if auditor.rejected else stopped_by, auditor.t0 + len(rounds), config.seed,
        placebo=placebo, unguarded_min_pairs=config.unguarded_min_pairs, twins=config.twins is not None,
        references=len(config.reference), pairs_beyond=min(len(suspect), len(heldout)) - len(rounds),
        draw=guards.draw, vouched=config.assume_exchangeable,
        **({"texts_queried": texts} if config.every_private else {}),
        **meter.report(auditor.pairs_queried, len(rounds) - auditor.pairs_queried))
