"""A keyed release (trainspotter.keyed.release) and its scoring units (trainspotter.keyed.units): the
folder's stages and checks, the key derived from the committed secret and the beacon, units counted
once with the prompt's skipped, and the lexical null 1/(m+1) over fresh keys (binomial tests at a
false-failure rate of 0.001)."""

import json
import secrets
import shutil

import numpy as np
import pytest
from scipy.stats import binomtest

from trainspotter.errors import InputError
from trainspotter.keyed.units import (
    LexicalForms,
    Seen,
    lexical_outcomes,
    lexical_units,
    window_units,
)
from trainspotter.stats.exact_null import unit_eprocess
from trainspotter.proofs.beacon import TEST_BEACON, derive
from trainspotter.keyed.release import (
    commit_release,
    load_release,
    release,
    verify_release,
)
from trainspotter.rewriters.lexical import KeyedLexicalRewriter

TEXTS = ["The city council often met in the large hall while the old market was being rebuilt, because the "
         "building had been damaged in a storm several years before the mayor was elected.",
         "Many people visited the ancient town, which is known for its narrow streets and a famous bridge "
         "over the river; however, the population declined after the railway closed.",
         "The small museum displays various tools that farmers frequently used, such as ploughs, and it is "
         "located in a village near the northern border of the region."]
SECRET = bytes(range(32))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("keyed") / "release"
    commit_release([{"id": f"p{i}", "text": t} for i, t in enumerate(TEXTS)], out, KeyedLexicalRewriter(),
                   beacon_round=TEST_BEACON.round, secret=SECRET)
    release(out, TEST_BEACON)
    return out


def test_the_release_is_every_original_under_the_key_derived_from_secret_and_beacon(folder):
    kr = load_release(folder)
    assert kr.key == derive(SECRET, TEST_BEACON, "keyed-release")
    rewriter = KeyedLexicalRewriter()
    assert [p["text"] for p in kr.public] == [rewriter.rewrite(t, kr.key) for t in TEXTS]
    assert [p["text"] for p in kr.public] != TEXTS  # something was rewritten
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["beacon"]["round"] == TEST_BEACON.round and manifest["scoring"]["null"].startswith("1/(m+1)")
    assert SECRET.hex() not in (folder / "manifest.json").read_text() + (folder / "commitment.json").read_text()
    checks = {name: (ok, detail) for name, ok, detail in verify_release(folder)}
    assert all(ok is not False for ok, _ in checks.values())
    assert checks["beacon"][0] is None and "the fixed test value" in checks["beacon"][1]  # shown nothing: no "ok"
    with pytest.raises(InputError, match="already released"):
        release(folder, TEST_BEACON)


def test_a_changed_file_or_a_second_commitment_is_refused(folder, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    text = (copy / "public.jsonl").read_text()
    (copy / "public.jsonl").write_text(text.replace("The", "A", 1))
    with pytest.raises(InputError, match="public.jsonl: missing or changed"):
        load_release(copy)
    with pytest.raises(InputError, match="already holds a keyed release"):
        commit_release([{"id": "a", "text": "x"}], folder, KeyedLexicalRewriter(), beacon_round=1)


def test_the_key_comes_only_from_the_round_the_commitment_names(folder, tmp_path):
    """The commitment names its beacon round: a release from any other round is refused, and a
    folder whose manifest was rewritten to another round (every other hash matching) does not
    load (an owner could otherwise try later rounds until one's key suits a model)."""
    assert json.loads((folder / "commitment.json").read_text())["beacon_round"] == TEST_BEACON.round
    fresh = tmp_path / "fresh"
    commit_release([{"id": "a", "text": TEXTS[0]}], fresh, KeyedLexicalRewriter(), beacon_round=7, secret=SECRET)
    with pytest.raises(InputError, match="round 1, but the commitment names round 7"):
        release(fresh, TEST_BEACON)
    copy = tmp_path / "moved"
    shutil.copytree(folder, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["beacon"]["round"] = 2
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="beacon round 2, but the commitment names round 1"):
        load_release(copy)


def test_windows_are_counted_once_ever_and_the_prompts_skipped():
    seen = Seen()
    assert window_units([1, 2, 3], [2, 3, 4, 2, 3, 4, 5], seen) == [(3, 4), (4, 2), (4, 5)]
    assert window_units([9], [3, 4, 6, 7], seen) == [(4, 6), (6, 7)]  # (3, 4) was scored before
    # strict: every window after a token that is a previous token in the prompt is skipped
    assert window_units([7, 8, 9], [7, 1, 8, 1, 9, 1], Seen(), strict=True) == [(1, 8), (1, 9), (9, 1)]
    assert Seen.from_dict(json.loads(json.dumps(seen.to_dict()))).units == seen.units


def test_lexical_units_read_the_key_form_and_skip_what_the_prompt_shows():
    rewriter = KeyedLexicalRewriter()
    forms = LexicalForms(rewriter, TEXTS)
    key = derive(SECRET, TEST_BEACON, "keyed-release")
    public = rewriter.rewrite(TEXTS[0], key)
    # every unit of the original shows its key form in the release (outside the phrases)
    for unit, f in forms.forms.items():
        if unit.isalpha() and f" {unit} " in TEXTS[0] and unit not in ("often", "while", "several"):
            assert f" {f[forms.key_form(key, unit)]} " in f" {public} ", unit
    seen = Seen()
    units = lexical_units(forms, "", public, seen)
    x, p = lexical_outcomes(forms, key, units)
    assert len(units) >= 5 and x.mean() > p.mean()
    again = lexical_units(forms, "", public, seen)
    assert again == []  # once ever
    city = lexical_units(forms, "the city was old", "the city grew", Seen())
    assert "city" not in [u for u, _ in city]


def test_a_clean_text_matches_the_key_form_at_the_null_rate_over_fresh_keys():
    """A text nobody rewrote, scored under 1000 fresh keys: matches at the Poisson-binomial
    mean (normal approximation, |z| < 3.3) and "trained on" at most α of the time."""
    rewriter = KeyedLexicalRewriter()
    forms = LexicalForms(rewriter, TEXTS)
    units = lexical_units(forms, "", " ".join(TEXTS), Seen())
    keys = [secrets.token_bytes(32) for _ in range(1000)]
    xs = np.array([lexical_outcomes(forms, k, units)[0] for k in keys])
    p = lexical_outcomes(forms, keys[0], units)[1]
    z = (xs.sum() - len(keys) * p.sum()) / np.sqrt(len(keys) * np.sum(p * (1 - p)))
    assert abs(z) < 3.3
    proc = unit_eprocess(xs, np.tile(p, (len(keys), 1)))
    assert binomtest(int(proc.rejected.sum()), len(keys), 0.05, alternative="greater").pvalue > 0.001
