"""A twins draw nobody chose (trainspotter.twins.draw, twins.release): the commitment by its
definition, the release's draw by the beacon derivation, what the proof catches when a folder is
rewritten (a forged draw, a dropped passage, a new secret tried against an already public round,
an edited commitment) and what it calls unproven (version 1, seeded), and the verdict and the
explanation each gives an audit (decide, explain). Secrets come from the operating system's
generator; nothing here depends on which values they take."""

import hashlib
import hmac
import json
import os
import shutil

import pytest
from beacons import STAND_IN

from trainspotter.auditing.explain import explain
from trainspotter.auditing.verdict import PlaceboResult, decide
from trainspotter.errors import InputError
from trainspotter.stats.blind import BlindResult
from trainspotter.proofs.beacon import Beacon
from trainspotter.twins.draw import DrawProof, beacon_draw, commit, prove, seeded_draw
from trainspotter.twins.folder import (
    load_twins,
    prove_folder,
    read_release,
    write_twins,
)
from trainspotter.twins.make import make_twins
from trainspotter.twins.release import release_twins
from trainspotter.rewriters.base import Rewriter


class Tag(Rewriter):
    """A cheap rewriter: the key's first bytes appended."""
    name = "tag"

    def rewrite(self, text, key):
        return f"{text} [{key[:4].hex()}]"


def _made(n=12, k=2, beacon_round=STAND_IN.round, **kwargs):
    passages = [{"id": f"p{i}", "text": f"text number {i}"} for i in range(n)]
    return make_twins(passages, k, Tag(), beacon_round=beacon_round, **kwargs)


