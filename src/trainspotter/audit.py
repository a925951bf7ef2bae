"""The audit as a library call: pairs → features in small batches → online scoring and
betting → stop as soon as W_t ≥ 1/α (BADI Sec. 4, App. C) → an ``AuditResult``.

    from trainspotter import audit, AuditConfig
    result = audit(AuditConfig(suspect="s.jsonl", heldout="h.jsonl", model="hf:/models/m"))

No Prefect or MLflow here: the audit flow (flows/audit.py) passes a cached feature
extractor as ``extract_fn`` and logs every batch to MLflow through ``on_batch``.

Note: ``trainspotter.audit`` is the *function* (the package keeps it that way); import
names from this module with ``from trainspotter.audit import Auditor, PRESETS``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from trainspotter.data import Passage, check_disjoint, load_passages, make_pairs
from trainspotter.errors import BudgetExhausted, InputError
from trainspotter.features.features import FEATURE_SETS, FeatureConfig
from trainspotter.ledger import check_setup, ledger_lock, load_ledger, new_ledger, save_ledger, sweep_temps
from trainspotter.presets import DEFAULT_PRESET, PRESETS  # named TestConfig overrides
from trainspotter.stats.blind import BlindResult, blind_check
from trainspotter.stats.pvalue import di_pvalue
from trainspotter.stats.sequential import SequentialTest, TestConfig, min_pairs_to_reject

__all__ = ["AuditConfig", "AuditResult", "Auditor", "DEFAULT_PRESET", "PRESETS", "UsageMeter", "audit",
           "check_inputs", "model_extract"]

log = logging.getLogger(__name__)

HISTORY = ("wealth", "lambda", "u", "score_x", "score_y")
ExtractFn = Callable[[list[dict], int], list[dict]]
Verdict = Literal["trained on", "no evidence", "inconclusive"]


class AuditConfig(BaseModel):
    """One audit: which texts, which models, how to test."""

    name: str = "audit"
    suspect: str
    heldout: str
    model: str
    reference: str | None = None
    access: Literal["gray", "black", "both"] = "gray"  # black: greedy tokens only (label-only APIs)
    features: FeatureConfig = FEATURE_SETS["lean"]
    max_pairs: int | None = Field(None, ge=1)
    batch_pairs: int = Field(16, ge=1)  # pairs queried per batch; the test stops between pairs
    seed: int = 0
    ledger: bool = False  # continue the stored e-process of audit `name` (recurring audits)
    preset: str = DEFAULT_PRESET  # named test settings, see PRESETS
    test: TestConfig = Field(default_factory=TestConfig)
    # The blind check (trainspotter.stats.blind) runs on every available pair before any
    # query. When it fires the verdict is "inconclusive" whatever the model says, so
    # "stop" queries nothing; "continue" runs the model's test anyway, for the record.
    shift_check: Literal["stop", "continue"] = "stop"

    @model_validator(mode="after")
    def _needs_reference(self) -> "AuditConfig":
        if self.features.relative_only and not self.reference:
            raise ValueError("the calibrated (reference-relative) feature set needs a reference model")
        return self

    @model_validator(mode="after")
    def _apply_preset(self) -> "AuditConfig":
        """Fill the test fields the caller did not set from the preset (idempotent: the
        filled fields count as set, so a dumped and reloaded config stays the same)."""
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        unset = {k: v for k, v in PRESETS[self.preset].items() if k not in self.test.model_fields_set}
        if unset:
            self.test = self.test.model_copy(update=unset)
        return self


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


class UsageMeter:
    """Snapshots ``usage()`` of the API backends among ``specs`` (local models cost no
    requests and are not loaded here), so one audit's spend is told apart from
    earlier audits in the same process."""

    COUNTS = ("requests", "total_tokens", "cost")
    API_KEYS = ("mode", "summary", "list_prompts", "batch", "top_logprobs", "echo_shift", "echo_values",
                "empty_prompt")

    def __init__(self, specs: list[str | None]):
        from trainspotter.backends import load_backend  # imports torch: only when auditing

        self.backends = [load_backend(s) for s in dict.fromkeys(specs) if s and s.startswith("openai:")]
        self.before = [b.usage() for b in self.backends]

    def report(self, pairs_queried: int, pairs_skipped: int) -> dict:
        """{} for local models; else ``usage`` (this audit's requests, tokens, cost, cache
        hits, retries) and ``saved_by_stopping``: the pairs never queried, priced at this
        audit's average per queried pair; ``api``: how each API was queried (its mode, from
        ``describe()``)."""
        if not self.backends:
            return {}
        used: dict[str, float] = {}
        for backend, before in zip(self.backends, self.before):
            for key, value in backend.usage().items():
                used[key] = used.get(key, 0) + value - before.get(key, 0)
        per_pair = {k: used.get(k, 0) / pairs_queried if pairs_queried else 0.0 for k in self.COUNTS}
        saved = {"pairs": pairs_skipped} | {k: per_pair[k] * pairs_skipped for k in self.COUNTS}
        return {"usage": used, "saved_by_stopping": saved, "api": self.modes()}

    def modes(self) -> dict:
        """How each API was queried, by MODEL@URL (from ``describe()``: mode, lists, echo
        alignment; read from the cached probe where this process sent no request)."""
        return {f"{d['model']}@{d['base_url']}": {k: d[k] for k in self.API_KEYS}
                for d in (b.describe() for b in self.backends)}


class Auditor:
    """The sequential test fed one batch of feature rows at a time.

    Each ``feed`` takes the rows of one batch of pairs: every row has ``id``, ``set``
    ("suspect" or "heldout") and the feature columns; pair i is the i-th suspect row with
    the i-th held-out row. Pairs go through ``SequentialTest.update`` in order (scored and
    bet on with what was fitted on earlier pairs only) until W_t ≥ 1/α.
    """

    def __init__(self, config: TestConfig | None = None, state: SequentialTest | None = None,
                 columns: list[str] | None = None):
        self.test = state
        self.config = state.config if state is not None else (config or TestConfig())
        self.columns: list[str] = list(columns or [])
        if state is not None and len(self.columns) != state.n_features:
            raise InputError(f"stored test has {state.n_features} features but {len(self.columns)} columns")
        self.t0, self.w0 = (state.t, float(state.wealth)) if state is not None else (0, 1.0)
        self.rows: list[dict] = []  # the rows bet on, in order
        self.pairs_queried = 0

    @property
    def rejected(self) -> bool:
        return self.test is not None and bool(self.test.rejected)

    def feed(self, rows: list[dict]) -> bool:
        """Bet on the pairs of one batch; True once the test rejects (stop querying)."""
        sides = {s: [r for r in rows if r.get("set") == s] for s in ("suspect", "heldout")}
        if len(sides["suspect"]) != len(sides["heldout"]) or 2 * len(sides["suspect"]) != len(rows):
            raise InputError("Auditor.feed: each row needs set 'suspect' or 'heldout', as many of each")
        self.pairs_queried += len(sides["suspect"])
        if not rows or self.rejected:
            return self.rejected
        if self.test is None:
            self.columns = self.columns or _first_batch_columns(rows)
            self.test = SequentialTest(len(self.columns), self.config, columns=self.columns)
        for x, y in zip(sides["suspect"], sides["heldout"]):
            self.test.update(self._vector(x), self._vector(y))
            self.rows += [x, y]
            if self.test.rejected:
                break
        return self.rejected

    def _vector(self, row: dict) -> np.ndarray:
        """The row's features in column order; a missing or non-finite value is bad input
        (dropping the pair would bias the stream, imputing it would invent evidence)."""
        missing = [c for c in self.columns if c not in row]
        if missing:
            raise InputError(f"passage {row.get('id')!r}: no feature {missing[0]}")
        vec = np.array([row[c] for c in self.columns], dtype=float)
        if not np.all(np.isfinite(vec)):
            bad = self.columns[int(np.argmin(np.isfinite(vec)))]
            raise InputError(f"passage {row.get('id')!r}: feature {bad} is {row[bad]} (not finite)")
        return vec

    @property
    def history(self) -> dict[str, list[float]]:
        """This run's steps t0+1..t of wealth, λ, u and the two scores."""
        if self.test is None:
            return {k: [] for k in HISTORY}
        return {k: [float(v) for v in self.test.history[k][self.t0:]] for k in HISTORY}

    def features(self) -> pd.DataFrame:
        """The rows bet on this run: id, set and the test's feature columns."""
        return pd.DataFrame(self.rows, columns=["id", "set", *self.columns])

    def result(self, blind: BlindResult, name: str = "audit", stopped_by: str | None = None,
               pairs_available: int | None = None, seed: int = 0, **extra) -> AuditResult:
        """The result so far, its verdict taking the blind check into account; ``extra``:
        usage, saved_by_stopping, ledger. A fresh audit that the blind check stopped before
        any pair has W = 1 throughout."""
        test = self.test
        if test is None and stopped_by != "shift":
            raise InputError(f"audit {name!r}: no pairs were tested")
        verdict = "inconclusive" if blind.fired else "trained on" if self.rejected else "no evidence"
        t = int(test.t) if test is not None else 0
        model = {"e_value": 1.0, "wealth": 1.0, "max_wealth": 1.0, "p_value": 1.0, "stop_time": None,
                 "baseline_p_value": None, "feature_weights": {}} if test is None else {
            "e_value": float(test.e_value), "wealth": float(test.wealth), "max_wealth": float(test.max_wealth),
            "p_value": float(test.p_value), "stop_time": test.stop_time,
            "baseline_p_value": baseline_p_value(self.features(), self.columns, seed),
            "feature_weights": dict(zip(self.columns, test.scorer.theta[0, :-1].tolist()))}
        baseline = model["baseline_p_value"]
        note = explain_baseline(self.rejected, model["e_value"], self.config.alpha, baseline, t)
        model["baseline_disagrees"] = baseline is not None and (baseline <= self.config.alpha) != self.rejected
        result = AuditResult(
            name=name, verdict=verdict, reject=verdict == "trained on", model_reject=self.rejected,
            explanation=explain(verdict, blind, self.config.alpha), baseline_note=note, blind=blind, pairs_used=t,
            pairs_this_run=t - self.t0, pairs_queried=self.pairs_queried,
            pairs_available=pairs_available if pairs_available is not None else t,
            stopped_by=stopped_by or ("rejected" if self.rejected else "data"), wealth_start=self.w0,
            alpha=self.config.alpha, features=self.columns, history=self.history, **model, **extra)
        result._auditor = self
        return result


