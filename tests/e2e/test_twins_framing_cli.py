"""Framing fails (issue 53, "Done when"): twins of passages the `mini` target never saw (its held-out
and non-member passages), their public versions chosen by a model's preference (the target's own,
or the target's over its reference's) and every hash rewritten to match, never make `audit --twins`
say "trained on", as a user runs it at 80 columns: gray without and with --reference, and black.

On the code before the draw was shown random the first two folders below made the gray audit say
"trained on" (e ≈ 22 within 19 pairs, and with the reference e ≈ 26 while the placebo check stayed
at 0.11; benchmarks/results/framing.md measures how often over many tries). Here a version 1 folder
is "unproven" (inconclusive once the model's test rejects), a forged draw "failed" (inconclusive),
and a draw re-derived from a new secret against an already public round fails against the
commitment that was published (--commitment)."""

import hashlib
import itertools
import json
import os
import re
import shutil

import pytest
from beacons import STAND_IN
from test_twins_cli import ROUND, run

MODEL, REFERENCE = "testbed:mini", "testbed:mini/reference"


@pytest.fixture(scope="module")
def released(tmp_path_factory, mini_testbed):
    """A release made as `twins make` and `twins release` make it: twins (k = 2) of the 160 passages
    the mini target never saw, by an attacker who knows the blind check reads a keyed rewriter's
    dataset-wide word choices and so keys each passage's variants alone (``PerPassageKeys``)."""
    from trainspotter.testbeds.twins_variant import PerPassageKeys
    from trainspotter.twins.folder import write_twins
    from trainspotter.rewriters.lexical import KeyedLexicalRewriter
    from trainspotter.twins.make import make_twins
    from trainspotter.twins.release import release_twins

    root = tmp_path_factory.mktemp("framing")
    passages = [json.loads(line) for s in ("heldout", "nonmember")
                for line in (mini_testbed / f"{s}.jsonl").read_text().splitlines()]
    # the variants' keys, the secret and the salts fixed (each run drew its own, so a draw whose placebo
    # check sat near 1/α came up now and then): the folders below are the same in every run
    drawn = (hashlib.sha256(f"framing:{n}".encode()).digest() for n in itertools.count())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("trainspotter.twins.draw.secrets.token_bytes", lambda n: next(drawn)[:n])
        twins = make_twins(passages, 2, PerPassageKeys(KeyedLexicalRewriter()), keys=[next(drawn) for _ in range(2)],
                           beacon_round=STAND_IN.round)
    release_twins(write_twins(twins, root / "honest"), STAND_IN)
    return root, {"commitment": twins.manifest["commitment"]["digest"]}


@pytest.fixture(scope="module")
def prefers(released):
    """Each variant's preference by the target, and by the target over its reference (each model
    scores the release's variants once; every folder below holds the same texts)."""
    import numpy as np

    from studies.framing import preference
    from trainspotter.twins.folder import load_twins

    twins = load_twins(released[0] / "honest")
    texts = sorted({t for i in twins.ids for t in twins.variants[i].values()})
    target, reference = (dict(zip(texts, preference(spec, texts))) for spec in (MODEL, REFERENCE))
    return {"target": lambda ts: np.array([target[t] for t in ts]),
            "target over reference": lambda ts: np.array([target[t] - reference[t] for t in ts])}


def _audit(folder, *extra) -> tuple[dict, str]:
    """`audit --twins FOLDER --model testbed:mini EXTRA` as a user sees it at 80 columns: the sealed
    record's result and its twins draw, and the terminal's text with wrapped lines joined."""
    record = folder.parent / f"{folder.name}-{len(list(folder.parent.glob(folder.name + '-*.json')))}.json"
    out = run("audit", "--twins", str(folder), "--model", MODEL, "--record", str(record), *extra,
              env=os.environ | {"COLUMNS": "80"})
    assert out.returncode in (0, 3), out.stderr
    sealed = json.loads(record.read_text())
    result = sealed["result"] | {"draw": sealed["inputs"]["twins"]["draw"]}
    text = " ".join(re.sub("[│┃]", " ", out.stdout).split())  # a table cell's wrapped lines read as one
    assert (out.returncode == 3) == (result["verdict"] == "inconclusive")
    assert bool(re.search(r"│ trained on +│", out.stdout)) == (result["verdict"] == "trained on")  # the decision cell
    return result, text