def _released(tmp_path, n=12, k=2, beacon=STAND_IN):
    folder = write_twins(_made(n, k, beacon.round), tmp_path / "twins")
    return folder, release_twins(folder, beacon)


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _rehash(folder):
    """What someone who rewrites the files does next: every sha256 in the manifest made to match."""
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"] = {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in manifest["files"]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def test_the_commitment_is_the_sha256_of_its_canonical_json_and_binds_every_variant():
    twins = _made(k=3)
    c = twins.manifest["commitment"]
    body = {key: v for key, v in c.items() if key != "digest"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert c["digest"] == hashlib.sha256(canonical).hexdigest()
    i = twins.ids[0]
    assert c["variants"][0] == [i, [hashlib.sha256(b"trainspotter-variant\0" + twins.salts[i][j]
                                                   + twins.variants[i][j].encode()).hexdigest() for j in range(3)]]
    assert c["secret_digest"] == hashlib.sha256(b"trainspotter-secret\0" + twins.secret).hexdigest()
    assert (c["k"], c["round"], c["rewriter"]["name"]) == (3, STAND_IN.round, "tag")
    assert twins.public == {} and "draw" not in twins.manifest  # committed, not drawn
    # the variants depend on the keys alone: the same keys and another secret give the same texts
    again = _made(k=3, keys=twins.keys)
    assert again.variants == twins.variants and again.secret != twins.secret
    assert again.manifest["commitment"]["digest"] != c["digest"]



def test_a_draw_from_the_fixed_test_value_re_derives_but_is_not_shown_random(tmp_path):
    """Anyone knew TEST_BEACON before any commitment: a secret could have been tried against it
    until the draw suited a model, so the draw re-derives yet the folder is "unproven" (an audit
    then cannot say "trained on" on the draw alone)."""
    from trainspotter.proofs.beacon import TEST_BEACON

    folder, _ = _released(tmp_path / "test-value", beacon=TEST_BEACON)
    proof = prove_folder(folder)
    assert proof.status == "unproven" and proof.round == TEST_BEACON.round, proof
    assert "which anyone knew before the commitment" in proof.reason
    assert prove_folder(_released(tmp_path / "stand-in")[0]).status == "shown"  # the same, from a round's value


def test_a_draw_from_an_unverified_or_edited_beacon_is_not_shown_random(tmp_path):
    """A round given as ROUND:HEX carries no signature: the draw re-derives, but the value could have been
    made up until the draw suited a model, so "unproven"; a released folder whose beacon was edited
    after the round was read (its randomness no longer sha256 of its signature) fails."""
    unsigned = Beacon(STAND_IN.round, STAND_IN.randomness)  # the very value, without its signature
    proof = prove_folder(_released(tmp_path / "unsigned", beacon=unsigned)[0])
    assert proof.status == "unproven" and "given as ROUND:HEX, without the network's signature" in proof.reason
    folder, _ = _released(tmp_path / "edited")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["draw"]["beacon"]["signature"] = "ab" * 48
    proof = prove(manifest, {r["id"]: r["text"] for r in _rows(folder / "public.jsonl")})
    assert proof.status == "failed", proof
    assert proof.reason.startswith(f"the beacon round {STAND_IN.round} of drand quicknet does not verify"), proof

def test_the_release_draws_each_public_version_from_the_secret_and_the_round_the_commitment_names(tmp_path):
    twins = _made(n=40)
    folder = write_twins(twins, tmp_path / "twins")
    assert sorted(os.listdir(folder)) == ["keys.json", "manifest.json", "variants.jsonl"]
    with pytest.raises(InputError, match=f"round 2, but the commitment names round {STAND_IN.round}"):
        release_twins(folder, Beacon(2, STAND_IN.randomness))
    released = release_twins(folder, STAND_IN)
    for i in twins.ids:  # HMAC-SHA256 of the label, round and randomness; k = 2 divides 2^256: no rejection
        message = b"trainspotter\0twins/draw/" + i.encode() + b"\0" + STAND_IN.round.to_bytes(8, "big")
        mac = hmac.new(twins.secret, message + STAND_IN.randomness, hashlib.sha256).digest()
        assert released.public[i] == int.from_bytes(mac, "big") % 2
    assert 5 < sum(released.public.values()) < 35  # both indices drawn (fails with probability < 1e-6)
    assert sorted(os.listdir(folder)) == ["keys.json", "manifest.json", "private.jsonl", "public.jsonl"]
    draw = json.loads((folder / "manifest.json").read_text())["draw"]
    assert draw["beacon"] == STAND_IN.to_dict() and draw["secret"] == twins.secret.hex()
    with pytest.raises(InputError, match=f"already released with beacon round {STAND_IN.round}; a folder is released"):
        release_twins(folder, STAND_IN)


def test_variants_changed_between_make_and_release_are_refused(tmp_path):
    folder = write_twins(_made(), tmp_path / "twins")
    rows = _rows(folder / "variants.jsonl")
    rows[3]["text"] = "a variant chosen after the commitment"
    _write_rows(folder / "variants.jsonl", rows)
    _rehash(folder)
    with pytest.raises(InputError, match="do not open the commitment"):
        release_twins(folder, STAND_IN)


def test_a_third_party_re_derives_the_draw_from_public_jsonl_and_the_manifest_alone(tmp_path):
    folder, twins = _released(tmp_path)
    published = tmp_path / "published"
    published.mkdir()
    for f in ("public.jsonl", "manifest.json"):
        shutil.copy(folder / f, published / f)
    manifest, public, private = read_release(published)
    assert private is None and public == {i: twins.variants[i][twins.public[i]] for i in twins.ids}
    digest = manifest["commitment"]["digest"]
    proof = prove(manifest, public, None, pinned=digest)
    assert (proof.status, proof.private_checked, proof.round, proof.pinned) == ("shown", 0, STAND_IN.round, digest)
    assert proof.rests_on == f"commitment {digest} was public before beacon round {STAND_IN.round}"
    assert prove_folder(folder).private_checked == len(twins.ids)  # the owner's folder: private texts open too


def _forge(folder, twins, passage):
    """Publish ``passage``'s private variant instead of the drawn one, as someone choosing by a
    model's preference would, with its salt revealed in the manifest and every sha256 rewritten."""
    pub, priv = folder / "public.jsonl", folder / "private.jsonl"
    prows, qrows = _rows(pub), _rows(priv)
    p = next(r for r in prows if r["id"] == passage)
    q = next(r for r in qrows if r["id"] == passage)
    j = twins.public[passage]
    p["text"], q["text"], q["variant"] = q["text"], p["text"], j
    _write_rows(pub, prows)
    _write_rows(priv, qrows)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["draw"]["salts"][passage], q["salt"] = q["salt"], manifest["draw"]["salts"][passage]
    _write_rows(priv, qrows)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    _rehash(folder)
    return 1 - j


def test_a_rewritten_folder_fails_to_re_derive_and_says_where(tmp_path):
    folder, twins = _released(tmp_path)
    chosen = _forge(folder, twins, "p5")
    load_twins(folder)  # every sha256 matches again: only the draw catches it
    proof = prove_folder(folder)
    assert proof.status == "failed"
    assert proof.reason == f"passage 'p5': the public text is variant {chosen}, but the draw names variant {1 - chosen}"


@pytest.mark.parametrize("edit, says", [
    (lambda m, pub: pub.pop(), "1 committed passages are not in the release (e.g. 'p11'): dropped after the draw"),
    (lambda m, pub: m["commitment"].update(round=7), "the manifest's commitment does not match its digest"),
    (lambda m, pub: m["draw"].update(secret="00" * 32), "the revealed secret is not the committed one"),
    (lambda m, pub: m["draw"]["beacon"].update(round=2), "the draw used beacon round 2, but the commitment names "
                                                         f"round {STAND_IN.round}"),
    (lambda m, pub: pub[0].update(text="another text"), "passage 'p0': the public text is none of its committed "
                                                         "variants"),
])
def test_what_the_proof_catches(tmp_path, edit, says):
    folder, _ = _released(tmp_path)
    manifest, public, _ = read_release(folder)
    rows = [{"id": i, "text": t} for i, t in public.items()]
    edit(manifest, rows)
    proof = prove(manifest, {r["id"]: r["text"] for r in rows})
    assert proof.status == "failed" and proof.reason.startswith(says), proof.reason


def test_a_new_secret_against_an_already_public_round_re_derives_but_not_against_the_pinned_commitment(tmp_path):
    """The attack no file can show: commit again after the round is public (a new secret, tried
    until the draw favours a model) and draw with that round. The folder re-derives; what it
    rests on (its commitment public before the round) is false, and pinning the commitment that
    was published catches it."""
    folder, twins = _released(tmp_path)
    published = json.loads((folder / "manifest.json").read_text())["commitment"]["digest"]
    twins.manifest["commitment"] = commit(twins, twins.manifest["rewriter"], STAND_IN.round)  # a new secret
    beacon_draw(twins, STAND_IN)
    again = write_twins(twins, tmp_path / "again")
    assert prove_folder(again).status == "shown"
    proof = prove_folder(again, pinned=published)
    assert proof.status == "failed" and f"is not the pinned {published[:16]}…" in proof.reason


def test_seeded_and_version_1_draws_are_unproven(tmp_path):
    import random

    twins = _made()
    seeded_draw(twins, {i: random.Random(7).randrange(2) for i in twins.ids}, "a test's seed")
    folder = write_twins(twins, tmp_path / "seeded")
    proof = prove_folder(folder)
    assert proof.status == "unproven" and proof.reason.startswith("drawn from a seed (a test's seed)")
    legacy = {"version": 1, "k": 2, "commitment": {"digest": "ab" * 32}}
    assert prove(legacy, {}).status == "unproven"
    assert prove(legacy, {}, pinned="cd" * 32).status == "failed"


def _blind(fired=False):
    return BlindResult(fired=fired, e_value=30.0 if fired else 1.0, max_wealth=1.0, p_value=1.0, pairs_used=10,
                       pairs_available=100, stop_time=None, alpha=0.05, wealth=[])


@pytest.mark.parametrize("model_reject, draw, blind, placebo, want", [
    (True, "shown", False, False, ("trained on", None)),
    (True, None, False, False, ("trained on", None)),  # not twins, or a record from before the draw was checked
    (True, "unproven", False, False, ("inconclusive", "draw")),
    (False, "unproven", False, False, ("no evidence", None)),  # a guard turns only a rejection into inconclusive
    (True, "failed", False, False, ("inconclusive", "draw")),
    (False, "failed", False, False, ("inconclusive", "draw")),  # evidence of tampering: whatever the model says
    (True, "failed", True, False, ("inconclusive", "draw")),  # tampering said before what the texts show
    (True, "unproven", False, True, ("inconclusive", "placebo")),
])
def test_decide_with_a_draw(model_reject, draw, blind, placebo, want):
    p = PlaceboResult(ran=True, model="hf:ref", fired=placebo)
    assert decide(model_reject, model_reject, _blind(blind), p, 0, draw) == want


SHOWN = DrawProof(status="shown", reason="the commitment opens", commitment="c" * 64, round=42)


def test_a_trained_on_verdict_on_twins_names_what_it_rests_on():
    text = explain("trained on", _blind(), 0.05, twins=True, draw=SHOWN)
    assert ("which version is public derives from the owner's committed secret and beacon round 42: the commitment "
            "opens and the draw re-derives") in text
    assert (f"That rests on one fact no file shows: commitment {'c' * 64} was public before beacon round 42; pin the "
            "commitment you saw published (--commitment) to rule out a folder rewritten since.") in text
    pinned = explain("trained on", _blind(), 0.05, twins=True, draw=SHOWN.model_copy(update={"pinned": "c" * 64}))
    assert "beacon round 42; the commitment is the one you pinned (--commitment)." in pinned
    unproven = DrawProof(status="unproven", reason="drawn from a seed (x)")
    vouched = explain("trained on", _blind(), 0.05, twins=True, draw=unproven, vouched=True)
    assert ("nothing shows which version is public was drawn at random (drawn from a seed (x)); you vouched for it "
            "(--assume-exchangeable), so the verdict rests on your word, not on a draw.") in vouched


def test_an_inconclusive_draw_says_why_and_what_to_do():
    unproven = DrawProof(status="unproven", reason="the folder was made before twins release")
    text = explain("inconclusive", _blind(), 0.05, guard="draw", twins=True, draw=unproven)
    assert text.startswith("Inconclusive: the model's test rejected (e-value ≥ 1/α = 20), but nothing shows that the "
                           "public versions were drawn at random: the folder was made before twins release. Public "
                           "versions chosen by a model's preference")
    assert "release twins with a beacon (`twins make --beacon-round N`" in text
    failed = DrawProof(status="failed", reason="passage 'p5': the public text is variant 1, but the draw names "
                                                "variant 0")
    assert explain("inconclusive", _blind(), 0.05, guard="draw", twins=True, draw=failed) == (
        "Inconclusive: the twins folder's draw does not hold: passage 'p5': the public text is variant 1, but the draw "
        "names variant 0. The public versions may have been chosen rather than drawn, so the audit cannot rest on "
        "them, whatever the model shows. Check the folder against the commitment that was published (`trainspotter "
        "twins verify DIR --commitment HEX`).")
