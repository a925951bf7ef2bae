"""Which way is "member-like" for each feature column, known before any data is seen.

Members of the training data are fitted better by the target model: lower perplexity, higher
(Min-K%, Min-K%++, STRIP-K%, zlib-normalised) log-likelihoods, a lower loss relative to a
reference model, more Error-Zone upward shifts, a larger likelihood drop under
perturbation, continuations closer to the true suffix, more greedy tokens right, more confident
and lower-entropy predictions (BADI App. A.2, A.6; EZ-MIA Sec. 3; TDDBench App. A.1.1;
the score functions of trainspotter.evaluation.mia use the same signs). The sequential test
constrains its scoring model to these directions (``TestConfig.oriented``), so that a
held-out set that is *more* member-like than the suspect set (members leaking into it,
BADI App. D.6) lowers the wealth instead of raising it.
"""

from __future__ import annotations

import re

__all__ = ["direction", "directions"]

_RULES = [  # (pattern on the column name, +1: higher = member-like, -1: lower = member-like); first match
    (r"^gray_twin_(lp|ref_diff)$", +1),  # features.twin_positions (before _ref_diff): log p at changed tokens
    (r"_ppl$", -1),
    (r"_ref_(ratio|diff)$", -1),
    (r"_refs_diff$", -1),
    (r"_refs_(lira|token_lira|rmia)$", +1),
    (r"_zlib_ratio$", +1),
    (r"_min_kp?p?_\d+$", +1),
    (r"_strip_k_\d+$", +1),
    (r"_pert_(ratio|diff)_", +1),
    (r"_ez$", +1),
    (r"^black_seq_bertscore", +1),
    (r"_match_rate$", +1),
    (r"_ref_(match|seq)_diff$", +1),
    (r"_(conf|true_p|top_p_1|margin)$", +1),
    (r"_pert_match_rate_", +1),  # TDDBench's metric-based criteria: confident on members
    (r"_(ent|ment)$", -1),
]


def direction(column: str) -> int:
    """+1 if larger values of ``column`` are more member-like, −1 if smaller ones are,
    0 if the column is not in the catalogue (its direction is then learned)."""
    for pattern, sign in _RULES:
        if re.search(pattern, column):
            return sign
    return 0


def directions(columns: list[str]) -> list[int]:
    return [direction(c) for c in columns]
