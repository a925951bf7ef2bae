"""The rounds of a twins audit (``trainspotter.twins``; ``AuditConfig.twins_private``, issue 35).

``one`` (the audit before issue 35): per passage one private variant, drawn with the audit's
seed (``draw_private``), and each round is one pair (public, that private variant).

``all``: per passage every private variant, and each round is one passage: its public version
against each of its k − 1 private variants, as m = k − 1 sub-pairs, in file (variant) order

    (f(public | private_j), f(private_j | public)),  j over the private variants,

bet on once with the mean of the sub-pairs' payoffs (``stats.sequential``, "Sub-pairs": valid
because the public index is uniform among the k variants under H0). The twin-dependent features
(``features.twin_positions``) read each version against the other one of its sub-pair, so the
public version's row of sub-pair j carries private_j as its twin. With k = 2 the two are the same
audit, pair for pair.

The sides in memory: ``one``, the public versions and the drawn private ones, aligned (as
``make_pairs(..., paired=True)`` takes them); ``all``, the public versions and every private
variant (ids ``ID#VARIANT``), in file order: ``every_round`` groups them per passage and orders
the passages as ``make_pairs`` orders the pairs of ``one`` (the same seed, the same order).

The guards (the blind check and the placebo check) see the pairs of ``one`` in both cases
(``guard_pairs``): the public version against the private variant that the seed draws. They are
exchangeable under H0 by the uniform draw of the public version and of that private variant; the
public version against the *first* private variant would not be (variant 0 is often the original
text, so it would stand on the held-out side far more often than on the suspect side).
"""

from __future__ import annotations

import random

from trainspotter.data import Passage, make_pairs, pair_indices, query_fields
from trainspotter.errors import InputError

__all__ = ["TWINS_PRIVATE", "audit_guard_pairs", "audit_rounds", "batch_queries", "draw_private", "every_round",
           "guard_pairs", "passage_of", "unused"]

TWINS_PRIVATE = ("all", "one")

Round = list[tuple[Passage, Passage]]


def draw_private(passage_id: str, private: list[int], seed: int) -> int:
    """The private variant of a passage that an audit with ``seed`` pairs with its public version
    (``private``: the private variants' indices, sorted)."""
    return private[0] if len(private) == 1 else random.Random(f"{seed}:twin:{passage_id}").choice(private)


def passage_of(private_id: str) -> tuple[str, int]:
    """A private variant's passage id and variant index, from its id ``ID#VARIANT``."""
    passage, _, variant = private_id.rpartition("#")
    if not passage or not variant.isdigit():
        raise InputError(f"private variant id {private_id!r}: expected ID#VARIANT")
    return passage, int(variant)


def _groups(suspect: list[Passage], heldout: list[Passage]) -> list[list[Passage]]:
    """``heldout`` (private variants, ids ``ID#VARIANT``) per public passage of ``suspect``, in
    file order; InputError for a passage with none or a variant of no public passage."""
    groups: dict[str, list[Passage]] = {p["id"]: [] for p in suspect}
    for p in heldout:
        passage = passage_of(p["id"])[0]
        if passage not in groups:
            raise InputError(f"private variant {p['id']!r}: no public version of passage {passage!r}")
        groups[passage].append(p)
    empty = [i for i, g in groups.items() if not g]
    if empty:
        raise InputError(f"passage {empty[0]!r}: no private variant to pair its public version with")
    return list(groups.values())


def every_round(suspect: list[Passage], heldout: list[Passage], seed: int = 0,
                max_rounds: int | None = None) -> list[Round]:
    """The rounds of ``all`` (module docstring): per passage, in the order ``make_pairs`` gives
    the passages with ``seed`` (at most ``max_rounds`` of them), the sub-pairs (public version with
    private_j as its twin, private_j) for j in file order."""
    groups = _groups(suspect, heldout)
    order = pair_indices(len(suspect), len(suspect), seed, max_rounds, paired=True)
    return [[(suspect[i] | {"twin": y["text"]}, y) for y in groups[i]] for i, _ in order]


def guard_pairs(suspect: list[Passage], heldout: list[Passage], seed: int = 0, every: bool = False,
                max_pairs: int | None = None) -> list[tuple[Passage, Passage]]:
    """The pairs the blind and placebo checks see (module docstring): of ``one``'s sides as they
    are; of ``all``'s (``every``), the public version and the private variant drawn with ``seed``."""
    if every:
        drawn = []
        for p, group in zip(suspect, _groups(suspect, heldout)):
            j = draw_private(p["id"], sorted(passage_of(y["id"])[1] for y in group), seed)
            drawn.append(next(y for y in group if passage_of(y["id"])[1] == j))
        suspect = [p | {"twin": y["text"]} if "twin" in p else p for p, y in zip(suspect, drawn)]
        heldout = drawn
    return make_pairs(suspect, heldout, seed=seed, max_pairs=max_pairs, paired=True)


def unused(suspect: list[Passage], heldout: list[Passage], used: set[str]) -> tuple[list[Passage], list[Passage]]:
    """The passages of a continued twins audit not bet on before (``used``: the public versions'
    ids): a passage whose public version was bet on leaves with every private variant of it."""
    return ([p for p in suspect if p["id"] not in used],
            [p for p in heldout if passage_of(p["id"])[0] not in used])


def audit_rounds(config, suspect: list[Passage], heldout: list[Passage]) -> list[Round]:
    """An audit's rounds (``config``: an ``AuditConfig``): twins ``all``, ``every_round``; else
    one pair each, the pairs of ``make_pairs``. At most ``config.max_pairs`` rounds."""
    if config.every_private:
        return every_round(suspect, heldout, config.seed, config.max_pairs)
    return [[pair] for pair in make_pairs(suspect, heldout, seed=config.seed, max_pairs=config.max_pairs,
                                          paired=config.paired)]


def audit_guard_pairs(config, suspect: list[Passage], heldout: list[Passage]) -> list[tuple[Passage, Passage]]:
    """Every available pair of the blind and placebo checks (``guard_pairs``; ``config``: an
    ``AuditConfig``), in the order of the audit's rounds."""
    if config.every_private:
        return guard_pairs(suspect, heldout, config.seed, every=True)
    return make_pairs(suspect, heldout, seed=config.seed, paired=config.paired)


def batch_queries(batch: list[Round], every: bool = False, twin_features: bool = False
                  ) -> tuple[list[Passage], list[int], list[int] | None]:
    """What one batch of rounds asks the model: the passages to extract (``query_fields``), for
    each sub-pair's suspect row then each one's held-out row the index of its passage there, and
    the rounds' sizes (None: one pair each). Without ``every``: the suspect passages then the
    held-out ones, as the audit always queried them. With ``every`` (twins "all") a text is asked
    once per batch: the public version once per round, or with the twin-dependent features
    (``twin_features``: its row depends on its twin) once per private variant."""
    pairs = [pair for r in batch for pair in r]
    wanted = [query_fields(p) for p in [x for x, _ in pairs] + [y for _, y in pairs]]
    if not every:
        return wanted, list(range(len(wanted))), None
    passages: list[Passage] = []
    seen: dict[tuple, int] = {}
    where = []
    for q in wanted:
        key = (q["id"], q["text"], q.get("twin") if twin_features else None)
        if key not in seen:
            seen[key] = len(passages)
            passages.append(q)
        where.append(seen[key])
    return passages, where, [len(r) for r in batch]
