"""The keyed suite (issue 53, ``trainspotter benchmark --suite keyed``): on a keyed testbed (its
members one release under one key, seen once in pre-training), how soon the keyed e-process
(``stats.exact_null``) decides, and whether it says "trained on" about models that never saw the release.

Black-box: each trial draws prompts from the neutral passages (non-member and held-out splits:
never trained on, not the release), samples ``new_tokens`` continuation tokens from each
(``keyed.queries.sample``) until ``black_tokens`` are generated, and scores the release's units
(``keyed.units.lexical_units``). Black-box forced choice (a lexical release): each trial shuffles
the neutral passages and asks each unit once, in its first context in each of the first
``contexts`` passages that show it, the units the release shows most first, ``samples`` draws in
each restricted to its forms (relative to the reference with ``calibrate``), pooled, until
``black_tokens`` are generated. Gray-box: each trial draws ``gray_passages``
neutral passages (whole) and scores the key's form of each unit against its others in its first
context (``form_probabilities``; with ``calibrate``, relative to the testbed's reference model,
which never saw the release).
Per trial, on the same units: the e-process with the units weighted by how often the release
shows them (``keyed.score``; rejected, and the tokens or passages it needed) and, beside it, with
every weight 1,
Sander et al.'s fixed-n test at the whole budget (exact binomial tail; gray: a one-sided t-test of
x − p), STAMP's paired t-test over prompts or passages (the public key against the mean of
``PRIVATE`` private keys), and the public key's rank among ``keys`` random keys (``key_rank``).

H0, over ``keys`` fresh keys on answers of models that never saw a release under them (the
testbed's reference, its target, and a target trained on the original text when given): each
fresh key is the public one in turn (its STAMP privates: the next ``PRIVATE`` keys), the rate of
each test's "trained on" with its one-sided binomial p against α. The answers do not depend on
the fresh keys, so given the answers the keys' rejections are independent draws (the binomial
test is exact). ``release_prompts`` adds the case the copying rule is for: for each fresh key the
release written under it, its passages' openings as prompts (``strict`` lexical units then skip
every unit the prompt shows).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator
from scipy.stats import binomtest, ttest_1samp

from trainspotter.keyed.audit import CONTEXTS, SAMPLES
from trainspotter.keyed.score import GreenScoring, LexicalScoring
from trainspotter.keyed.units import LexicalForms, Seen, lexical_units, window_units
from trainspotter.stats.eprocess import EProcessConfig, nest_test_settings, wealth_path
from trainspotter.stats.exact_null import fixed_n_pvalue, key_rank, unit_eprocess, unit_payoffs

__all__ = ["KeyedSuiteConfig", "KeyedBed", "Answers", "keyed_bed", "black_answers", "choice_answers", "gray_answers",
           "evaluate",
           "h0_rates"]

PRIVATE = 4  # STAMP's private keys per draw (its benchmark: four private rephrasings)


class KeyedSuiteConfig(BaseModel):
    """One run of the keyed suite (module docstring)."""

    testbed: str = "tiny-pretrain-keyed"
    trials: int = Field(100, ge=1)
    random_keys: int = Field(1000, ge=1)
    black_tokens: int = Field(20000, ge=64)
    prompt_tokens: int = Field(32, ge=1)
    new_tokens: int = Field(64, ge=1)
    gray_passages: int = Field(40, ge=1)
    samples: int = Field(SAMPLES, ge=1)  # black-box forced choice: draws per unit and context (``answers.choose``)
    contexts: int = Field(CONTEXTS, ge=1)  # black-box forced choice: neutral passages each unit is asked in
    probes: list[Literal["black", "choice", "gray"]] = ["black", "choice", "gray"]  # the rows to measure
    test: EProcessConfig = Field(default_factory=EProcessConfig)  # α, strategy, λ_max: the keyed audit's
    original: str | None = None  # spec of a model trained on the original (unkeyed) members: an H0 model
    release_prompts: bool = True
    calibrate: bool = True  # gray-box: each form's log-probability minus the testbed reference's
    seed: int = 0
    out: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _flat_test(cls, data):
        """A flat ``alpha`` and ``strategy`` (the committed results' configs, ``--alphas``) go into ``test``."""
        return nest_test_settings(data)


@dataclass
class KeyedBed:
    """A built keyed testbed: its release, key, units and the neutral passages (never trained on)."""

    name: str
    folder: Path
    key: bytes
    scoring: LexicalScoring | GreenScoring
    originals: list[str]
    neutral: list[str]
    tokenizer: object = None  # the watermark's (a generative release's windows); None: lexical units


def neutral_passages(folder: Path) -> list[str]:
    """The whole Wikipedia leads of the testbed's non-member and held-out splits (never trained on:
    the split files hold their first chunk only)."""
    from trainspotter.assets import wikipedia_leads

    splits = json.loads((folder / "manifest.json").read_text())["splits"]
    text = {r["id"]: r["text"] for r in wikipedia_leads()}
    return [text[i] for split in ("nonmember", "heldout") for i in splits[split]]


def keyed_bed(folder: Path) -> KeyedBed:
    from trainspotter.keyed.release import load_release, rewriter_of

    if (folder / "release" / "keyed-table.json").exists():
        return _table_bed(folder)
    release = load_release(folder / "release")
    originals = [p["text"] for p in release.originals]
    forms = LexicalForms(rewriter_of(release.commitment), originals)
    return KeyedBed(folder.name, folder, release.key, LexicalScoring(forms), originals, neutral_passages(folder))


def _table_bed(folder: Path) -> KeyedBed:
    """A generative keyed testbed (``testbeds.keyed_variant``): its windows under transformers' CUDA
    green lists of the chosen variant key, in SmolLM2's tokens; a random key is a variant key too."""
    from transformers import AutoTokenizer

    from trainspotter.assets import smollm2_gguf
    from trainspotter.rewriters.generative import watermark_key
    from trainspotter.keyed.watermark import CudaRandpermGreenList

    made = json.loads((folder / "release" / "keyed-table.json").read_text())
    V = int(made["vocab_size"])
    scoring = GreenScoring(V, made["gamma"], green=lambda key: CudaRandpermGreenList(watermark_key(key), V))
    gguf = smollm2_gguf()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    return KeyedBed(folder.name, folder, bytes.fromhex(made["variant_key"]), scoring, [], neutral_passages(folder),
                    tok)


@dataclass
class Answers:
    """Units in the order scored, with the budget spent by each (generated tokens, or passages)
    and the document (prompt, passage) each came from."""

    records: list[dict] = field(default_factory=list)
    spent: list[int] = field(default_factory=list)
    doc: list[int] = field(default_factory=list)


def opening(backend, text: str, tokens: int) -> str:
    """The first ``tokens`` tokens of a text under the model's tokenizer, decoded (a prompt)."""
    return backend.tokenizer.decode(backend.tokenizer(text, add_special_tokens=False)["input_ids"][:tokens])


def black_answers(backend, bed: KeyedBed, prompts: list[str], new_tokens: int, seed: int, batch: int = 64) -> Answers:
    """The model's continuations of ``prompts`` (already cut) and their units, counted once: the
    release's lexical units, or the windows of the continuation in the watermark's tokens."""
    from trainspotter.keyed.queries import sample

    out, seen = Answers(), Seen()
    for i, (prompt, cont) in enumerate(zip(prompts, sample(backend, prompts, new_tokens, seed, batch_size=batch))):
        if bed.tokenizer is None:
            records = [{"unit": u, "form": j} for u, j in lexical_units(bed.scoring.forms, prompt, cont, seen)]
        else:
            ids = bed.tokenizer(cont, add_special_tokens=False)["input_ids"]
            given = bed.tokenizer(prompt, add_special_tokens=False)["input_ids"]
            records = [{"prev": a, "next": b} for a, b in window_units(given, ids, seen)]
        out.records += records
        out.spent += [(i + 1) * new_tokens] * len(records)
        out.doc += [i] * len(records)
    return out


def gray_answers(backend, forms: LexicalForms, passages: list[str], reference=None) -> Answers:
    """Each unit's forms scored in its first context in ``passages`` (counted once), relative to
    ``reference``'s when given (``keyed.queries.form_probabilities``)."""
    from trainspotter.keyed.queries import form_probabilities

    seen, contexts, doc = Seen(), [], []
    for i, text in enumerate(passages):
        for unit, context in forms.contexts(text, seen):
            contexts.append((unit, context))
            doc.append(i)
    hs = form_probabilities(backend, [(c, forms.forms[u]) for u, c in contexts], reference)
    return Answers([{"unit": u, "h": h} for (u, _), h in zip(contexts, hs)], [d + 1 for d in doc], doc)


def choice_plan_within(forms: LexicalForms, tokenizer, passages: list[str], tokens: int, samples: int,
                       contexts: int = 1) -> list[tuple]:
    """The forced choice's plan (``keyed.queries.choice_plan``) while its draws' most cost fits in
    ``tokens`` (as the audit takes it)."""
    from trainspotter.keyed.queries import choice_plan

    plan, bound = [], 0
    for item in choice_plan(forms, tokenizer, passages, Seen(), samples, contexts):
        if bound + item[2] > tokens:
            break
        plan.append(item)
        bound += item[2]
    return plan


def pooled(plan: list[tuple], draws: list[list[int]], forms: LexicalForms, costs: list[int]) -> Answers:
    """The forced choice's answers: each unit's draws in its contexts (``draws`` in the plan's order)
    pooled into its record, the tokens spent by then, and its first context's passage."""
    ans, d, c, spent = Answers(), iter(draws), iter(costs), 0
    for unit, asked, _ in plan:
        ans.records.append(forms.choice_record(unit, [x for _ in asked for x in next(d)]))
        spent += sum(next(c) for _ in asked)
        ans.spent.append(spent)
        ans.doc.append(asked[0][0])
    return ans


def choice_answers(backend, forms: LexicalForms, passages: list[str], tokens: int, samples: int, seed: int,
                   reference=None, contexts: int = 1) -> Answers:
    """Forced choice on ``passages`` (``keyed.queries.choose``): the units the release shows most first,
    each once in its first ``contexts`` contexts, within ``tokens``; relative to ``reference``'s
    tokens when given."""
    from trainspotter.keyed.queries import choose

    plan = choice_plan_within(forms, backend.tokenizer, passages, tokens, samples, contexts)
    asked = choose(backend, [(context, seqs) for _, where, _ in plan for _, context, seqs in where], samples, seed,
                   reference)
    return pooled(plan, [d for d, _ in asked], forms, [c for _, c in asked])


def _stamp_p(x: np.ndarray, doc: np.ndarray) -> np.ndarray:
    """STAMP's paired t-test per key draw: x (1 + PRIVATE, ..., n) with row 0 the public key; per
    document the mean outcome under the public key minus the privates' mean; one-sided p."""
    docs = np.unique(doc)
    per = np.stack([x[..., doc == d].mean(axis=-1) for d in docs], axis=-1)  # (1 + PRIVATE, ..., docs)
    d = per[0] - per[1:].mean(axis=0)
    if d.shape[-1] < 2:
        return np.ones(d.shape[:-1])
    res = ttest_1samp(d, 0.0, axis=-1, alternative="greater")
    return np.nan_to_num(np.asarray(res.pvalue, dtype=float), nan=1.0)


def _fixed_p(x: np.ndarray, p: np.ndarray) -> float:
    """Sander et al.'s fixed-n test at the whole budget: the exact binomial tail for binary
    outcomes, a one-sided t-test of x − p for gray-box fractions. Differences below 1e-9 are the
    rounding of one share computed two ways (x = h[k] and p = mean(h) = 1/(m + 1) where every form
    scores alike, e.g. a model relative to itself): zero, not a constant that the t-test, with no
    variance, would call certain."""
    if not len(x):
        return 1.0
    if np.all((x == 0) | (x == 1)):
        return fixed_n_pvalue(x, p)
    d = np.asarray(x, dtype=float) - np.asarray(p, dtype=float)
    d[np.abs(d) < 1e-9] = 0.0
    if not d.any():
        return 1.0
    return float(np.nan_to_num(ttest_1samp(d, 0.0, alternative="greater").pvalue, nan=1.0))


def evaluate(bed: KeyedBed, ans: Answers, key: bytes, null_keys: list[bytes], cfg: KeyedSuiteConfig,
             forced_choice: bool = False) -> dict:
    """One trial's tests on the same units (module docstring): the e-process weighed as the audit
    weighs this probe (rejected, budget at decision, final log-wealth and its path), the same
    unweighted (``flat_``) and, for the forced choice, weighed by n_u (``counted_``), the fixed-n
    test, STAMP's t-test and the key's rank."""
    if not ans.records:
        return {"units": 0, "rejected": False, "spent": None, "flat_rejected": False, "flat_spent": None,
                "fixed_p": 1.0, "stamp_p": 1.0, "rank_p": 1.0, "log_wealth": 0.0, "path": []} | (
            {"counted_rejected": False, "counted_spent": None} if forced_choice else {})
    x, p = bed.scoring.outcomes(ans.records, key)
    w = bed.scoring.weights(ans.records, forced_choice)
    proc = unit_eprocess(x, p, cfg.test, w=w)
    flat = unit_eprocess(x, p, cfg.test)  # every weight 1: what the weights add
    counted = _decided("counted_", unit_eprocess(x, p, cfg.test, w=bed.scoring.weights(ans.records)),
                       ans.spent) if forced_choice else {}
    path = np.log(np.maximum(wealth_path(unit_payoffs(x, p, w), cfg.test.strategy, cfg.test.lambda_max), 1e-300))
    xs, ps = bed.scoring.outcomes_many(ans.records, null_keys)
    null = unit_eprocess(xs, ps, cfg.test, w=w)
    privates = xs[:PRIVATE]
    stamp = _stamp_p(np.concatenate([x[None], privates]), np.asarray(ans.doc))
    return {"units": len(x)} | _decided("", proc, ans.spent) | _decided("flat_", flat, ans.spent) | counted | {
        "fixed_p": _fixed_p(x, p), "stamp_p": float(stamp), "log_wealth": float(np.log(proc.wealth)),
        "rank_p": key_rank(float(np.log(proc.wealth)), np.log(null.wealth))["p_value"],
        "path": [[int(s), float(w)] for s, w in zip(ans.spent, path)]}


def _decided(prefix: str, proc, spent: list[int]) -> dict:
    return {prefix + "rejected": bool(proc.rejected),
            prefix + "spent": int(spent[proc.stop_time - 1]) if proc.rejected else None}


def h0_rates(bed: KeyedBed, ans: Answers, keys: list[bytes], cfg: KeyedSuiteConfig,
             forced_choice: bool = False) -> dict:
    """Each fresh key public in turn on answers that never saw it (module docstring): the rate of
    "trained on" of the e-process, the fixed-n test, STAMP's t-test (privates: the next keys) and
    the rank among the other keys, each with its one-sided binomial p against α."""
    M = len(keys)
    if not ans.records:
        return {"keys": M, "units": 0}
    xs, ps = bed.scoring.outcomes_many(ans.records, keys)
    proc = unit_eprocess(xs, ps, cfg.test, w=bed.scoring.weights(ans.records, forced_choice))
    logw = np.log(proc.wealth)
    fixed = np.array([_fixed_p(xs[m], ps[m]) for m in range(M)]) < cfg.test.alpha
    order = np.array([[(m + j) % M for j in range(PRIVATE + 1)] for m in range(M)])
    doc = np.asarray(ans.doc)
    stamp = np.array([_stamp_p(xs[order[m]], doc) for m in range(M)]) < cfg.test.alpha
    rank = np.array([(1 + np.sum(np.delete(logw, m) >= logw[m])) / M for m in range(M)]) <= cfg.test.alpha
    return {"keys": M, "units": int(xs.shape[1])} | {
        name: _rate(hits, cfg.test.alpha) for name, hits in
        (("eprocess", proc.rejected), ("fixed_n", fixed), ("stamp", stamp), ("rank", rank))}


def _rate(hits: np.ndarray, alpha: float) -> dict:
    k, n = int(np.sum(hits)), int(len(hits))
    return {"rejected": k, "rate": k / n, "p_above_alpha": float(binomtest(k, n, alpha, alternative="greater").pvalue)}


def fresh_keys(n: int, seed: int) -> list[bytes]:
    """Keys drawn as a release's key is (uniform 256 bits), seeded for a reproducible benchmark."""
    rng = random.Random(f"{seed}:fresh-keys")
    return [rng.randbytes(32) for _ in range(n)]


def _to_decision(trials: list[dict], budget: int, prefix: str = "") -> np.ndarray:
    """Budget each trial's e-process (``prefix`` "flat_": the unweighted one; "counted_": weighed by
    n_u) spent to say "trained on", or the whole budget where it did not."""
    return np.array([t[prefix + "spent"] if t[prefix + "rejected"] else budget for t in trials], dtype=float)


def summarise(trials: list[dict], alpha: float, budget: int) -> dict:
    """TPR and budget to decision over trials, beside the fixed-n, STAMP and rank rates at the budget."""
    spent, flat = _to_decision(trials, budget), _to_decision(trials, budget, "flat_")
    out = {"trials": len(trials), "tpr": float(np.mean([t["rejected"] for t in trials])),
           "mean_to_decision": float(spent.mean()), "median_to_decision": float(np.median(spent)),
           "q95_to_decision": float(np.quantile(spent, 0.95)),
           "mean_units": float(np.mean([t["units"] for t in trials])),
           "flat_tpr": float(np.mean([t["flat_rejected"] for t in trials])),
           "flat_median_to_decision": float(np.median(flat))}
    if "counted_rejected" in trials[0]:
        out |= {"counted_tpr": float(np.mean([t["counted_rejected"] for t in trials])),
                "counted_median_to_decision": float(np.median(_to_decision(trials, budget, "counted_")))}
    for name in ("fixed_p", "stamp_p", "rank_p"):
        out[name.replace("_p", "_power")] = float(np.mean([t[name] <= alpha if name == "rank_p" else t[name] < alpha
                                                          for t in trials]))
    out["median_log_wealth"] = float(np.median([t["log_wealth"] for t in trials]))
    out["log_threshold"] = math.log(1 / alpha)
    return out
