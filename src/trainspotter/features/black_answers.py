"""The model's answers a black-box feature row is computed from, and the row computed from them:
one function, ``black_row``, for extraction and for ``trainspotter verify`` (issue 39; the gray
part is ``features.answers``).

A label-only model answers with greedy tokens and generated continuations (BADI App. A.6, B.1).
The row reads them through two local models: the MiniLM token table (the similarity of each true
token's string to the greedy token's string) and BERTScore (a continuation against the true
suffix). The answers of one passage (``encode``; under the ``BLACK`` key of the row's answers) hold
what the row is computed from, with the strings the similarities were taken of, since the
target's tokenizer (an API model's!) may not be at hand where the record is checked:

- ``target``: ``token_ids`` and greedy ``argmax`` (lists of int), ``true`` and ``pred`` (the
  decoded token strings of each), ``sim`` (their MiniLM cosine similarities, base64 float64);
- ``perturbed``: the same per perturbation kind, of the perturbed passage;
- ``references``: the same per reference model (``token_ids`` and ``true`` left out when equal
  to the target's); with the ``petal`` estimator the first one's gray ``logprobs`` too;
- ``sequence`` (when the feature set has sequence features; null for a passage too short to
  split): ``suffix`` (the true suffix's text), ``generated`` (per prefix, "" the original and each
  perturbation kind, the target's continuation's text), ``reference`` (the first reference's
  continuation of the original prefix) and ``f1`` (BERTScore F1 of each against ``suffix``, the
  reference's under "reference").

``black_row`` computes the row from ``sim``, the token ids and ``f1``: bit for bit the extracted
row. ``check_models`` computes ``sim`` again from the recorded strings (MiniLM token table) and
``f1`` from the recorded texts (BERTScore) and reports the largest difference: float32 encoder
runs on other batches give differences well within ``SIM_TOLERANCE`` / ``F1_TOLERANCE``. What
no model outside the target can check: that the strings are the target tokenizer's decoding of
the ids, and that the continuations are the target's; those are covered by their sha256 only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from trainspotter.errors import InputError
from trainspotter.features.answer_codec import decode_floats, encode_floats, missing_logprobs, same_ids
from trainspotter.features.ez import error_zone
from trainspotter.features.features import FeatureConfig, match_rate, token_level_row
from trainspotter.features.probability import estimate_logprobs, petal_fit
from trainspotter.features.twin_positions import twin_row

__all__ = ["BLACK", "F1_TOLERANCE", "SIM_TOLERANCE", "black_row", "check_models", "decode", "encode",
           "sequence_columns", "side", "sides"]

BLACK = "black"  # the key of a row's black-box answers inside its answers
# Largest |recorded − recomputed| accepted for a MiniLM token similarity and a BERTScore F1 computed
# again by another encoder run (batch composition and padding change float32 sums): a fresh
# MiniLM table against the extraction's gave ≤ 3e-7 on the mini testbed's models, BERTScore on
# other batches ≤ 1.8e-7 (docs/guide/check.md); 1e-5 leaves room for another CPU. A
# changed token string or continuation moves them by far more.
SIM_TOLERANCE = 1e-5
F1_TOLERANCE = 1e-5
_ORIGINAL = ""  # the original prefix's key under ``sequence.generated`` / ``f1``


def sequence_columns(config: FeatureConfig) -> dict[str, str]:
    """Key under ``sequence.f1`` -> column: the original prefix's and each perturbed prefix's."""
    return {_ORIGINAL: "black_seq_bertscore", **{k: f"black_seq_bertscore_{k}" for k in config.kinds}}


def side(token_ids, argmax, true: list[str], pred: list[str], sim: np.ndarray, logprobs=None) -> dict:
    """One model's answers of one text, as ``black_row`` reads them."""
    out = {"token_ids": np.asarray(token_ids, dtype=np.int64), "argmax": np.asarray(argmax, dtype=np.int64),
           "true": list(true), "pred": list(pred), "sim": np.asarray(sim, dtype=np.float64)}
    if logprobs is not None:
        out["logprobs"] = np.asarray(logprobs, dtype=np.float64)
    return out


