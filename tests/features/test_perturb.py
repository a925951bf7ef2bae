"""Perturbations (BADI App. A.3): determinism, documented behaviour and rates.

Rate checks use long texts and a ±5σ binomial band: each check fails by chance with
probability ≈ 5.7e-7 (two-sided normal tail at 5σ), ≈ 5e-6 for the whole file."""

import math

import pytest

from trainspotter.features import perturb as P
from trainspotter.assets import wikipedia_leads

SHORT = "The quick brown fox jumps over the lazy dog, because the problem was hard."


@pytest.fixture(scope="module")
def long_text() -> str:
    return " ".join(r["text"] for r in wikipedia_leads()[:300])  # ~10^5 characters


def within(count: int, n: int, p: float, sigmas: float = 5.0) -> bool:
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("kind", P.KINDS)
def test_deterministic_per_text_and_seed_and_changes_text(kind, long_text):
    text = long_text[:2000]
    a = P.perturb(text, kind, seed=3)
    P.perturb("something else first", kind, seed=3)  # no hidden global state
    assert P.perturb(text, kind, seed=3) == a
    assert a != text
    assert P.perturb(text, kind, seed=4) != a


def test_unknown_kind_raises():
    with pytest.raises(ValueError, match="unknown perturbation"):
        P.perturb(SHORT, "paraphrase")


def test_change_case_rate_and_only_case(long_text):
    out = P.change_char_case(long_text, 0.1, seed=0)
    assert len(out) == len(long_text) and out.lower() == long_text.lower()
    cased = [i for i, c in enumerate(long_text) if c.lower() != c.upper()]
    swapped = sum(out[i] == long_text[i].swapcase() != long_text[i] for i in cased)
    assert within(swapped, len(cased), 0.1)


def test_butter_fingers_rate_and_keyboard_neighbours(long_text):
    out = P.butter_fingers(long_text, 0.1, seed=0)
    assert len(out) == len(long_text)
    letters = [i for i, c in enumerate(long_text) if c.lower() in P.KEYBOARD]
    changed = [i for i in letters if out[i] != long_text[i]]
    assert within(len(changed), len(letters), 0.1)
    for i in changed:
        assert out[i].lower() in P.KEYBOARD[long_text[i].lower()]
        assert out[i].isupper() == long_text[i].isupper() or not out[i].isalpha()
    others = [i for i in range(len(long_text)) if long_text[i].lower() not in P.KEYBOARD]
    assert all(out[i] == long_text[i] for i in others)
    assert "t" in P.KEYBOARD["g"] and "g" not in P.KEYBOARD["g"]  # BADI's 'g' example


def test_underscore_rate_and_only_spaces(long_text):
    out = P.underscore_trick(long_text, 0.25, seed=0)
    assert len(out) == len(long_text)
    spaces = [i for i, c in enumerate(long_text) if c == " "]
    assert within(sum(out[i] == "_" for i in spaces), len(spaces), 0.25)
    assert all(out[i] == long_text[i] for i in range(len(long_text)) if long_text[i] != " ")
    assert P.underscore_trick("Hello world", 1.0) == "Hello_world"


def test_deletion_rate_keeps_order_and_never_empties(long_text):
    words = long_text.split()
    kept = P.random_deletion(long_text, 0.25, seed=0).split()
    assert within(len(kept), len(words), 0.75)
    it = iter(words)
    assert all(any(w == v for v in it) for w in kept)  # a subsequence, in order
    assert P.random_deletion("one two three", 1.0, seed=0) in {"one", "two", "three"}


def test_whitespace_removal_and_addition_rates():
    n = 40_000
    removed = P.whitespace_perturbation(" " * n, 0.1, 0.05, seed=0)
    assert set(removed) <= {" "} and within(n - len(removed), n, 0.1)
    added = P.whitespace_perturbation("x" * n, 0.1, 0.05, seed=0)
    assert added.replace(" ", "") == "x" * n and within(added.count(" "), n, 0.05)
    assert P.whitespace_perturbation(SHORT, seed=1).replace(" ", "") == SHORT.replace(" ", "")


def test_synonym_rate_and_candidates():
    n = 4000
    out = P.synonym_substitution("quick " * n, 0.25, seed=0).split()
    assert len(out) == n  # all of quick's synonyms are single words
    changed = [w for w in out if w != "quick"]
    assert within(len(changed), n, 0.25)
    assert set(changed) <= set(P.synonyms("quick")) and "fast" in P.synonyms("quick")
    # words with no WordNet entry never change; capitalisation is kept
    assert P.synonym_substitution("the of and " * 50, 1.0) == "the of and " * 50
    sub = P.synonym_substitution("Quick", 1.0, seed=0)
    assert sub[0].isupper() and sub.lower() in P.synonyms("quick")


def test_synonyms_exclude_the_word_itself_and_use_spaces():
    syn = P.synonyms("car")
    assert "auto" in syn and "car" not in syn
    assert all("_" not in s for s in syn) and any(" " in s for s in syn)  # e.g. "motor car"
