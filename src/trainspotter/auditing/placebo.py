"""The placebo check: would the same audit, with a model that never saw either set in the
target's place, also say "trained on"?

The blind check (trainspotter.stats.blind) sees only the words; a language model sees far
more of what makes one text easier than another, and on small sets it sees it within a few
pairs, long before a text-only check can (issue 34, ``benchmarks/results/shift.md``). So the
audit runs its own sequential test once more, on the **reference model's own features**: the
first reference in the target's place (the other references, if any, as its references; the
same feature set and access, reference-relative features left out when none remain). The
reference never trained on the suspect set, so whatever separation it shows is not evidence
of training; when its e-process reaches 1/α the verdict is "inconclusive".

Validity. The placebo never sees the target's answers: its W is a function of the reference's
features alone, so the model's test keeps its guarantee (P(sup W ≥ 1/α) ≤ α under H0, BADI
Sec. 4) and "trained on" — the model rejects and neither guard fires — is rarer still. On an
IID split the reference's features of the two sets are exchangeable (it saw neither), so its
W is a test supermartingale too and fires with probability ≤ α (Ville): the guard costs at
most α of the true rejections. It runs on every available pair (as the blind check does), in
the audit's pair order, only when the model's test rejected: otherwise it cannot change the
verdict.
"""

from __future__ import annotations

from trainspotter.auditing.auditor import Auditor
from trainspotter.auditing.config import ExtractFn
from trainspotter.auditing.verdict import PlaceboResult
from trainspotter.data import query_fields
from trainspotter.stats.sequential import TestConfig

__all__ = ["run_placebo"]


def run_placebo(model: str, pairs: list[tuple[dict, dict]], extract_fn: ExtractFn, test: TestConfig,
                batch_pairs: int) -> PlaceboResult:
    """The sequential test ``test`` on the placebo model's feature rows (``extract_fn``, called
    as the audit calls its own, batch by batch) over ``pairs``, stopping at the first W ≥ 1/α."""
    auditor = Auditor(test)
    for batch_no, start in enumerate(range(0, len(pairs), batch_pairs)):
        batch = pairs[start:start + batch_pairs]
        passages = [query_fields(p) for p in [x for x, _ in batch] + [y for _, y in batch]]  # as the audit's
        rows = extract_fn(passages, batch_no)
        sides = ["suspect"] * len(batch) + ["heldout"] * len(batch)
        if auditor.feed([dict(r, id=p["id"], set=s) for r, p, s in zip(rows, passages, sides)]):
            break
    e = auditor.test
    if e is None:
        return PlaceboResult(ran=False, model=model, alpha=test.alpha)
    result = PlaceboResult(ran=True, model=model, fired=bool(e.rejected), e_value=float(e.e_value),
                           max_wealth=float(e.max_wealth), p_value=float(e.p_value), pairs_used=int(e.t),
                           pairs_available=len(pairs), stop_time=e.stop_time, alpha=test.alpha,
                           features=auditor.columns, wealth=[float(w) for w in e.history["wealth"]])
    result._rows = auditor.rows
    return result
