"""What a keyed lexical release changes, version 2 against version 3 (issue 63 item 1), on 200
Wikipedia leads the rewriter's table was not written from: the share of words changed, the units,
and a random sample of version 3's changes in context for a copy editor to judge (the judgement is
committed beside it, results/keyed-precision/judged.tsv).

    python benchmarks/bench_keyed_precision.py   # writes results/keyed-precision/{summary.json,sample.txt}
"""

import difflib
import json
import random
from pathlib import Path

from trainspotter.assets import wikipedia_leads
from trainspotter.keyed.units import LexicalForms
from trainspotter.rewriters.lexical import KeyedLexicalRewriter

OUT = Path(__file__).parent / "results" / "keyed-precision"


def leads(n: int = 200, seed: int = 63) -> list[dict]:
    """n leads of 60+ words drawn from the last 1,033 (the table was written without reading them)."""
    pool = [r for r in wikipedia_leads()[9000:] if len(r["text"].split()) >= 60]
    return random.Random(seed).sample(pool, n)


def changes(original: str, rewritten: str) -> list[tuple[str, str, str]]:
    """(context, was, now) for each changed span, words compared."""
    a, b = original.split(), rewritten.split()
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            context = " ".join(a[max(0, i1 - 10):i1]) + " [[" + " ".join(a[i1:i2]) + " -> " + \
                " ".join(b[j1:j2]) + "]] " + " ".join(a[i2:i2 + 10])
            out.append((context, " ".join(a[i1:i2]), " ".join(b[j1:j2])))
    return out


def main() -> None:
    rows, key = leads(), bytes(range(32))
    words = sum(len(r["text"].split()) for r in rows)
    summary, sampled = {"leads": len(rows), "words": words}, []
    for version in (2, 3):
        rewriter = KeyedLexicalRewriter(version=version)
        found = [c for r in rows for c in changes(r["text"], rewriter.rewrite(r["text"], key))]
        units = LexicalForms(rewriter, [r["text"] for r in rows]).forms
        summary[f"v{version}"] = {"changes": len(found), "words_changed": sum(len(w.split()) for _, w, _ in found),
                                  "share_changed": round(sum(len(w.split()) for _, w, _ in found) / words, 4),
                                  "units": len(units)}
        if version == 3:
            sampled = random.Random(0).sample(found, min(150, len(found)))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (OUT / "sample.txt").write_text("".join(f"{i}. {c}\n" for i, (c, _, _) in enumerate(sampled, 1)))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
