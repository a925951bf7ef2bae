"""The Error Zone score (EZ-MIA Sec. 3.3–3.4, App. D–E).

At error positions E = {t : argmax_v p_θ(v|x_<t) ≠ x_t} of the target θ (Eq. 2),
the log-prob shift δ_t = ℓ_θ(t) − ℓ_θ̂(t) against the reference θ̂ (Eq. 1) is split
into upward mass P = Σ_E [δ_t]_+ and downward mass N = Σ_E |[δ_t]_-| (Eq. 3/6), and
EZ = P / N (Eq. 4/7): the odds that probability moved up rather than down. Members
push it above 1 (App. D.6). Needs the same tokenizer for target and reference
(positions must align).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

EZ_CAP = 1e3  # "∞ (or a large constant)" of App. E.5–E.6, finite so a linear scorer can use it


def error_zone(target_logprobs: Sequence[float], reference_logprobs: Sequence[float],
               target_argmax: Sequence[int], token_ids: Sequence[int],
               cap: float | None = None) -> float:
    """EZ(x) = P/N over the target's error positions (EZ-MIA Eq. 1–4).

    Edge cases, as EZ-MIA App. E says:
    - zero error positions (every token predicted right): undefined; E.5 recommends
      "treating such samples as members" -> the member extreme, ``inf`` (or ``cap``);
    - N = 0 and P > 0 (all movement upward): E.6 "assign EZ = ∞ (or a large
      constant)" -> ``inf`` (or ``cap``);
    - P = N = 0 with errors present (no movement at all, e.g. target == reference):
      not covered by the paper; we return the neutral point EZ = 1 (App. D.5:
      "EZ = 1 as the neutral point"), since nothing moved either way.
    With ``cap``, every result is clipped to at most ``cap``.
    """
    lt = np.asarray(target_logprobs, dtype=np.float64)
    lr = np.asarray(reference_logprobs, dtype=np.float64)
    if lt.shape != lr.shape:
        raise ValueError(f"target and reference positions differ ({lt.size} vs {lr.size}): "
                         "EZ needs the same tokenizer for both models")
    errors = np.asarray(target_argmax) != np.asarray(token_ids)
    top = math.inf if cap is None else float(cap)
    if not errors.any():
        return top
    delta = (lt - lr)[errors]
    p = float(np.clip(delta, 0, None).sum())
    n = float(-np.clip(delta, None, 0).sum())
    if n == 0.0:
        return top if p > 0 else 1.0
    return min(p / n, top)
