"""The model's answers a gray-box feature row is computed from, and the row computed from them:
one function, ``gray_rows``, for extraction and for ``trainspotter verify`` (issue 39: a sealed
record holds every pair's features *and* the answers they came from, and verify recomputes
every feature offline, without the model).

Answers of one passage (``encode``; ``extract(..., answers=True)`` puts them under the row's
``ANSWERS`` key), JSON:

- ``target``: the target's ``TokenScores`` of the passage, the fields the row reads:
  ``token_ids`` and ``argmax`` (lists of int), ``logprobs``, ``mu``, ``sigma2`` and, when the
  backend gave them (TDDBench's metric criteria), ``max_logprob``, ``mentr``, ``top_logprobs``,
  ``projection``;
- ``perturbed``: per perturbation kind, the target's ``logprobs`` of the perturbed passage;
- ``references``: per reference model, its ``logprobs`` and its ``token_ids`` (left out when
  equal to the target's: one tokenizer);
- ``twin_ids``: in a twins audit, the twin's token ids under the target's tokenizer (gray or
  black: one list beside both parts).

A float array is the base64 of its little-endian float64 bytes (``{"shape": [n, k], "f8": …}``
for a 2-D one), so the values read back are the very doubles the backend returned and the
row computed again from them is the same bit for bit with the same numpy (``verify`` accepts
``verify.TOLERANCE`` where another platform's reductions may round differently).
A black-box row's answers (greedy tokens and their strings, similarities, continuations) are
``features.black_answers``'s, under the ``black`` key beside these (access "both") or alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trainspotter.backends.base import TokenScores
from trainspotter.features import black_answers
from trainspotter.features.answer_codec import decode_floats, encode_floats, missing_logprobs, same_ids
from trainspotter.features.ez import error_zone
from trainspotter.features.features import FeatureConfig, prediction_row, token_level_row
from trainspotter.features.twin_positions import twin_row

__all__ = ["ANSWERS", "decode", "encode", "gray_rows", "recompute", "require_logprobs"]

ANSWERS = "answers"  # the key of a row's answers (not a feature column)
_INTS = ("token_ids", "argmax")
_FLOATS = ("logprobs", "mu", "sigma2", "max_logprob", "mentr", "top_logprobs", "projection")


def require_logprobs(scores: list[TokenScores], who: str) -> None:
    missing_logprobs([s.logprobs for s in scores], who)


def gray_rows(texts: Sequence[str], t_orig: list[TokenScores], t_pert: dict[str, list[TokenScores]],
              r_orig: list[list[TokenScores]], config: FeatureConfig,
              twin_ids: Sequence[Sequence[int] | None] | None = None) -> list[dict]:
    """The gray-box rows of a batch (BADI App. A.2; Min-K%++; EZ-MIA Eq. 1–4; TDDBench's metric
    criteria; with ``config.twin_positions`` the changed-position columns of
    ``features.twin_positions``). ``t_pert[kind][i]``: the target's scores of passage i's
    perturbed variant; ``r_orig[k][i]``: reference k's scores of passage i (k = 0 is the first
    reference); ``twin_ids[i]``: passage i's twin's token ids (None: no twin)."""
    require_logprobs(t_orig + [s for v in t_pert.values() for s in v], "target")
    for k, scores in enumerate(r_orig):
        require_logprobs(scores, "reference" if len(r_orig) == 1 else f"reference {k + 1}")
    rows = []
    for i, (text, t) in enumerate(zip(texts, t_orig)):
        r = r_orig[0][i] if r_orig else None
        ez = None
        if r is not None:
            ez = (error_zone(t.logprobs, r.logprobs, t.argmax, t.token_ids, cap=config.ez_cap)
                  if same_ids(t.token_ids, r.token_ids) else np.nan)
        row = token_level_row(
            "gray", text, t.logprobs, config, mu=t.mu, sigma2=t.sigma2,
            reference_logprobs=r.logprobs if r is not None else None,
            references_logprobs=[scores[i].logprobs for scores in r_orig],
            perturbed_logprobs={k: v[i].logprobs for k, v in t_pert.items()}, ez=ez)
        row |= prediction_row(t, config) if config.metric_criteria else {}
        if config.twin_positions:  # a twins audit: the passage's twin's token ids
            row |= twin_row(t.token_ids, t.logprobs, None if twin_ids is None else twin_ids[i],
                            None if r is None else r.token_ids, None if r is None else r.logprobs)
        rows.append(row)
    return rows


def _scores(s: TokenScores, fields: Sequence[str]) -> dict:
    out = {}
    for name in fields:
        value = getattr(s, name)
        if value is not None:
            out[name] = [int(x) for x in value] if name in _INTS else encode_floats(value)
    return out


def encode(t: TokenScores, pert: dict[str, TokenScores], refs: list[TokenScores]) -> dict:
    """One passage's gray answers (module docstring): what ``gray_rows`` reads of them, no more
    (a twins audit's ``twin_ids`` sit beside them, written by extraction for gray and black)."""
    return {"target": _scores(t, _INTS + _FLOATS),
            "perturbed": {k: _scores(v, ("logprobs",)) for k, v in pert.items()},
            "references": [_scores(r, ("logprobs",) if same_ids(t.token_ids, r.token_ids) else ("token_ids", "logprobs"))
                           for r in refs]}


def _token_scores(d: dict, token_ids=None) -> TokenScores:
    ids = np.asarray(d["token_ids"] if "token_ids" in d else token_ids, dtype=np.int64)
    logprobs = decode_floats(d["logprobs"])
    nan = np.full(ids.shape, np.nan)
    return TokenScores(token_ids=ids, logprobs=logprobs,
                       argmax=np.asarray(d["argmax"], dtype=np.int64) if "argmax" in d else np.full(ids.shape, -1),
                       mu=decode_floats(d["mu"]) if "mu" in d else nan,
                       sigma2=decode_floats(d["sigma2"]) if "sigma2" in d else nan,
                       **{k: decode_floats(d[k]) for k in ("max_logprob", "mentr", "top_logprobs", "projection")
                          if k in d})


def decode(answers: dict) -> tuple[TokenScores, dict[str, TokenScores], list[TokenScores]]:
    """``encode``'s inverse: the target's scores, the perturbed ones, the references'.
    ValueError (or KeyError, TypeError) on answers that are not ``encode``'s."""
    t = _token_scores(answers["target"])
    pert = {k: _token_scores(v, t.token_ids) for k, v in answers["perturbed"].items()}
    refs = [_token_scores(r, t.token_ids) for r in answers["references"]]
    return t, pert, refs


def recompute(text: str, answers: dict, config: FeatureConfig) -> dict[str, float]:
    """The row of one passage from its recorded answers, the same calls extraction makes: the
    gray-box columns by ``gray_rows`` on ``decode``d answers (when they hold a gray part), the
    black-box ones by ``features.black_answers.black_row`` (when they hold a ``black`` part)."""
    row, twin_ids = {}, answers.get("twin_ids")
    if "target" in answers:
        t, pert, refs = decode(answers)
        row |= gray_rows([text], [t], {k: [v] for k, v in pert.items()}, [[r] for r in refs], config, [twin_ids])[0]
    if black_answers.BLACK in answers:
        row |= black_answers.black_row(text, black_answers.decode(answers[black_answers.BLACK]), config, twin_ids)
    return row
