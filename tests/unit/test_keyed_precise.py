"""The precision-first keyed lexical rewriter (version 3, issue 63) and the review a publisher reads
before committing: only the vetted phrase table, never in the contexts its patterns exclude, one form
per unit everywhere, excluded units left as written, and a release that reproduces from its commitment."""

import json
import re

import pytest

from trainspotter.keyed.release import commit_release, load_release, release, rewriter_of, verify_release
from trainspotter.keyed.units import LexicalForms
from trainspotter.proofs.beacon import TEST_BEACON
from trainspotter.rewriters.lexical import PHRASES_V3, KeyedLexicalRewriter, phrase_text

KEYS = [bytes([i]) * 32 for i in range(40)]
TEXT = ("The town, located in a valley, often flooded: about 5000 people, mostly farmers, lived there for a "
        "while. It was almost never visited, because of its roads, an increase over 1990 levels, and it is well "
        "known for cheese and known for wine. The town often held fairs.")


def test_version_3_changes_only_the_table_and_never_where_its_context_forbids():
    r = KeyedLexicalRewriter(version=3)
    outs = [r.rewrite(TEXT, k) for k in KEYS]
    for out in outs:
        # untouched everywhere: words outside the table, the contexts the patterns exclude
        for kept in ("The town,", "for a while", "almost never", "over 1990 levels", "well known for cheese",
                     "valley", "flooded", "farmers", "lived", "roads", "cheese"):
            assert kept in out, (kept, out)
        # one form per unit everywhere: the two "often" of the text are written alike
        assert len(set(re.findall(r"\b(often|frequently)\b", out))) == 1, out
    assert {re.search(r"(about|around|approximately) 5000", o).group(1) for o in outs} == {
        "about", "around", "approximately"}  # each form of a unit drawn by some key
    assert len(set(outs)) > 10


def test_the_table_has_one_name_per_unit_and_each_form_differs_from_its_unit():
    names = [phrase_text(p) for p in PHRASES_V3]
    assert len(names) == len(set(names))
    assert all(phrase_text(p) not in alts for p, alts in PHRASES_V3.items())


def test_an_excluded_unit_stays_as_written_and_the_rest_still_changes():
    r = KeyedLexicalRewriter(version=3, exclude=("often", "about"))
    outs = [r.rewrite(TEXT, k) for k in KEYS]
    assert all(o.count("often") == 2 and "about 5000" in o for o in outs)
    assert len({re.search(r"(mostly|mainly) farmers", o).group(1) for o in outs}) == 2
    assert r.describe()["exclude"] == ["about", "often"]


def test_the_review_lists_every_place_by_unit_with_its_forms(tmp_path):
    rows = [{"id": "a", "text": TEXT}, {"id": "b", "text": "Nothing here changes at all."}]
    out = tmp_path / "rel"
    commit_release(rows, out, KeyedLexicalRewriter(version=3), beacon_round=TEST_BEACON.round)
    review = (out / "review.md").read_text()
    forms = LexicalForms(KeyedLexicalRewriter(version=3), [TEXT])
    assert review.startswith(f"# Review of a keyed release: {len(forms.forms)} units, ")
    assert "in 1 of 2 passages" in review.splitlines()[0]
    often = review[review.index("## often (2 places)"):]
    assert often.splitlines()[2] == "forms: `often` | `frequently`"
    assert "- a: …The town, located in a valley, **often** flooded" in often
    assert "## almost" not in review and "## over" not in review  # "almost never", "over 1990": no unit
    assert (out / "review.md").stat().st_mode & 0o077 == 0  # it quotes the originals


def test_a_version_3_release_reproduces_from_its_commitment(tmp_path):
    out = tmp_path / "rel"
    commit_release([{"id": "a", "text": TEXT}], out, KeyedLexicalRewriter(version=3, exclude=("often",)),
                   beacon_round=TEST_BEACON.round)
    release(out, TEST_BEACON)
    kr = load_release(out)
    again = rewriter_of(kr.commitment, out)
    assert (again.version, again.exclude) == (3, ("often",))
    assert kr.public[0]["text"] == again.rewrite(TEXT, kr.key) and kr.public[0]["text"].count("often") == 2
    assert all(ok is not False for _, ok, _ in verify_release(out))
    described = json.loads((out / "commitment.json").read_text())["rewriter"]
    assert described == {"name": "keyed-lexical", "version": 3, "rate": "uniform", "phrases": True, "words": False,
                         "exclude": ["often"]}


def test_an_unknown_version_is_refused():
    with pytest.raises(ValueError, match="version 4"):
        KeyedLexicalRewriter(version=4)
