"""The audit as a library call: pairs → features in small batches → online scoring and
betting → stop as soon as W_t ≥ 1/α (BADI Sec. 4, App. C) → an ``AuditResult``.

    from trainspotter import audit, AuditConfig
    result = audit(AuditConfig(suspect="s.jsonl", heldout="h.jsonl", model="hf:/models/m"))

No Prefect or MLflow here: the audit flow (flows/audit.py) passes a cached feature
extractor as ``extract_fn`` and logs every batch to MLflow through ``on_batch``. The
test fed batch by batch is ``trainspotter.auditor``; the result and how to read it,
``trainspotter.verdict``; several suspect sets under one FDR level, ``trainspotter.multi``.

Note: ``trainspotter.audit`` is the *function* (the package keeps it that way); import
names from this module with ``from trainspotter.audit import Auditor, TEST_PRESETS``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from trainspotter.auditor import HISTORY, Auditor, UsageMeter, baseline_p_value, blind_on
from trainspotter.backends.spec import References, Spec
from trainspotter.data import Passage, check_disjoint, load_passages
from trainspotter.errors import BudgetExhausted, FieldError, InputError
from trainspotter.features.features import FEATURE_SETS, FeatureConfig, check_references
from trainspotter.ledger import (as_stored, check_setup, ledger_lock, load_ledger, new_ledger, record_run,
                                 save_ledger, setup_of, sweep_temps, unused_passages, with_ledger)
from trainspotter.matched_ledger import continue_matching, match_sides, pairs_to_reach
from trainspotter.placebo import PlaceboResult, placebo_features, run_placebo
from trainspotter.presets import (DEFAULT_PRESET, TEST_PRESETS, TWINS_PRESET,  # named TestConfig overrides
                                  UNGUARDED_MIN_PAIRS, check_test_preset)
from trainspotter.record import prior_of, seal
from trainspotter.stats.blind import BlindResult
from trainspotter.stats.sequential import SequentialTest, TestConfig, min_pairs_to_reject
from trainspotter.twin_rounds import audit_guard_pairs, audit_rounds, batch_queries
from trainspotter.verdict import (BASELINE_CAPTION, AuditResult, Verdict, explain, explain_baseline, unmatched,
                                  with_match)

__all__ = ["AuditConfig", "AuditResult", "Auditor", "BASELINE_CAPTION", "DEFAULT_PRESET", "HISTORY", "TEST_PRESETS",
           "TWINS_PRESET", "UsageMeter", "Verdict", "audit", "baseline_p_value", "check_inputs", "explain",
           "explain_baseline", "model_extract", "read_passages", "read_sides"]

log = logging.getLogger(__name__)

ExtractFn = Callable[[list[dict], int], list[dict]]


class AuditConfig(BaseModel):
    """One audit: which texts, which models, how to test."""

    name: str = "audit"
    suspect: str
    heldout: str
    model: Spec  # a spec string, parsed once here (backends.spec)
    reference: References = ()  # K ≥ 0 reference models, each a spec string (the first: RefL, EZ)
    access: Literal["gray", "black", "both"] = "gray"  # black: greedy tokens only (label-only APIs)
    features: FeatureConfig = FEATURE_SETS["lean"]
    max_pairs: int | None = Field(None, ge=1)
    batch_pairs: int = Field(16, ge=1)  # pairs queried per batch; the test stops between pairs
    seed: int = 0
    ledger: bool = False  # continue the stored e-process of audit `name` (recurring audits)
    preset: str = DEFAULT_PRESET  # named test settings, see TEST_PRESETS
    test: TestConfig = Field(default_factory=TestConfig)
    # The blind check (trainspotter.stats.blind) runs on every available pair before any
    # query. When it fires the verdict is "inconclusive" whatever the model says, so
    # "stop" queries nothing; "continue" runs the model's test anyway, for the record;
    # "match" first pairs each suspect passage with a held-out passage of the same text-only
    # propensity (trainspotter.matching), drops the rest, and checks and tests only those pairs.
    shift_check: Literal["stop", "continue", "match"] = "stop"
    # what the blind check and matching's propensity read of a text (features.text.TEXT_FEATURES)
    text_features: Literal["ngrams", "ngrams+minilm"] = "ngrams"  # = features.text.DEFAULT_TEXT_FEATURES
    # The blind check's level (default: the test's α). An audit of several suspect sets
    # (trainspotter.multi) stops each model test at K/α but keeps the guard at α.
    blind_alpha: float | None = Field(None, gt=0.0, lt=1.0)
    # The placebo check (trainspotter.placebo): the same test with a model that saw neither set
    # in the target's place; "trained on" only if it does not reject too. The model: ``placebo``,
    # else the first reference. Without one, small audits cannot rule out a shift that a
    # language model sees and the words do not: "trained on" then needs UNGUARDED_MIN_PAIRS
    # pairs for the blind check, unless the auditor vouches that the held-out set is a random
    # part of the suspect set's collection (``assume_exchangeable``; said in the explanation).
    placebo: Spec | None = None
    placebo_check: bool = True
    assume_exchangeable: bool = False
    # A twins folder (trainspotter.twins): each round is one passage's public version (suspect)
    # against its private twins (held-out): every one of them as sub-pairs of the round (``all``), or
    # one drawn with ``seed`` (``one``; trainspotter.twin_rounds). ``suspect`` and ``heldout`` then
    # name the folder's public.jsonl and private.jsonl. Exchangeable under H0 by the random draw of
    # the public versions, so no small-audit rule applies.
    twins: str | None = None
    twins_private: Literal["all", "one"] = "all"

    @model_validator(mode="before")
    @classmethod
    def _twins_files(cls, data):
        """With ``twins``, ``suspect``/``heldout`` are the folder's files (given otherwise: an error)."""
        if isinstance(data, dict) and data.get("twins") is not None:
            from pathlib import Path

            files = {"suspect": str(Path(data["twins"]) / "public.jsonl"),
                     "heldout": str(Path(data["twins"]) / "private.jsonl")}
            for side, path in files.items():
                if data.get(side) not in (None, path):
                    raise FieldError("twins", "twins replaces suspect and heldout (the public and private versions "
                                              "of the folder's passages); give either twins or suspect and heldout")
            data = {**data, **files}
        return data

    @model_validator(mode="after")
    def _features_need(self) -> "AuditConfig":
        check_references(self.features, len(self.reference))
        if self.features.twin_positions and self.twins is None:
            raise FieldError("features", "the twins feature set reads where a passage differs from its twin: it "
                                         "needs twins (--twins DIR)")
        return self

    @model_validator(mode="after")
    def _apply_preset(self) -> "AuditConfig":
        """Fill the test fields the caller did not set from the preset (idempotent: the
        filled fields count as set, so a dumped and reloaded config stays the same). An audit
        of twins without a preset named takes TWINS_PRESET."""
        if self.twins is not None and "preset" not in self.model_fields_set:
            self.preset = TWINS_PRESET
        try:
            check_test_preset(self.preset)
        except ValueError as e:
            raise FieldError("preset", str(e)) from None
        unset = {k: v for k, v in TEST_PRESETS[self.preset].items() if k not in self.test.model_fields_set}
        if unset:
            self.test = self.test.model_copy(update=unset)
        return self

    @property
    def placebo_config(self) -> "AuditConfig | None":
        """The same audit with the placebo model in the target's place (its references: the
        audit's others), or None without a placebo model or with the check off."""
        model = self.placebo or (self.reference[0] if self.reference else None)
        if not self.placebo_check or model is None:
            return None
        others = tuple(r for r in self.reference if r != model)
        return self.model_copy(update={"name": f"{self.name}-placebo", "model": model, "reference": others,
                                       "features": placebo_features(self.features, bool(others)),
                                       "ledger": False, "placebo": None, "placebo_check": False})

    @property
    def paired(self) -> bool:
        """Pairs keep the sides' rows together (``make_pairs``): two versions of one passage
        (twins), or the pairs that matching made."""
        return self.twins is not None or self.shift_check == "match"

    @property
    def every_private(self) -> bool:
        """A twins audit whose rounds hold every private variant (``twins_private`` "all")."""
        return self.twins is not None and self.twins_private == "all"

    @model_validator(mode="after")
    def _match_alone(self) -> "AuditConfig":
        if self.shift_check != "match":
            return self
        if self.twins is not None:
            raise FieldError("shift_check", "shift_check 'match' pairs two different sets; it does not apply "
                                            "to twins (already paired)")
        # matching sees only the words: what they hide, only the placebo check can catch (measured,
        # benchmarks/results/shift-matched: without it, easier text was "trained on" in 6 of 10 trials)
        if self.placebo_config is None or self.access != "gray":
            raise FieldError("shift_check", "shift_check 'match' needs a reference model and gray access: matching "
                             "sees only the words, and a shift they hide is caught only by the placebo check (on "
                             "the shift suite, matched audits without a reference said 'trained on' about easier "
                             "text in 6 of 10 trials, black-box ones about lead openings in 3 of 10)")
        return self

    @property
    def unguarded_min_pairs(self) -> int:
        """Pairs the blind check needs before "trained on" without a placebo model: none when the
        auditor vouches for the split or the split was made by a random draw (twins)."""
        return 0 if self.assume_exchangeable or self.twins is not None else UNGUARDED_MIN_PAIRS

    @property
    def blind_test(self) -> TestConfig:
        """The blind check's betting settings: the test's, at ``blind_alpha`` when set."""
        return self.test if self.blind_alpha is None else self.test.model_copy(update={"alpha": self.blind_alpha})