def explain(verdict: str, blind: BlindResult, alpha: float) -> str:
    """One paragraph: what the verdict rests on and, when inconclusive, what to do."""
    if verdict == "trained on":
        return (f"The model's e-value reached 1/α = {1 / alpha:g}: evidence that the suspect set was "
                f"used to train the model. The blind check, which sees only the texts, could not tell "
                f"the sets apart (blind e-value {blind.e_value:.3g} after {blind.pairs_used} pairs), so "
                f"the evidence is about the model, not about how the sets were drawn.")
    if verdict == "no evidence":
        return (f"The model's e-value stayed below 1/α = {1 / alpha:g}: no evidence (yet) that the suspect "
                f"set was trained on. More pairs, a reference model or the full feature set may still "
                f"find it; the e-process can be continued (--name NAME --ledger).")
    what = "; ".join(blind.differences) or "no single statistic stands out"
    return (f"Inconclusive: the held-out set differs from the suspect set. A check that sees only the "
            f"texts tells them apart (blind e-value {blind.e_value:.3g} ≥ 1/α = {1 / alpha:g} after "
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


def _first_batch_columns(rows: list[dict]) -> list[str]:
    """Feature columns of the test, fixed on the first batch: those finite there (e.g. EZ is
    NaN throughout when target and reference tokenise differently). Said, not silent."""
    names = [c for c in rows[0] if c not in ("id", "set")]
    keep = [c for c in names if all(np.isfinite(float(r.get(c, np.nan))) for r in rows)]
    if len(keep) < len(names):
        log.warning("features not finite on the first batch, left out of the test: %s",
                    ", ".join(sorted(set(names) - set(keep))))
    if not keep:
        raise InputError("no feature is finite on the first batch of pairs")
    return keep


def baseline_p_value(features: pd.DataFrame, columns: list[str], seed: int) -> float | None:
    """Maini et al.'s fixed-sample DI p-value (BADI App. A.8) on the same pairs, for
    comparison only: its sample size was chosen by the e-process, so unlike the
    e-value it carries no guarantee here. None with fewer than 4 pairs."""
    sides = [features.loc[features["set"] == s, columns].to_numpy() for s in ("suspect", "heldout")]
    if min(len(x) for x in sides) < 4:
        return None
    return float(di_pvalue(*sides, seed=seed)["p_value"])


def model_extract(config: AuditConfig) -> ExtractFn:
    """The default ``extract_fn``: library feature extraction on the config's models
    (loaded once per process), no caching."""
    from trainspotter.backends import load_backend
    from trainspotter.features.extract import extract

    def extract_fn(passages: list[dict], batch_no: int) -> list[dict]:
        reference = load_backend(config.reference) if config.reference else None
        return extract(passages, load_backend(config.model), reference, config.access,
                       config.features).to_dict("records")

    return extract_fn


def _as_stored(config: AuditConfig, stored: dict) -> AuditConfig:
    """A ledger written before the one-sided scorer existed holds an unoriented e-process: fill
    the fields it lacks with the values it was made with (``oriented`` False, all feature
    columns) and, unless the caller chose ``oriented`` explicitly, continue it as it is."""
    stored["test"].setdefault("oriented", False)
    stored["features"].setdefault("relative_only", False)
    if "oriented" not in config.test.model_fields_set and not stored["test"]["oriented"]:
        return config.model_copy(update={"test": config.test.model_copy(update={"oriented": False})})
    return config


def setup_of(config: AuditConfig) -> dict:
    """What must not change between runs of a recurring audit."""
    return {"reference": config.reference, "access": config.access,
            "features": config.features.model_dump(mode="json"), "test": config.test.model_dump()}


def check_inputs(config: AuditConfig, suspect: list[Passage], heldout: list[Passage]) -> None:
    """InputError unless the sets are disjoint (``check_disjoint``) and a fresh audit has
    enough pairs to be able to reject at all (otherwise every query would be spent on a
    foregone "no evidence"). ``audit`` runs it; the CLI runs it too, before any model loads."""
    check_disjoint(config.suspect, suspect, config.heldout, heldout)
    if config.ledger:
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
          **settings) -> AuditResult:
    """Run one sequential audit, or continue the stored one when ``config.ledger``.

    ``config`` or AuditConfig keyword settings. ``extract_fn(passages, batch_no)`` returns
    one feature row per passage (default: ``model_extract(config)``); each batch passes
    its suspect passages, then its held-out ones. ``on_batch(auditor)`` runs after every
    batch. ``run_id`` names this run in the ledger (default: a fresh uuid). Stops at
    rejection, when a query budget runs out (BudgetExhausted) or at the end of the data.
    A continued audit holds the ledger's file lock from load to save, so overlapping runs
    of one audit name take turns and never bet on the same state or pairs twice."""
    if config is None:
        config = AuditConfig(**settings)
    elif settings:
        raise TypeError("pass either an AuditConfig or keyword settings, not both")
    extract_fn = extract_fn or model_extract(config)
    suspect, heldout = load_passages(config.suspect), load_passages(config.heldout)
    check_inputs(config, suspect, heldout)
    # The blind check sees every available pair (of a recurring audit: every passage there
    # is now), in the audit's pair order, before any query; it never sees model evidence.
    every = make_pairs(suspect, heldout, seed=config.seed)
    blind = blind_check([x["text"] for x, _ in every], [y["text"] for _, y in every], config.test)
    if blind.fired:
        log.warning("blind check fired (e = %.3g after %d pairs): the held-out set differs from the "
                    "suspect set", blind.e_value, blind.pairs_used)
    if not config.ledger:
        return _run(config, Auditor(config.test), suspect, heldout, extract_fn, on_batch, blind)
    with ledger_lock(config.name):
        sweep_temps(config.name)  # left by a run killed mid-save
        ledger = load_ledger(config.name) or new_ledger(config.name, setup_of(config))
        config = _as_stored(config, ledger["setup"])
        check_setup(ledger, setup_of(config))
        # Only pairs never bet on before may enter the continued e-process.
        used = {side: set(ids) for side, ids in ledger["used"].items()}
        suspect = [p for p in suspect if p["id"] not in used["suspect"]]
        heldout = [p for p in heldout if p["id"] not in used["heldout"]]
        state = SequentialTest.from_dict(ledger["state"]) if ledger["state"] is not None else None
        auditor = Auditor(config.test, state, ledger["columns"] if state is not None else None)
        result = _run(config, auditor, suspect, heldout, extract_fn, on_batch, blind)
        _record(ledger, config, auditor, result, run_id or uuid.uuid4().hex)
        return result.model_copy(update={"ledger": str(save_ledger(ledger))})