def _sequence_row(seq: dict | None, config: FeatureConfig, reference: bool) -> dict[str, float]:
    """Suffix completion similarity (BADI Sec. 3, App. B.1): the BERTScore F1 of the target's
    continuation of the original and of each perturbed prefix; with a reference, the original's
    minus the reference's (``black_ref_seq_diff``). NaN for a passage too short to split."""
    cols = sequence_columns(config)
    row = {col: (float(seq["f1"][key]) if seq is not None else math.nan) for key, col in cols.items()}
    if reference:
        row["black_ref_seq_diff"] = (row["black_seq_bertscore"] - float(seq["f1"]["reference"])
                                     if seq is not None else math.nan)
    return row


def black_row(text: str, black: dict, config: FeatureConfig, twin_ids: Sequence[int] | None = None) -> dict[str, float]:
    """The black-box row of one passage from its answers (module docstring; in memory, as
    ``decode`` gives them): token probabilities estimated from the similarities (BADI App. A.6),
    every token-level feature of them, EZ with the first reference, the label-only match rates
    (TDDBench's Metric-corr; on the perturbed passages: query-augment), with
    ``config.sequence`` the suffix completion features, and with ``config.twin_positions`` the
    changed-position columns (``features.twin_positions``; ``twin_ids``: the twin's token ids)."""
    t, refs = black["target"], black["references"]
    r = refs[0] if refs else None
    fit = None
    if config.estimator == "petal":
        if r is None:
            raise InputError("the petal estimator needs a reference model (the PETAL surrogate)")
        missing_logprobs([r["logprobs"]], "reference (PETAL surrogate)")
        fit = petal_fit(r["sim"], r["logprobs"])
    est = lambda s: estimate_logprobs(s, config.estimator, config.sigmoid_scale, fit)  # noqa: E731
    lp = est(t["sim"])
    refs_lp = [est(x["sim"]) for x in refs]
    ref_lp = refs_lp[0] if refs_lp else None
    ez = None
    if r is not None:
        ez = (error_zone(lp, ref_lp, t["argmax"], t["token_ids"], cap=config.ez_cap)
              if same_ids(t["token_ids"], r["token_ids"]) else np.nan)
    row = token_level_row("black", text, lp, config, reference_logprobs=ref_lp, references_logprobs=refs_lp,
                          perturbed_logprobs={k: est(v["sim"]) for k, v in black["perturbed"].items()}, ez=ez)
    row["black_match_rate"] = match_rate(t["token_ids"], t["argmax"])
    row |= {f"black_pert_match_rate_{k}": match_rate(v["token_ids"], v["argmax"])
            for k, v in black["perturbed"].items()}
    if r is not None:
        row["black_ref_match_diff"] = row["black_match_rate"] - match_rate(r["token_ids"], r["argmax"])
    if config.sequence:
        row |= _sequence_row(black.get("sequence"), config, r is not None)
    if config.twin_positions:
        row |= twin_row(t["token_ids"], lp, twin_ids, None if r is None else r["token_ids"], ref_lp,
                        access="black", argmax=t["argmax"])
    return row


def _encode_side(s: dict, target: dict | None = None) -> dict:
    out = {"argmax": [int(x) for x in s["argmax"]], "pred": list(s["pred"]), "sim": encode_floats(s["sim"])}
    if target is None or not same_ids(s["token_ids"], target["token_ids"]):
        out["token_ids"] = [int(x) for x in s["token_ids"]]
    if target is None or s["true"] != target["true"]:
        out["true"] = list(s["true"])
    if "logprobs" in s:
        out["logprobs"] = encode_floats(s["logprobs"])
    return out


