"""The forced choice's plans compared (``benchmarks/bench_keyed_contexts.py``, which says how): each
unit's exact form probabilities in its first contexts (``keyed.queries.choice_shares``), plans of C
contexts × K draws drawn from them within a token budget, the e-process on the pooled shares."""

from __future__ import annotations

import numpy as np

__all__ = ["PLANS", "draw_plan", "render_contexts", "shares", "simulate"]

# (contexts, draws in each); several contexts with at least 32 draws a unit (at most 625 units in 20,000 tokens)
PLANS = [(1, 16), (1, 32), (1, 64), (2, 16), (4, 8), (4, 16), (8, 4), (8, 8), (16, 2), (16, 4)]


def shares(bed, target, reference, trial: int, max_contexts: int, many: int, units: int) -> list[dict]:
    """Per unit of a suite trial's forced choice on ``target`` (the plan's order): each context's
    cost per draw and form probabilities relative to ``reference``, the first ``many`` units in up to
    ``max_contexts`` contexts, the next ones (to ``units``) in their first context only."""
    from trainspotter.evaluation.keyed_suite_report import choice_passages
    from trainspotter.evaluation.keyed_suite import KeyedSuiteConfig
    from trainspotter.keyed.queries import branchings, choice_plan, choice_shares
    from trainspotter.keyed.units import Seen

    passages = choice_passages(bed, KeyedSuiteConfig(testbed=bed.name), trial)
    plan = choice_plan(bed.scoring.forms, target.tokenizer, passages, Seen(), 1, max_contexts)[:units]
    plan = [(unit, where if k < many else where[:1]) for k, (unit, where, _) in enumerate(plan)]
    h = iter(choice_shares(target, [(c, seqs) for _, where in plan for _, c, seqs in where], reference))
    return [{"unit": unit, "cost": [branchings(seqs) for *_, seqs in where], "h": [next(h).tolist() for _ in where]}
            for unit, where in plan]


def draw_plan(units: list[dict], contexts: int, samples: int, budget: int,
              rng: np.random.Generator) -> tuple[list[dict], list[int]]:
    """One draw of a plan: the units (in order) whose draws at their most fit the budget, each
    ``samples`` draws in each of its first ``contexts`` contexts, pooled into one record; and the
    tokens spent by each unit's end."""
    records, spent, total = [], [], 0
    for u in units:
        cost = samples * sum(u["cost"][:contexts])
        if total + cost > budget:
            break
        total += cost
        counts = sum(rng.multinomial(samples, np.asarray(h) / np.sum(h)) for h in u["h"][:contexts])
        records.append({"unit": u["unit"], "h": (counts / counts.sum()).tolist()})
        spent.append(total)
    return records, spent


def simulate(bed, units: list[dict], contexts: int, samples: int, budget: int, alpha: float,
             rng: np.random.Generator) -> dict:
    """The e-process on one draw of a plan, its units weighed by n_u (``rejected``: as the gray-box weighs,
    and the forced choice did when these plans were compared) and unweighted (``flat``: as the audit
    weighs the forced choice since)."""
    from trainspotter.stats.eprocess import EProcessConfig
    from trainspotter.stats.exact_null import unit_eprocess

    records, spent = draw_plan(units, contexts, samples, budget, rng)
    x, p = bed.scoring.outcomes(records, bed.key)
    test = EProcessConfig(alpha=alpha)
    proc = unit_eprocess(x, p, test, w=bed.scoring.weights(records))
    flat = unit_eprocess(x, p, test)
    return {"rejected": bool(proc.rejected), "flat": bool(flat.rejected), "units": len(records),
            "spent": spent[proc.stop_time - 1] if proc.rejected else budget}


def render_contexts(report: dict) -> str:
    lines = ["# Keyed forced choice: contexts or draws", "",
             f"`python benchmarks/bench_keyed_contexts.py` ({report['date']}, {report['seconds']:.0f} s): testbed "
             f"`{report['testbed']}`, exploration trials {report['trials'][0]}–{report['trials'][-1]} (the keyed "
             f"suite reports trials 0–39), {report['draws']} draws of each plan from the exact form probabilities "
             f"(relative to the reference), {report['budget']:,} generated tokens, α = {report['alpha']}. A plan: "
             "each unit asked in its first context in each of C neutral passages, K draws in each, pooled; the "
             "units the release shows most first. The units of a trial are the same for every plan; only how "
             "many fit the budget changes. Units past the "
             f"first {report['many']} have only their first context measured, so plans of several contexts stop "
             "there (marked *capped* where one did).", "",
             "| contexts C | draws K | e-process TPR, weighed by n_u | unweighted (the audit's rule) | units asked "
             "| median tokens to decision |",
             "|---|---|---|---|---|---|"]
    for r in report["plans"]:
        lines.append(f"| {r['contexts']} | {r['samples']} | {r['tpr']:.2f} | {r['flat_tpr']:.2f} | "
                     f"{r['units']:.0f}{' (capped)' if r['capped'] else ''} | {r['median_spent']:,.0f} |")
    return "\n".join(lines) + "\n"
