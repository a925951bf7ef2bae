"""Several suspect sets against one held-out set (a publisher auditing ten collections at
once), one decision at false discovery rate α: each set is an ordinary audit, and e-BH
(Wang & Ramdas 2022, "False discovery rate control with e-values", JRSS-B 84(3);
``trainspotter.stats.ebh``) decides which sets were trained on.

    from trainspotter import audit_sets, AuditSetsConfig
    r = audit_sets(AuditSetsConfig(suspect=["a.jsonl", "b.jsonl"], heldout="h.jsonl", model="hf:/models/m"))
    for s in r.sets:
        print(s.label, s.verdict, s.e_value)

Why the FDR is at most α:

- Set i's wealth W_i (its audit's e-process on pairs of suspect set i and the held-out set)
  is a nonnegative supermartingale under H0_i, so by optional stopping W_i at any stopping
  time of its own pairs is an e-value, E[W_i(τ_i)] ≤ 1 (BADI Sec. 4). Set i stops querying
  at the first W_i ≥ K/α, else at the end of its data or query budget: each set's audit is
  an ordinary audit at level α/K (``AuditSetsConfig.configs``), with its own ledger name.
- Stopping at K/α loses no rejection: e-BH rejects every set whose e-value reaches K/α,
  whatever the other sets' e-values (then k* ≥ 1 and K/(α k*) ≤ K/α).
- e-BH sees e_i · 1{no guard of set i stands in the way} ≤ e_i, still an e-value: a set whose
  held-out passages differ from it without any model (the blind check), or in a way a model
  that saw neither set also sees (the placebo check, run once e_i ≥ 1/α), is never rejected
  through e-BH (it is "inconclusive"). The guards keep the single audit's level α; at any
  level the product is an e-value, so the guarantee does not depend on it.
- The e-values are dependent (one held-out set, one model); e-BH's FDR ≤ α K_0 / K holds
  under any dependence (Wang & Ramdas 2022), K_0 the sets not trained on.

One caveat: with an API query budget shared by the sets, an earlier set's spending moves a
later set's stop, which then depends on more than that set's own pairs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from trainspotter.auditing.auditor import Auditor
from trainspotter.auditing.config import AuditConfig, ExtractFn
from trainspotter.auditing.verdict import AuditResult, Verdict
from trainspotter.data import Passage
from trainspotter.errors import InputError
from trainspotter.config import fingerprint
from trainspotter.loop.inputs import Checked, check_inputs, keep_checked, read_passages
from trainspotter.loop.run import audit
from trainspotter.stats.ebh import ebh

__all__ = ["AuditSetsConfig", "AuditSetsResult", "SetDecision", "audit_sets", "check_sets",
           "decide", "set_labels"]

RunSet = Callable[[AuditConfig, Mapping[str, list[Passage]]], AuditResult]

def set_labels(paths: list[str]) -> list[str]:
    """One label per suspect file: its stem in letters, digits, '-', '_' and '.' (a ledger and
    an MLflow run are named after it), made unique with -2, -3, ... in order."""
    labels: list[str] = []
    for path in paths:
        base = re.sub(r"[^A-Za-z0-9._-]", "_", Path(path).stem).lstrip(".") or "set"
        label, n = base, 1
        while label in labels:
            n += 1
            label = f"{base}-{n}"
        labels.append(label)
    return labels


class AuditSetsConfig(AuditConfig):
    """K suspect sets, one held-out set, the settings of one audit. ``test.alpha`` is the FDR
    level α; set i is audited as ``<name>-<label i>``."""

    suspect: list[str] = Field(min_length=1)  # type: ignore[assignment]  # K files instead of one
    labels: list[str] = []  # one per suspect set; default: the file stems (``set_labels``)

    @model_validator(mode="after")
    def _fill_labels(self) -> "AuditSetsConfig":
        if not self.labels:
            self.labels = set_labels(self.suspect)
        if len(self.labels) != len(self.suspect) or len(set(self.labels)) != len(self.labels):
            raise ValueError("labels: one distinct label per suspect set")
        return self

    def configs(self) -> list[AuditConfig]:
        """Set i's audit: stops at K/α (test at level α/K), blind check at α."""
        k = len(self.suspect)
        # Field values as they are (a dump would turn the parsed ModelSpecs back into strings).
        shared = {k: v for k, v in self if k not in {"name", "suspect", "labels", "test", "blind_alpha"}}
        test = self.test.model_copy(update={"alpha": self.test.alpha / k})
        return [AuditConfig(**shared, name=f"{self.name}-{label}", suspect=path, test=test,
                            blind_alpha=self.blind_alpha or self.test.alpha)
                for path, label in zip(self.suspect, self.labels)]