UNPROVEN = re.compile(r"Inconclusive: the model's test rejected \(e-value \(\S+ after \d+ pairs\) ≥ 1/α = 20\), but "
                      r"nothing shows that the public versions were drawn at random: the folder was made before twins "
                      r"release: its commitment \(sha256\(salt ‖ draw\)\) shows the draw was fixed at twins make, not "
                      r"that nobody chose it\. Public versions chosen by a model's preference")


def test_a_version_1_folder_chosen_by_the_targets_preference_frames_no_one(released, prefers):
    """Measured on the code before (gray, no reference): "trained on", e ≈ 22 within 19 pairs. Now
    inconclusive or "no evidence", whichever audit."""
    from studies.framing import choose, write_legacy
    from trainspotter.twins.folder import load_twins

    root, _ = released
    twins = load_twins(root / "honest")
    folder = write_legacy(twins, choose(twins, prefers["target"]), root / "legacy-target")
    for extra in ([], ["--reference", REFERENCE], ["--access", "black"]):
        result, text = _audit(folder, *extra)
        assert result["verdict"] != "trained on" and result["draw"]["status"] == "unproven", (extra, text)
        # the texts alone may give a model's choice away (the blind check); where they do not, the draw guard
        assert result["guard"] in ("draw", "placebo", "blind") if result["model_reject"] else \
            result["guard"] in (None, "blind")
        if result["guard"] == "draw":  # what a user reads: the decision in words, and the explanation
            assert "inconclusive: the twins draw is not shown random" in text and UNPROVEN.search(text), text


def test_a_choice_of_the_targets_preference_over_its_references_passes_the_placebo_check_but_frames_no_one(
        released, prefers):
    """The stronger attack: versions the target prefers more than its reference does, so the
    reference in the target's place (the placebo check) sees no difference."""
    from studies.framing import choose, write_legacy
    from trainspotter.twins.folder import load_twins

    root, _ = released
    twins = load_twins(root / "honest")
    folder = write_legacy(twins, choose(twins, prefers["target over reference"]), root / "legacy-relative")
    result, text = _audit(folder, "--reference", REFERENCE)  # before: e ≈ 26 within 17 pairs, placebo e 0.11
    assert result["verdict"] != "trained on" and result["guard"] in (None, "draw", "blind"), text


@pytest.mark.slow
def test_a_forged_draw_is_inconclusive_whatever_the_model_shows(released, prefers):
    from studies.framing import choose, forge
    from trainspotter.twins.folder import load_twins

    root, made = released
    folder = root / "forged"
    shutil.copytree(root / "honest", folder)
    honest = load_twins(folder)
    chosen = choose(honest, prefers["target"])
    forge(folder, chosen)
    first = next(i for i in honest.ids if chosen[i] != honest.public[i])
    line = (f"Inconclusive: the twins folder's draw does not hold: passage {first!r}: the public text is variant "
            f"{chosen[first]}, but the draw names variant {honest.public[first]}. The public versions may have been "
            f"chosen rather than drawn, so the audit cannot rest on them, whatever the model shows. Check the folder "
            f"against the commitment that was published (`trainspotter twins verify DIR --commitment HEX`).")
    for extra in ([], ["--access", "black"]):
        result, text = _audit(folder, *extra)
        assert (result["verdict"], result["draw"]["status"]) == ("inconclusive", "failed"), text
        assert result["guard"] == "draw" and line in text, text
    out = run("twins", "verify", str(folder), "--commitment", made["commitment"])
    assert out.returncode == 1 and "the draw DOES NOT hold: passage" in out.stdout


@pytest.mark.slow
def test_a_new_secret_tried_against_a_public_round_fails_against_the_published_commitment(released, prefers):
    from studies.framing import regrind

    root, made = released
    folder = regrind(root / "honest", STAND_IN, prefers["target over reference"], 200, root / "regrind")
    assert json.loads((folder / "manifest.json").read_text())["commitment"]["round"] == int(ROUND)
    result, text = _audit(folder, "--reference", REFERENCE, "--commitment", made["commitment"])
    assert (result["verdict"], result["draw"]["status"]) == ("inconclusive", "failed"), text
    assert result["guard"] == "draw" and f"is not the pinned {made['commitment'][:16]}…" in text
    out = run("twins", "verify", str(folder))  # unpinned it re-derives: what it rests on is then false
    assert out.returncode == 0 and "rests on: commitment " in out.stdout
    assert run("twins", "verify", str(folder), "--commitment", made["commitment"]).returncode == 1
