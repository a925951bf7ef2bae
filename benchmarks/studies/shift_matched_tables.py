"""The matched audit's tables (``benchmarks/bench_shift_matched.py``; issue 36): shift-matched.md
from the runs' JSON (``render``), several runs merged into one table (``merge``) and the section
of shift.md that repeats its tables (``shift_section``, ``with_shift_section``). Rows come from
``studies.shift_matched_runs``; rates carry the one-sided binomial p of rate ≤ α
(``evaluation.shift_suite._rate``)."""

from __future__ import annotations

__all__ = ["INTRO", "SECTIONS", "cell", "render", "merge", "shift_section", "with_shift_section"]


def cell(r: dict) -> str:
    """A rate with its binomial p, **bold** where p < 0.05."""
    return f"**{r['rate']:.3f}** (p {r['binom_p']:.2g})" if r["binom_p"] < 0.05 else f"{r['rate']:.3f} (p {r['binom_p']:.2g})"


INTRO = ("Per trial: n passages per side drawn as in shift.md (the same generators, so the default audit runs "
         "on the very same draws); the default audit's blind check on the draw; where it fired, as the audit "
         "does, `match_pairs` on the drawn texts (cross-fitted TF-IDF + surface propensity, optimal matching "
         "within 0.2 SD of its logit; Rosenbaum & Rubin 1983, Rosenbaum 1989, Austin 2011) and on the matched "
         "pairs only the blind check, the placebo check and the model's test, and the matched verdict (`decide`, "
         "then `matched_verdict`: fewer matched pairs than the test needs to reach 1/α is *overlap*); where it "
         "did not fire, the default audit's verdict on every pair. *matched trials*: share of trials matched "
         "(the blind check fired on the draw); *pairs*: mean matched pairs in those trials; *overlap*: share of "
         "them inconclusive for too few pairs; *default*: \"trained on\" of `--shift-check stop` on the same "
         "draws; *match*: of `--shift-check match`, with the one-sided binomial p of rate ≤ α (α = {alpha:g}; "
         "**bold**: p < 0.05); *inconclusive*: share of all trials without a verdict; *to decision*: censored "
         "mean pairs (no rejection counts the pairs it had); *no shift, same pairs*: alternatives only, \"trained "
         "on\" of the default audit with the same members against unseen passages of their own kind (unseen "
         "modern leads for modern members, unseen Wikipedia leads for members against Python docs, ...) at "
         "the mean matched pairs, on as many trials: what these members' signal gives that many pairs with "
         "no shift at all.")
SECTIONS = (("null", "Null shifts: neither model saw either set (every \"trained on\" is false)"),
            ("alternative", "Alternatives: members of one kind vs unseen text of another (\"trained on\" is right)"),
            ("iid", "IID splits (members: H1; non-members: H0)"))


def _most_trials(summary: dict, part: str, audit: str, key, suspect: str | None = None) -> dict:
    """{key(row): the row of ``part`` with ``audit`` (and ``suspect``) that has the most trials}: a
    merged table keeps a rerun with more trials beside the shorter run it supersedes."""
    best = {}
    for s in summary["scenarios"]:
        if (s["part"] == part and audit in s["tests"] and suspect in (None, s["suspect"])
                and s["trials"] > best.get(key(s), {"trials": 0})["trials"]):
            best[key(s)] = s
    return best


def _rows(summary: dict, part: str, audit: str) -> list[str]:
    """The table of one part: per scenario and size, the row with the most trials."""
    rows = sorted(_most_trials(summary, part, audit, lambda s: (s["kind"], s["suspect"], s["size"])).values(),
                  key=lambda s: (s["kind"], s["suspect"], s["size"] or 10**9))
    if not rows:
        return []
    extra = part == "alternative"
    lines = ["| scenario | suspect | held-out | n | trials | matched trials | pairs | overlap | inconclusive | default "
             "| match | to decision |" + (" no shift, same pairs |" if extra else ""), "|---" * (12 + extra) + "|"]
    for s in rows:
        t = s["tests"][audit]
        same = s.get("same_kind", {}).get(audit)
        lines.append(f"| {s['kind']} | {s['suspect']} | {s['heldout']} | {s['pairs']}{' (all)' if s['size'] == 0 else ''} "
                     f"| {s['trials']} | {s['matched_trials']['rate']:.3f} | {s['matched_mean']:.1f} "
                     f"| {t['arm']['overlap']:.3f} | {t['inconclusive']:.3f} | {t['default']['rate']:.3f} "
                     f"| {cell(t['trained_on'])} | {t['censored_pairs']:.1f} |"
                     + (f" {same['rate']:.3f} |" if extra and same else " — |" if extra else ""))
    return lines + [""]