class SetDecision(BaseModel):
    """One suspect set's outcome under e-BH."""

    model_config = ConfigDict(extra="forbid")

    label: str
    suspect: str
    verdict: Verdict  # at FDR level α: "inconclusive" when a guard stands in its way (result.guard)
    rejected: bool  # e-BH rejected it: verdict == "trained on"
    e_value: float  # what e-BH saw: the set's e-value, 0 when a guard stands in its way
    result: AuditResult  # the set's own audit (at level α/K: its verdict is Bonferroni's)


class AuditSetsResult(BaseModel):
    """e-BH's decision over K audits sharing one held-out set."""

    model_config = ConfigDict(extra="forbid")

    name: str
    heldout: str
    alpha: float  # the FDR level
    rejections: int  # k*
    thresholds: list[float]  # K/(α k), k = 1..K: the k-th largest e-value must reach the k-th
    sets: list[SetDecision]
    explanation: str


def check_sets(config: AuditSetsConfig, passages: Mapping[str, list[Passage]]) -> Checked:
    """InputError unless every suspect file is given once and every set passes the single
    audit's checks (``check_inputs``) against the held-out set; ``passages`` by path, returned
    marked as checked for ``config`` and each set's audit (``Checked``)."""
    seen: dict[Path, str] = {}
    for path in config.suspect:
        if Path(path).resolve() in seen:
            raise InputError(f"{path}: given twice as a suspect set")
        seen[Path(path).resolve()] = path
    configs = config.configs()
    for set_config in configs:
        check_inputs(set_config, passages[set_config.suspect], passages[config.heldout])
    return Checked(passages, {fingerprint(c) for c in (config, *configs)})


def decide(config: AuditSetsConfig, results: list[AuditResult]) -> AuditSetsResult:
    """e-BH at FDR level α over the sets' e-values, each zeroed where a guard stands in its way."""
    alpha, k = config.test.alpha, len(results)
    e = [0.0 if r.guard else r.e_value for r in results]
    rejected = ebh(e, alpha)
    sets = [SetDecision(label=label, suspect=path, rejected=bool(rej), e_value=e_i, result=r,
                        verdict="inconclusive" if r.guard else "trained on" if rej else "no evidence")
            for label, path, r, e_i, rej in zip(config.labels, config.suspect, results, e, rejected)]
    named = lambda verdict: [f"{s.label} (e = {s.e_value:.3g})" for s in sets if s.verdict == verdict]  # noqa: E731
    said = [f"{what}: {', '.join(labels)}." for what, labels in
            (("Trained on", named("trained on")), ("No evidence", named("no evidence")),
             ("Inconclusive (held-out differs from the set, or too few pairs to tell)", [s.label for s in sets if s.verdict == "inconclusive"]))
            if labels]
    thresholds = [k / (alpha * j) for j in range(1, k + 1)]
    explanation = (f"e-BH at FDR level α = {alpha:g} over K = {k} suspect sets rejected {int(rejected.sum())}. "
                   + " ".join(said) + " Thresholds K/(α k): " + ", ".join(f"{t:.3g}" for t in thresholds) + ".")
    return AuditSetsResult(name=config.name, heldout=config.heldout, alpha=alpha, rejections=int(rejected.sum()),
                           thresholds=thresholds, sets=sets, explanation=explanation)


def audit_sets(config: AuditSetsConfig | None = None, /, *, run_set: RunSet | None = None,
               extract_fn: ExtractFn | None = None, on_batch: Callable[[Auditor], None] | None = None,
               passages: Mapping[str, list[Passage]] | None = None, **settings) -> AuditSetsResult:
    """Audit each suspect set against the held-out set, one after the other, then decide with
    e-BH (``decide``). ``config`` or AuditSetsConfig keyword settings. Every file is read once
    (``passages``: those already read, by path) and every set checked before any model loads, unless
    ``passages`` were checked for ``config`` already (``check_sets``' ``Checked``).
    ``run_set(config_i, passages)`` runs set i's audit (default: ``audit`` with ``extract_fn``
    and ``on_batch``; the audit flow passes one that records it as a nested MLflow run)."""
    if config is None:
        config = AuditSetsConfig(**settings)
    elif settings:
        raise TypeError("pass either an AuditSetsConfig or keyword settings, not both")
    read = {path: read_passages(path, passages) for path in dict.fromkeys([config.heldout, *config.suspect])}
    checked = isinstance(passages, Checked) and passages.has_checked(config)  # (the CLI checked, its flow runs)
    read = keep_checked(passages, read) if checked else check_sets(config, read)
    if run_set is None:
        def run_set(set_config: AuditConfig, data: Mapping[str, list[Passage]]) -> AuditResult:
            return audit(set_config, extract_fn=extract_fn, on_batch=on_batch, passages=data)
    return decide(config, [run_set(set_config, read) for set_config in config.configs()])
