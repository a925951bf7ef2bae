"""The sequential test fed one batch of feature rows at a time (``Auditor``; each column's
member-like sign from the feature catalogue), the blind check on texts (``blind_check``), and
the API usage of one audit (``UsageMeter``)."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from trainspotter.auditing.explain import Context, explain, explain_baseline
from trainspotter.auditing.verdict import AuditResult, PlaceboResult, decide
from trainspotter.backends.spec import ModelSpec, parse_spec
from trainspotter.errors import InputError
from trainspotter.features.answers import ANSWERS
from trainspotter.features.orientation import directions
from trainspotter.features.text import DEFAULT_TEXT_FEATURES, TextRows, describe_differences
from trainspotter.stats.blind import BlindResult, run_blind
from trainspotter.stats.pvalue import di_pvalue
from trainspotter.stats.sequential import SequentialTest, TestConfig
from trainspotter.twins.draw import DrawProof

__all__ = ["Auditor", "HISTORY", "UsageMeter", "baseline_p_value", "blind_check", "blind_on"]

log = logging.getLogger(__name__)

HISTORY = ("wealth", "lambda", "u", "score_x", "score_y")


def blind_check(suspect: list[str], heldout: list[str], config: TestConfig,
                text_features: str = DEFAULT_TEXT_FEATURES) -> BlindResult:
    """The blind check (``stats.blind``) on the pairs (suspect[t], heldout[t]) in order, from
    the texts alone (``features.text``; ``text_features``: n-grams and surface statistics, or
    those and MiniLM sentence embeddings), stopping at the first W_t ≥ 1/α as the model's test
    does; with what differs most between the sets, for the reader."""
    n = min(len(suspect), len(heldout))
    rows = (TextRows(suspect[:n], text_features=text_features),
            TextRows(heldout[:n], text_features=text_features))
    result = run_blind(*rows, config)
    if n:
        result.differences = describe_differences(suspect[:n], heldout[:n], rows)
    return result


def blind_on(pairs: list[tuple[dict, dict]], config) -> BlindResult:
    """The blind check on an audit's pairs, in their order, at the blind level and with the text
    features of ``config`` (an ``AuditConfig``)."""
    texts = ([x["text"] for x, _ in pairs], [y["text"] for _, y in pairs])
    return blind_check(*texts, config.blind_test, config.text_features)


class UsageMeter:
    """Snapshots ``usage()`` of the API backends among ``specs`` (local models cost no
    requests and are not loaded here), so one audit's spend is told apart from
    earlier audits in the same process."""

    COUNTS = ("requests", "total_tokens", "cost")
    API_KEYS = ("mode", "summary", "list_prompts", "batch", "top_logprobs", "echo_shift", "echo_values",
                "empty_prompt", "system_fingerprints")

    def __init__(self, specs: list[str | ModelSpec | None]):
        from trainspotter.backends import load_backend  # imports torch: only when auditing

        parsed = [parse_spec(s) for s in specs if s]
        self.backends = [load_backend(s) for s in dict.fromkeys(parsed) if s.remote]
        self.before = [b.usage() for b in self.backends]

    def report(self, pairs_queried: int, pairs_skipped: int) -> dict:
        """{} for local models; else ``usage`` (this audit's requests, tokens, cost, cache
        hits, retries, and ``served_from``: "api", "api and cache", "cache" — every answer came
        from a cache, the query cache or the cached features of an earlier run, so nothing was
        spent — or "nothing queried") and ``saved_by_stopping``: the pairs never queried, priced at
        this audit's average per queried pair; ``api``: how each API was queried (its mode, from
        ``describe()``)."""
        if not self.backends:
            return {}
        used: dict[str, float | str] = {}
        for backend, before in zip(self.backends, self.before):
            for key, value in backend.usage().items():
                used[key] = used.get(key, 0) + value - before.get(key, 0)
        per_pair = {k: used.get(k, 0) / pairs_queried if pairs_queried else 0.0 for k in self.COUNTS}
        saved = {"pairs": pairs_skipped} | {k: per_pair[k] * pairs_skipped for k in self.COUNTS}
        answered, hits = used.get("requests", 0), used.get("cache_hits", 0)
        used["served_from"] = ("nothing queried" if not pairs_queried else "cache" if not answered else
                               "api and cache" if hits else "api")
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
    bet on with what was fitted on earlier pairs only) until W_t ≥ 1/α; ``rounds``: how many
    consecutive pairs make each round (sub-pairs bet on together, a twins audit of every private
    variant; ``round_of``: each pair's round, counted from this run's first).
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
        self.round_of: list[int] = []  # per pair bet on, its round (index into ``history``)
        self.pairs_queried = 0  # rounds

    @property
    def rejected(self) -> bool:
        return self.test is not None and bool(self.test.rejected)

    def evidence(self, alpha: float) -> bool:
        """The e-value has reached 1/``alpha`` (the guards' level; the test's own may be lower)."""
        return self.test is not None and float(self.test.e_value) >= 1 / alpha

    def feed(self, rows: list[dict], rounds: list[int] | None = None) -> bool:
        """Bet on the rounds of one batch (``rounds``: each one's number of pairs, default one
        each; m > 1: ``SequentialTest.update`` with (m, p) rows); True once the test rejects."""
        sides = {s: [r for r in rows if r.get("set") == s] for s in ("suspect", "heldout")}
        if len(sides["suspect"]) != len(sides["heldout"]) or 2 * len(sides["suspect"]) != len(rows):
            raise InputError("Auditor.feed: each row needs set 'suspect' or 'heldout', as many of each")
        rounds = [1] * len(sides["suspect"]) if rounds is None else list(rounds)
        if sum(rounds) != len(sides["suspect"]) or min(rounds, default=1) < 1:
            raise InputError(f"Auditor.feed: rounds of {rounds} pairs for {len(sides['suspect'])} pairs")
        self.pairs_queried += len(rounds)
        if not rows or self.rejected:
            return self.rejected
        if self.test is None:
            self.columns = self.columns or _first_batch_columns(rows)
            self.test = SequentialTest(len(self.columns), self.config, signs=directions(self.columns))
        pairs, start = list(zip(sides["suspect"], sides["heldout"])), 0
        for m in rounds:
            xs, ys = (np.stack([self._vector(p[s]) for p in pairs[start:start + m]]) for s in (0, 1))
            self.test.update(xs, ys)  # (m, p) rows; m = 1 is bit-identical to one pair's rows
            self.rows += [r for pair in pairs[start:start + m] for r in pair]
            self.round_of += [self.test.t - self.t0 - 1] * m
            start += m
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
               pairs_available: int | None = None, seed: int = 0, placebo: PlaceboResult | None = None,
               unguarded_min_pairs: int = 0, twins: bool = False, references: int | None = None,
               pairs_beyond: int = 0, draw: DrawProof | None = None, vouched: bool = False, **extra) -> AuditResult:
        """The result so far, its verdict taking the guards into account (``decide``: the blind
        check, the placebo check, and without a placebo model ``unguarded_min_pairs``);
        ``twins``: the pairs are twins; ``references``: how many reference models the audit had and
        ``pairs_beyond``: pairs the files hold beyond ``pairs_available`` (the explanation's advice
        leaves out what was done); ``draw``: what a twins folder shows of its draw (a draw not shown
        random is a guard unless the auditor ``vouched``, --assume-exchangeable); ``extra``: usage,
        saved_by_stopping, ledger. A fresh audit that the blind check stopped before any pair has W
        = 1 throughout."""
        test = self.test
        if test is None and stopped_by != "shift":
            raise InputError(f"audit {name!r}: no pairs were tested")
        placebo = placebo or PlaceboResult(ran=False, alpha=blind.alpha)
        gate = None if draw is None or (draw.status == "unproven" and vouched) else draw.status
        verdict, guard = decide(self.rejected, self.evidence(blind.alpha), blind, placebo, unguarded_min_pairs, gate)
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
        available = pairs_available if pairs_available is not None else t
        context = Context(e_value=model["e_value"] if test is not None and stopped_by != "shift" else None,
                          pairs_used=t, pairs_available=available, pairs_this_run=t - self.t0,
                          continued=self.t0 > 0, references=references, pairs_beyond=pairs_beyond,
                          full_features=any("_pert_" in c for c in self.columns),
                          twin_features=any("_twin_" in c for c in self.columns))
        result = AuditResult(
            name=name, verdict=verdict, reject=verdict == "trained on", model_reject=self.rejected,
            explanation=explain(verdict, blind, self.config.alpha,
                                black_box=bool(self.columns) and all(c.startswith("black_") for c in self.columns),
                                guard=guard, placebo=placebo, unguarded_min_pairs=unguarded_min_pairs,
                                twins=twins, context=context, draw=draw, vouched=vouched),
            guard=guard, draw=draw, baseline_note=note, blind=blind, placebo=placebo, pairs_used=t,
            pairs_this_run=t - self.t0, pairs_queried=self.pairs_queried,
            pairs_available=available,
            stopped_by=stopped_by or ("rejected" if self.rejected else "data"), wealth_start=self.w0,
            alpha=self.config.alpha, features=self.columns, history=self.history, **model, **extra)
        result._auditor = self
        return result


def _first_batch_columns(rows: list[dict]) -> list[str]:
    """Feature columns of the test, fixed on the first batch: those finite there (e.g. EZ is
    NaN throughout when target and reference tokenise differently). Said, not silent."""
    names = [c for c in rows[0] if c not in ("id", "set", ANSWERS)]  # (answers: what a row came from)
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