def read_passages(path: str, passages: Mapping[str, list[Passage]] | None = None) -> list[Passage]:
    """The passages of ``path``: from ``passages`` (files the caller already read, by path)
    when there, else read from disk, so one audit reads each file once."""
    return passages[path] if passages and path in passages else load_passages(path)


def read_sides(config: AuditConfig, passages: Mapping[str, list[Passage]] | None = None
               ) -> tuple[list[Passage], list[Passage]]:
    """The audit's suspect and held-out passages: its two files (``read_passages``), or for a
    twins audit the checked folder's public versions and their private twins, all or one of each
    (``trainspotter.twins.read_sides``; ``passages`` may hold them already, by the two paths)."""
    if config.twins is None or (passages and config.suspect in passages and config.heldout in passages):
        return read_passages(config.suspect, passages), read_passages(config.heldout, passages)
    from trainspotter.twins import read_sides as twin_sides

    return twin_sides(config.twins, config.seed, with_ledger(config).twins_private)  # (a ledger's stored choice)


def model_extract(config: AuditConfig) -> ExtractFn:
    """The default ``extract_fn``: library feature extraction on the config's models
    (loaded once per process), no caching; the rows carry the model's answers (for the sealed record)."""
    from trainspotter.backends import load_backend
    from trainspotter.features.extract import extract

    def extract_fn(passages: list[dict], batch_no: int) -> list[dict]:
        references = [load_backend(r) for r in config.reference]
        return extract(passages, load_backend(config.model), references, config.access,
                       config.features, answers=True).to_dict("records")  # answers: for the record

    return extract_fn