def _iid_cost(summary: dict, audit: str) -> list[str]:
    iid = _most_trials(summary, "iid", audit, lambda s: s["size"], suspect="member")
    iid = [iid[k] for k in sorted(iid, key=lambda n: n or 10**9)]
    if not iid:
        return []
    return ["IID cost: share of the default audit's true \"trained on\" (members) that `--shift-check match` does "
            "not give on the same draws, and share of trials it adds: " + "; ".join(
                f"n {s['pairs']}: lost {s['tests'][audit]['lost']:.3f}, added {s['tests'][audit]['gained']:.3f} "
                f"({s['trials']} trials)" for s in iid) + ".", ""]


def render(summary: dict, alpha: float, audit: str = "gray") -> str:
    lines = ["# Held-out shift suite: the matched audit (`--shift-check match`, gray + reference)", "",
             summary["header"], "", INTRO.format(alpha=alpha), ""]
    for part, title in SECTIONS:
        rows = _rows(summary, part, audit)
        lines += [f"## {title}", "", *rows] if rows else []
    return "\n".join(lines + _iid_cost(summary, audit)) + "\n"


def merge(runs: list[tuple[str | None, dict]], note: str) -> dict:
    """One summary from several runs' (e.g. the small sizes and the whole pools run side by side),
    each (label or None, its summary): their scenarios, sizes in order, and each run's header. A
    labelled run's rows are labelled so (rows labelled already keep theirs). A row of a later run
    replaces the row of an earlier one for the same scenario, size and audits (a rerun with more
    trials), so the table keeps earlier rows where not re-run (e.g. the other audits' rows when a
    rerun ran only ``--audits gray``)."""
    rows = {}
    for label, r in runs:
        for s in r["scenarios"]:
            key = (s["part"], s["kind"], s["suspect"], s["heldout"], s["size"], tuple(sorted(s["tests"])))
            rows[key] = {**s, **({"run": label} if label and "run" not in s else {})}
    scenarios = sorted(rows.values(), key=lambda s: s["size"] or 10**9)
    header = " ".join((f"{label[:1].upper() + label[1:]}: " if label else "") + r["header"].rstrip(".") + "."
                      for label, r in runs) + (f" {note}" if note else "")
    return {"header": header, "scenarios": scenarios, "match_seconds": runs[-1][1]["match_seconds"]}


START, END = "<!-- shift-matched: start -->", "<!-- shift-matched: end -->"


def shift_section(summary: dict, alpha: float = 0.05, audit: str = "gray") -> str:
    """shift.md's section on the matched audit (the one form the CLI allows, gray + reference):
    the tables of shift-matched.md and the IID cost."""
    lines = [START, "## The matched audit (`--shift-check match`, gray + reference): both sides", "",
             "From `benchmarks/results/shift-matched/shift-matched.md` (made by `benchmarks/bench_shift_matched.py`; "
             "its header has each run's config and commit). " + INTRO.format(alpha=alpha), ""]
    for part, title in SECTIONS:
        rows = _rows(summary, part, audit)
        lines += [f"**{title}**", "", *rows] if rows else []
    return "\n".join(lines + _iid_cost(summary, audit) + [END]) + "\n"


def with_shift_section(text: str, summary: dict) -> str:
    """shift.md's ``text`` with the matched audit's section (``shift_section``) put, or replaced,
    at its end."""
    if START in text:
        text = text[:text.index(START)] + text[text.index(END) + len(END) + 1:]
    return text.rstrip("\n") + "\n\n" + shift_section(summary)
