"""Which way is "member-like" for each feature column, known before any data is seen.

Members of the training data are fitted better by the target model: lower perplexity, higher
(Min-K%, Min-K%++, STRIP-K%, zlib-normalised) log-likelihoods, a lower loss relative to a
reference model, more Error-Zone upward shifts, a larger likelihood drop under
perturbation, continuations closer to the true suffix, more greedy tokens right, more confident
and lower-entropy predictions (BADI App. A.2, A.6; EZ-MIA Sec. 3; TDDBench App. A.1.1;
the score functions of trainspotter.evaluation.mia use the same signs). Each column's direction is
part of its catalogue entry (``FeatureSpec.direction``); this module reads it. The sequential test
constrains its scoring model to these directions (``TestConfig.oriented``), so that a
held-out set that is *more* member-like than the suspect set (members leaking into it,
BADI App. D.6) lowers the wealth instead of raising it.
"""

from __future__ import annotations

import re
from functools import cache

from trainspotter.features.catalog import EVERY_COLUMN, catalog

__all__ = ["direction", "directions"]


def _stem(column: str) -> str:
    """The column's name without its access prefix (``gray_``, ``black_``, the benchmark's ``petal_``)."""
    return column.partition("_")[2]


@cache
def _known() -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """The catalogue's directions by exact name, by stem, and by stem with its number generalised
    (``min_k_#``: any percent); a stem or family whose entries disagree (``top_p_#``) is left out."""
    exact = {s.name: s.direction for s in catalog(EVERY_COLUMN, "both")}
    by_stem: dict[str, set[int]] = {}
    by_family: dict[str, set[int]] = {}
    for name, sign in exact.items():
        by_stem.setdefault(_stem(name), set()).add(sign)
        by_family.setdefault(_family(_stem(name)), set()).add(sign)
    agreed = lambda table: {k: v.pop() for k, v in table.items() if len(v) == 1}  # noqa: E731
    return exact, agreed(by_stem), agreed(by_family)


def _family(stem: str) -> str:
    return re.sub(r"_\d+$", "_#", stem)


def direction(column: str) -> int:
    """+1 if larger values of ``column`` are more member-like, −1 if smaller ones are, from its
    catalogue entry (``features.catalog``): by name, else by the name after its prefix (a
    benchmark's ``petal_ppl`` is ``black_ppl``), else by its family (``gray_min_k_37``); 0 if the
    column is not in the catalogue (its direction is then learned)."""
    exact, by_stem, by_family = _known()
    if column in exact:
        return exact[column]
    stem = _stem(column)
    return by_stem.get(stem, by_family.get(_family(stem), 0))


def directions(columns: list[str]) -> list[int]:
    return [direction(c) for c in columns]