def check_inputs(config: AuditConfig, suspect: list[Passage], heldout: list[Passage]) -> None:
    """InputError unless the sets are disjoint (``check_disjoint``), a continued audit keeps its
    ledger's settings (``check_setup``) and a fresh audit has enough pairs to be able to reject at
    all (otherwise every query would be spent on a foregone "no evidence"). ``audit`` runs it; the
    CLI runs it too, before any model loads."""
    check_disjoint(config.suspect, suspect, config.heldout, heldout)
    if config.ledger:
        stored = load_ledger(config.name)
        if stored is not None:
            check_setup(stored, setup_of(as_stored(config, stored["setup"])))
        return  # a continued audit starts from the stored wealth, which may need fewer pairs
    need = min_pairs_to_reject(config.test)
    plural = lambda n, word: f"{n} {word}{'s' * (n != 1)}"  # noqa: E731
    pairs, path = min((len(suspect), config.suspect), (len(heldout), config.heldout))
    where = f"{path}: {plural(pairs, 'passage')}, so {plural(pairs, 'pair')} at most"
    if config.max_pairs is not None and config.max_pairs < pairs:
        pairs, where = config.max_pairs, f"option --max-pairs: {plural(config.max_pairs, 'pair')}"
    if pairs < need:
        raise InputError(f"{where}, but the test needs at least {need} to be able to reject at "
                         f"alpha={config.test.alpha:g} with lambda_max={config.test.lambda_max:g}; "
                         f"give more passages or a larger alpha")


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
    of one audit name take turns and never bet on the same state or pairs twice."""
    if config is None:
        config = AuditConfig(**settings)
    elif settings:
        raise TypeError("pass either an AuditConfig or keyword settings, not both")
    config = with_ledger(config)  # (a continued audit: as stored where not chosen, e.g. which private twins)
    extract_fn = extract_fn or model_extract(config)
    suspect, heldout = read_sides(config, passages)
    check_inputs(config, suspect, heldout)
    if config.ledger:
        return _continue(config, suspect, heldout, extract_fn, on_batch, run_id, placebo_fn)
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
    every = audit_guard_pairs(config, suspect, heldout)  # twins "all": the drawn private variant's (twin_rounds)
    guards = Guards(blind if blind is not None else _blind(every, config), every[:config.max_pairs], placebo_fn)
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
              placebo_fn: ExtractFn | None) -> AuditResult:
    """``audit`` continuing the stored e-process of ``config.name`` on pairs never bet on before,
    holding the ledger's lock from load to save. The guards see every available pair (of a matched
    audit: every matched pair of the e-process, ``trainspotter.matched_ledger``), in the audit's
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
        guards = Guards(_blind(every, config), every, placebo_fn)
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
    placebo check's), and the placebo audit's extractor (None: the library default)."""

    def __init__(self, blind: BlindResult, pairs: list[tuple[Passage, Passage]], placebo_fn: ExtractFn | None):
        self.blind, self.pairs, self.placebo_fn = blind, pairs, placebo_fn

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
                              twins=config.twins is not None, references=len(config.reference))
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
        **({"texts_queried": texts} if config.every_private else {}),
        **meter.report(auditor.pairs_queried, len(rounds) - auditor.pairs_queried))