def _run(config: AuditConfig, auditor: Auditor, suspect: list[Passage], heldout: list[Passage],
         extract_fn: ExtractFn, on_batch: Callable[[Auditor], None] | None, blind: BlindResult) -> AuditResult:
    pairs = make_pairs(suspect, heldout, seed=config.seed, max_pairs=config.max_pairs)
    if blind.fired and config.shift_check == "stop":
        return auditor.result(blind, config.name, "shift", auditor.t0 + len(pairs), config.seed)
    meter = UsageMeter([config.model, config.reference])
    stopped_by = "data"
    for batch_no, start in enumerate(range(0, len(pairs), config.batch_pairs)):
        if auditor.rejected:
            break  # evidence reached 1/α: stop querying
        batch = pairs[start:start + config.batch_pairs]
        passages = [{"id": p["id"], "text": p["text"]} for p in [x for x, _ in batch] + [y for _, y in batch]]
        try:
            rows = extract_fn(passages, batch_no)
        except BudgetExhausted as e:
            stopped_by = "budget"
            log.warning("query budget reached after %d pairs: %s", auditor.pairs_queried, e)
            break
        if len(rows) != len(passages):
            raise InputError(f"extract_fn returned {len(rows)} rows for {len(passages)} passages")
        sides = ["suspect"] * len(batch) + ["heldout"] * len(batch)
        auditor.feed([dict(r, id=p["id"], set=s) for r, p, s in zip(rows, passages, sides)])
        log.info("pairs %d, wealth %.3g", auditor.test.t, auditor.test.wealth)
        if on_batch is not None:
            on_batch(auditor)
    if auditor.test is None:
        raise InputError(f"audit {config.name!r}: no pairs to test" if stopped_by == "data" else
                         f"audit {config.name!r}: the query budget ran out before the first pair")
    return auditor.result(
        blind, config.name, "rejected" if auditor.rejected else stopped_by, auditor.t0 + len(pairs), config.seed,
        **meter.report(auditor.pairs_queried, len(pairs) - auditor.pairs_queried))


def _record(ledger: dict, config: AuditConfig, auditor: Auditor, result: AuditResult, run_id: str) -> None:
    """Store the continued state, the pairs consumed and one history row."""
    from trainspotter.backends import spec_fingerprint

    if auditor.test is not None:
        ledger["state"], ledger["columns"] = auditor.test.to_dict(), auditor.columns
    for side in ("suspect", "heldout"):
        ledger["used"][side] += [r["id"] for r in auditor.rows if r["set"] == side]
    ledger["runs"].append({
        "run_id": run_id, "finished": time.time(), "model": config.model,
        "model_fingerprint": spec_fingerprint(config.model), "pairs_added": result.pairs_this_run,
        "pairs_total": result.pairs_used, "wealth_start": result.wealth_start,
        "wealth_end": result.wealth, "reject": result.reject, "e_value": result.e_value,
        "verdict": result.verdict, "blind_e_value": result.blind.e_value})