def encode(black: dict) -> dict:
    """One passage's black-box answers as JSON (module docstring)."""
    out = {"target": _encode_side(black["target"]),
           "perturbed": {k: _encode_side(v) for k, v in black["perturbed"].items()},
           "references": [_encode_side(r, black["target"]) for r in black["references"]]}
    if "sequence" in black:
        seq = black["sequence"]
        out["sequence"] = None if seq is None else {
            "suffix": seq["suffix"], "generated": dict(seq["generated"]),
            "f1": {k: float(v) for k, v in seq["f1"].items()},
            **({"reference": seq["reference"]} if "reference" in seq else {})}
    return out


def _decode_side(d: dict, target: dict | None = None) -> dict:
    ids = d["token_ids"] if "token_ids" in d else target["token_ids"]
    true = d["true"] if "true" in d else target["true"]
    s = side(ids, d["argmax"], true, d["pred"], decode_floats(d["sim"]),
             decode_floats(d["logprobs"]) if "logprobs" in d else None)
    n = len(s["token_ids"])
    if not (len(s["argmax"]) == len(s["true"]) == len(s["pred"]) == len(s["sim"]) == n):
        raise ValueError("token ids, greedy tokens, their strings and similarities differ in length")
    return s


def decode(answers: dict) -> dict:
    """``encode``'s inverse. ValueError (or KeyError, TypeError) on answers that are not its."""
    t = _decode_side(answers["target"])
    out = {"target": t, "perturbed": {k: _decode_side(v) for k, v in answers["perturbed"].items()},
           "references": [_decode_side(r, t) for r in answers["references"]]}
    if "sequence" in answers:
        out["sequence"] = answers["sequence"]
    return out


def sides(black: dict) -> list[tuple[str, dict]]:
    """(name, side) of every model answer of a passage: target, perturbed.KIND, references.K."""
    return ([("target", black["target"])] + [(f"perturbed.{k}", v) for k, v in black["perturbed"].items()]
            + [(f"references.{j}", r) for j, r in enumerate(black["references"])])


def check_models(blacks: Sequence[tuple[str, dict]], similarity: Callable,
                 f1: Callable) -> tuple[str | None, float, float]:
    """The recorded similarities and F1s of ``blacks`` ((where, decoded answers) pairs) against
    ``similarity(true, pred)`` of the recorded strings and ``f1(candidates, references)`` of the
    recorded texts: (the first difference beyond the tolerance, named; else None), the largest
    similarity and F1 differences seen."""
    worst_sim = worst_f1 = 0.0
    for where, black in blacks:
        for name, s in sides(black):
            again = similarity(s["true"], s["pred"])
            diff = np.abs(again - s["sim"])
            if diff.size and diff.max() > SIM_TOLERANCE:
                j = int(diff.argmax())
                return (f"{where}: answer black.{name}.sim[{j}] is {s['sim'][j]!r}, but the MiniLM similarity of "
                        f"the recorded strings {s['true'][j]!r} and {s['pred'][j]!r} is {again[j]!r}"), 0.0, 0.0
            worst_sim = max(worst_sim, float(diff.max()) if diff.size else 0.0)
    jobs = []  # (where, key, candidate, suffix, recorded F1)
    for where, black in blacks:
        seq = black.get("sequence")
        if seq is not None:
            jobs += [(where, k, text, seq["suffix"], seq["f1"][k]) for k, text in seq["generated"].items()]
            if "reference" in seq:
                jobs.append((where, "reference", seq["reference"], seq["suffix"], seq["f1"]["reference"]))
    if jobs:
        again = f1([j[2] for j in jobs], [j[3] for j in jobs])
        for job, value in zip(jobs, again):
            d = abs(float(value) - float(job[4]))
            if not d <= F1_TOLERANCE:
                key = "original prefix" if job[1] == _ORIGINAL else job[1]
                return (f"{job[0]}: answer black.sequence.f1[{key!r}] is {job[4]!r}, but BERTScore of the recorded "
                        f"continuation against the recorded suffix is {float(value)!r}"), worst_sim, 0.0
            worst_f1 = max(worst_f1, d)
    return None, worst_sim, worst_f1
