"""Changed-position features of a twins audit: the target's fit at the tokens where a passage
differs from its twin (issue 35; ``trainspotter.twins``).

A twins audit pairs each passage's public version A (suspect) with its private twin B
(held-out). The keyed lexical rewriter changes few words (~13% between versions), so a whole-passage feature
(perplexity, Min-K%, RefL) averages the signal at the changed words with the noise of the
context the two versions share. Here a passage's feature is computed only at its *changed
tokens*: the positions of its target-tokenizer token ids that are not in a matching block of
``difflib.SequenceMatcher`` (no junk heuristic) against its twin's token ids.

- ``gray_twin_lp``: mean target log p(x_i | x_<i) at the changed tokens (a LOSS attack, Yeom et
  al. 2018, restricted to the positions that tell the versions apart).
- ``gray_twin_ref_diff``: mean (target − reference) log p there: the reference calibration of
  Carlini et al. 2021 (RefL, BADI App. A.2 item 5) at the changed tokens, so that a
  substituted word's rarity, which hits both models alike, cancels.

A black-box twins audit (label-only: the target's greedy token at each position) has the same
two columns on the log-probabilities estimated from the greedy tokens (``black_twin_lp``,
``black_twin_ref_diff``; BADI App. A.6, as every black column) and ``black_twin_match``: the
share of the changed tokens at which the target's greedy token, given the passage's own prefix,
is the passage's token. A model trained on the public version has seen its word choices in
their context: it names them more often than the private version's (a radioactivity count,
Sander et al. 2024, of one passage's choices; label-only, Choquette-Choo et al. 2021).

All are member-like when larger (their ``features.catalog`` entries). A passage whose tokens all match
its twin's (the twin only adds tokens, or the two are equal in the audited tokens) is measured at
all its tokens instead, so the columns stay finite (the audit drops a column that is not finite on
its first batch). A passage without a twin gets NaN, and ``*_twin_ref_diff`` is NaN where the
reference tokenizes the passage differently (its log-probs are then not position-aligned).

Validity. The feature of A is f(A | B), of B is f(B | A), for one fixed function f of (passage,
twin) and the models. Under H0 (no version trained on) which of A, B was published was decided
by a fair coin after both existed, so swapping the two versions swaps the two features: the
pair (X, Y) = (f(A | B), f(B | A)) is exchangeable, and the BADI e-process (Sec. 4) on such
pairs stays a test supermartingale. Nothing about the twin is used except its text.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import numpy as np

__all__ = ["changed_mask", "columns", "twin_row"]


def changed_mask(token_ids: Sequence[int], twin_ids: Sequence[int]) -> np.ndarray:
    """Boolean mask over ``token_ids``: True where the token is not part of a block that
    ``difflib.SequenceMatcher(autojunk=False)`` matches with ``twin_ids`` (a changed token)."""
    a, b = [int(x) for x in token_ids], [int(x) for x in twin_ids]
    mask = np.ones(len(a), dtype=bool)
    for i, _, size in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        mask[i:i + size] = False
    return mask


def _mean_at(values: np.ndarray | None, mask: np.ndarray) -> float:
    if values is None or not mask.any():  # (an empty passage)
        return float("nan")
    return float(np.mean(np.asarray(values, dtype=float)[mask]))


def columns(access: str) -> tuple[str, ...]:
    """The changed-position columns of ``access`` ("gray" or "black")."""
    return (f"{access}_twin_lp", f"{access}_twin_ref_diff") + (("black_twin_match",) if access == "black" else ())


def twin_row(token_ids, logprobs, twin_ids, reference_ids=None, reference_logprobs=None, *,
             access: str = "gray", argmax=None) -> dict[str, float]:
    """The changed-position columns of one passage; ``twin_ids``: its twin's token ids under the
    same tokenizer (None: no twin, NaN); ``logprobs``: the target's (black: estimated); reference
    arrays: the (first) reference's; ``argmax``: the target's greedy tokens (black)."""
    if twin_ids is None:
        return dict.fromkeys(columns(access), float("nan"))
    mask = changed_mask(token_ids, twin_ids)
    if not mask.any():  # nothing of its own to measure: the whole passage (module docstring)
        mask = np.ones_like(mask)
    row = {f"{access}_twin_lp": _mean_at(logprobs, mask)}
    if reference_logprobs is not None:
        aligned = reference_ids is not None and np.array_equal(np.asarray(reference_ids), np.asarray(token_ids))
        row[f"{access}_twin_ref_diff"] = (_mean_at(np.asarray(logprobs) - np.asarray(reference_logprobs), mask)
                                          if aligned else float("nan"))
    if access == "black":
        row["black_twin_match"] = _mean_at(np.asarray(argmax) == np.asarray(token_ids), mask)
    return row
