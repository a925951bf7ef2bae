"""What a publisher reads before committing to a keyed lexical release (issue 63): every place in the
originals where the key may change the text, grouped by unit, with counts and the forms the key
chooses among. The key does not exist yet (it derives from a later beacon round), so the review
shows each unit's choice, not the one the key will make; after reading it the publisher can leave
units out (``keyed make --exclude``) and make again before publishing the commitment. A unit's
every occurrence is written in the key's one form, the same in every passage."""

from __future__ import annotations

from pathlib import Path

from trainspotter.keyed.units import LexicalForms

__all__ = ["REVIEW", "review", "write_review"]

REVIEW = "review.md"
_CONTEXT = 60  # characters either side of an occurrence


def review(forms: LexicalForms, originals: list[dict]) -> str:
    """The review as Markdown: a summary line, then one section per unit (most occurrences first)
    listing its forms and every occurrence in context, the span in bold."""
    where: dict[str, list[tuple[str, str]]] = {}
    words = sum(len(o["text"].split()) for o in originals)
    for o in originals:
        text = o["text"]
        for start, unit, form in forms.occurrences(text):
            if form == forms.forms[unit][0]:  # the unit as the original writes it: where the key's form goes
                end = start + len(form)
                before, after = text[max(0, start - _CONTEXT):start], text[end:end + _CONTEXT]
                where.setdefault(unit, []).append((o["id"], f"…{before}**{form}**{after}…".replace("\n", " ")))
    shown = sum(len(v) for v in where.values())
    passages = len({i for v in where.values() for i, _ in v})
    lines = [f"# Review of a keyed release: {len(where)} units, {shown} places in {passages} of {len(originals)} "
             f"passages", "",
             f"The key will write each unit below in one of its forms, the same everywhere: at most {shown} places "
             f"in {words} words change. Leave a unit out with `keyed make --exclude UNIT,UNIT` (a new --out), "
             "before the commitment is published.", ""]
    for unit, places in sorted(where.items(), key=lambda r: (-len(r[1]), forms.forms[r[0]][0])):
        names = forms.forms[unit]
        lines += [f"## {names[0]} ({len(places)} places)", "", "forms: " + " | ".join(f"`{f}`" for f in names), ""]
        lines += [f"- {i}: {context}" for i, context in places] + [""]
    return "\n".join(lines)


def write_review(forms: LexicalForms, originals: list[dict], folder: str | Path) -> Path:
    path = Path(folder) / REVIEW
    path.write_text(review(forms, originals), encoding="utf-8")
    return path
