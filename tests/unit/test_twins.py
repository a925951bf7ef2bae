"""Twins (trainspotter.twins): the keyed rewriter, the beacon draw, the folder checks (of version 1
folders too), paired pairs, and the audit's Type-I rate on twins under H0 (test_twins_draw.py: the
commitment and the proof of the draw).

Random tests use the operating system's generator (as `twins make` does), so each has a stated
false-failure rate: a binomial or chi-square test at 0.001."""

import hashlib
import json
import re
from collections import Counter

import pytest
from beacons import STAND_IN
from pydantic import ValidationError
from scipy.stats import binomtest, chisquare

from trainspotter.assets import wikipedia_leads
from trainspotter.auditing.config import AuditConfig
from trainspotter.data import make_pairs
from trainspotter.errors import InputError
from trainspotter.loop.run import audit
from trainspotter.twins.draw import beacon_draw
from trainspotter.twins.folder import (
    commitment,
    load_twins,
    prove_folder,
    verify_commitment,
    write_twins,
)
from trainspotter.rewriters.lexical import WORD as _WORD
from trainspotter.rewriters.lexical import KeyedLexicalRewriter
from trainspotter.twins.make import edit_rate, make_twins
from trainspotter.twins.release import release_twins
from trainspotter.rewriters.base import Rewriter


@pytest.fixture(scope="module")
def leads() -> list[dict]:
    return [{"id": p["id"], "text": p["text"]} for p in wikipedia_leads()[:120]]


def _mapping(original: str, variant: str) -> list[tuple[str, str]]:
    """(original word, variant word) at each word position (the rewriter swaps single words)."""
    a, b = _WORD.findall(original), _WORD.findall(variant)
    assert len(a) == len(b), (original, variant)
    return list(zip(a, b))


def test_one_key_rewrites_each_word_the_same_way_across_the_dataset(leads):
    rewriter, key = KeyedLexicalRewriter(phrases=False), b"k" * 32  # words only: one word for one word
    seen: dict[str, set[str]] = {}
    for p in leads:
        for w, v in _mapping(p["text"], rewriter.rewrite(p["text"], key)):
            seen.setdefault(w, set()).add(v)
    assert all(len(v) == 1 for v in seen.values()), {w: v for w, v in seen.items() if len(v) > 1}
    changed = {w for w, v in seen.items() if v != {w}}
    assert len(changed) >= 100  # not vacuous: many words are rewritten, each always to the same word
    recurring = [w for w in changed if sum(w in _WORD.findall(p["text"]) for p in leads) >= 3]
    assert len(recurring) >= 10  # ... including words that occur in several passages


def test_one_key_rewrites_each_phrase_the_same_way_across_passages():
    """The same phrase or function word gets the same alternative under one key in every passage,
    and over 64 keys each of its forms turns up (uniform over the word and its alternatives)."""
    texts = [f"Passage {n}: the {w} grew while the river ran, because it is not clear; however, they stayed."
             for n, w in enumerate(["town", "city", "village", "port"])]
    forms = []
    for key in (bytes([j]) * 32 for j in range(64)):
        out = [KeyedLexicalRewriter().rewrite(t, key) for t in texts]
        tails = {o.split(":", 1)[1].split(" grew ", 1)[1] for o in out}
        assert len(tails) == 1, out  # every passage's rewrite of the shared words agrees
        forms.append(tails.pop())
    assert {"while", "whilst"} <= {f.split()[0] for f in forms}
    assert any("it's not" in f for f in forms) and any("it is not" in f for f in forms)  # "it is" first
    assert {w for f in forms for w in ("however", "nevertheless", "nonetheless") if w in f} == {
        "however", "nevertheless", "nonetheless"}


def test_inflected_words_keep_their_inflection():
    """Plural nouns and verbs in -ed/-ing get alternatives in the same form; irregular or
    ambiguous forms (a doubled consonant, a noun-or-verb in -s) are left out."""
    rewriter = KeyedLexicalRewriter()
    assert rewriter.alternatives("building") == ("construction", "edifice")  # a lemma: as before
    assert rewriter.alternatives("buildings") == ("constructions", "edifices")
    assert "commenced" in rewriter.alternatives("began") and "commenced" in rewriter.alternatives("started")
    assert "kids" in rewriter.alternatives("children") and "halted" in rewriter.alternatives("stopped")
    assert rewriter.alternatives("leaves") == ()  # leaf or leave: no tagger to tell
    assert rewriter.alternatives("men") == ()  # read as man (no alternative), not as "men" = workforce
    assert rewriter.alternatives("the") == () and rewriter.alternatives("Building") == ()


def test_edit_rate_of_a_fixed_text_with_every_unit_rewritten():
    """rate=1: every unit with an alternative is rewritten, whatever the key. In this 16-word text
    the units are "while", "countries", "declined", "because", "trade", "is not", "however",
    "commonly" and "wrote": 10 of the 16 words change, "is not" becomes one word, so at most the
    other 6 words are kept and the edit rate is ≥ 1 − 2·6/(16 + 15) = 0.613 by difflib's ratio."""
    text = "Whole towns grew while countries declined because trade is not easy; however, monks commonly wrote books."
    rewriter = KeyedLexicalRewriter(rate=1.0)
    assert len(text.split()) == 16
    for key in (b"a" * 32, b"b" * 32, b"c" * 32):
        variant = rewriter.rewrite(text, key)
        assert "whilst" in variant and "since" in variant and "isn't" in variant and "however" not in variant
        assert edit_rate(text, variant) >= 1 - 12 / 31 - 1e-9, variant


def test_different_keys_choose_differently_and_rewrite_about_rate_of_the_words(leads):
    import secrets

    k1, k2 = secrets.token_bytes(32), secrets.token_bytes(32)
    rewriter = KeyedLexicalRewriter(rate=0.5, phrases=False)
    rewritable = sorted({w for p in leads for w in _WORD.findall(p["text"]) if w.islower()
                         and rewriter.alternatives(w)})
    assert len(rewritable) > 300
    chosen = {key: {w: rewriter.rewrite(w, key) for w in rewritable} for key in (k1, k2)}
    for key in (k1, k2):  # each rewritable word is rewritten with probability `rate`, drawn by the key
        n = sum(chosen[key][w] != w for w in rewritable)
        assert binomtest(n, len(rewritable), 0.5).pvalue > 0.001, (n, len(rewritable))
    # the default (uniform over the word and its m alternatives): rewritten w.p. m/(m+1); a normal
    # approximation of the Poisson-binomial count, |z| < 3.3 (false failure ~0.001)
    uniform = KeyedLexicalRewriter(phrases=False)
    p = [len(uniform.alternatives(w)) / (len(uniform.alternatives(w)) + 1) for w in rewritable]
    n = sum(uniform.rewrite(w, k1) != w for w in rewritable)
    assert abs(n - sum(p)) < 3.3 * sum(q * (1 - q) for q in p) ** 0.5, (n, sum(p))
    # two keys disagree at a word w.p. 1 - sum of squares = m/(m+1) under the default
    differ = sum(uniform.rewrite(w, k1) != uniform.rewrite(w, k2) for w in rewritable)
    assert abs(differ - sum(p)) < 3.3 * sum(q * (1 - q) for q in p) ** 0.5, (differ, sum(p))
    assert sum(rewriter.rewrite(p["text"], k1) != rewriter.rewrite(p["text"], k2) for p in leads) > 0.9 * len(leads)


def test_variants_of_a_passage_differ_and_edits_are_bounded(leads):
    twins = make_twins(leads, k=3, max_edit_rate=0.3)
    assert len(twins.ids) + len(twins.manifest["skipped"]) == len(leads) and len(twins.ids) > 0.9 * len(leads)
    for i in twins.ids:
        texts = [" ".join(twins.variants[i][j].split()) for j in range(3)]
        assert len(set(texts)) == 3
        assert all(q["edit_rate"] <= 0.3 for q in twins.quality[i].values())
    # version 1 changed 0.07 of the words on these passages; version 2 measured 0.10-0.11
    assert 0.085 < twins.manifest["quality"]["0"]["edit_rate"] < 0.3
    assert twins.manifest["rewriter"]["version"] == 2


class Tag(Rewriter):
    """A cheap rewriter for the draw's tests: the key's first bytes appended."""
    name = "tag"

    def rewrite(self, text, key):
        return f"{text} [{key[:4].hex()}]"


def test_the_public_variant_is_drawn_uniformly():
    """Over 3000 passages, k = 3, a secret from the operating system's generator and the fixed test
    beacon: the counts of each public index fit the uniform distribution (chi-square test; false
    failure 0.001), and nothing is drawn before the release."""
    passages = [{"id": str(n), "text": f"passage {n}"} for n in range(3000)]
    twins = make_twins(passages, k=3, rewriter=Tag(), beacon_round=STAND_IN.round)
    assert twins.public == {} and "draw" not in twins.manifest
    beacon_draw(twins, STAND_IN)
    counts = Counter(twins.public.values())
    assert chisquare([counts[j] for j in range(3)]).pvalue > 0.001, counts
    # and independently of the passage: the first and second halves draw alike
    first = sum(twins.public[str(n)] == 0 for n in range(1500))
    assert binomtest(first, 1500, 1 / 3).pvalue > 0.001


def _write(tmp_path, passages, k=2, rewriter=None):
    """twins make, then twins release with a stand-in beacon round (tests/beacons.py)."""
    twins = make_twins(passages, k=k, rewriter=rewriter or Tag(), beacon_round=STAND_IN.round)
    folder = write_twins(twins, tmp_path / "twins")
    return folder, release_twins(folder, STAND_IN)


def _rehash(folder):
    """What someone who edits the files and their manifest does (the commitment must still catch it)."""
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"] = {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in manifest["files"]}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_folder_round_trip_and_what_is_public(tmp_path):
    passages = [{"id": f"p{n}", "text": f"text number {n}"} for n in range(20)]
    folder, twins = _write(tmp_path, passages, k=3)
    loaded = load_twins(folder)
    assert loaded.ids == twins.ids and loaded.public == twins.public and loaded.variants == twins.variants
    assert loaded.salts == twins.salts and loaded.secret == twins.secret
    public = [json.loads(line) for line in (folder / "public.jsonl").read_text().splitlines()]
    assert [set(r) for r in public] == [{"id", "text"}] * 20  # nothing but the text to release
    published = (folder / "manifest.json").read_text() + (folder / "public.jsonl").read_text()
    assert not any(key.hex() in published for key in twins.keys)
    assert not any(twins.salts[i][j].hex() in published or twins.variants[i][j] in published
                   for i in twins.ids for j in range(3) if j != twins.public[i])  # no private text, no private salt
    assert twins.secret.hex() in published  # revealed with the release: the draw re-derives from it
    suspect, heldout = loaded.sides(seed=1)
    assert [p["id"] for p in suspect] == twins.ids
    assert all(h["id"].startswith(s["id"] + "#") and h["text"] != s["text"] for s, h in zip(suspect, heldout))
    with pytest.raises(InputError, match="already holds a twins folder"):
        write_twins(twins, folder)


def _legacy(tmp_path, passages, k=2) -> tuple:
    """A folder as `twins make` wrote it before twins release (version 1): drawn at make with the
    operating system's generator, committed as sha256(salt ‖ draw), the salt in keys.json."""
    import secrets

    twins = make_twins(passages, k=k, rewriter=Tag())
    public, salt = {i: secrets.randbelow(k) for i in twins.ids}, secrets.token_bytes(32)
    folder = tmp_path / "legacy"
    folder.mkdir()
    (folder / "public.jsonl").write_text("".join(json.dumps({"id": i, "text": twins.variants[i][public[i]]}) + "\n"
                                                 for i in twins.ids))
    (folder / "private.jsonl").write_text("".join(json.dumps({"id": i, "variant": j, "text": twins.variants[i][j]})
                                                  + "\n" for i in twins.ids for j in range(k) if j != public[i]))
    (folder / "keys.json").write_text(json.dumps({"keys": [x.hex() for x in twins.keys], "salt": salt.hex()}))
    manifest = {"format": "trainspotter-twins", "version": 1, "k": k, "passages": len(twins.ids),
                "files": dict.fromkeys(("public.jsonl", "private.jsonl", "keys.json")),
                "commitment": {"scheme": "sha256(salt || json([[id, public variant], ...]))",
                               "digest": commitment([(i, public[i]) for i in twins.ids], salt)}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    _rehash(folder)
    return folder, public, salt


def test_a_version_1_folder_loads_and_its_commitment_opens_but_its_draw_is_unproven(tmp_path):
    passages = [{"id": f"p{n}", "text": f"text number {n}"} for n in range(20)]
    folder, public, salt = _legacy(tmp_path, passages)
    assert load_twins(folder).public == public
    assert verify_commitment(folder) and verify_commitment(folder, salt.hex())
    assert not verify_commitment(folder, "00" * 32)  # a wrong salt
    draw = [(i, public[i]) for i in sorted(public, key=lambda i: int(i[1:]))]
    flipped = [(i, 1 - j) if n == 7 else (i, j) for n, (i, j) in enumerate(draw)]
    assert commitment(flipped, salt) != commitment(draw, salt)
    proof = prove_folder(folder)
    assert proof.status == "unproven" and "fixed at twins make, not that nobody chose it" in proof.reason
    assert prove_folder(folder, "ab" * 32).status == "failed"  # not the commitment the auditor saw published
    # Swap passage p7's public and private versions in the files and re-hash them: the files are
    # consistent again, but the draw they hold is no longer the committed one.
    pub, priv = folder / "public.jsonl", folder / "private.jsonl"
    prows = [json.loads(x) for x in pub.read_text().splitlines()]
    qrows = [json.loads(x) for x in priv.read_text().splitlines()]
    p7, q7 = next(r for r in prows if r["id"] == "p7"), next(r for r in qrows if r["id"] == "p7")
    p7["text"], q7["text"], q7["variant"] = q7["text"], p7["text"], public["p7"]
    pub.write_text("".join(json.dumps(r) + "\n" for r in prows))
    priv.write_text("".join(json.dumps(r) + "\n" for r in qrows))
    _rehash(folder)
    assert load_twins(folder).public["p7"] != public["p7"]
    assert not verify_commitment(folder)


def test_a_tampered_or_incomplete_folder_is_one_error_naming_the_file(tmp_path):
    passages = [{"id": f"p{n}", "text": f"text number {n}"} for n in range(6)]
    folder, _ = _write(tmp_path, passages)
    pub, priv = folder / "public.jsonl", folder / "private.jsonl"
    original = pub.read_text()
    pub.write_text(original.replace("text number 3", "text number 33"))
    with pytest.raises(InputError, match=re.escape(f"{pub}: sha256 differs")):
        load_twins(folder)
    pub.write_text(original)
    load_twins(folder)
    priv.rename(tmp_path / "elsewhere.jsonl")
    with pytest.raises(InputError, match=re.escape(f"{priv}: missing")):
        load_twins(folder)
    (tmp_path / "elsewhere.jsonl").rename(priv)
    lines = priv.read_text().splitlines()
    priv.write_text("\n".join(x for x in lines if json.loads(x)["id"] != "p4") + "\n")
    _rehash(folder)
    with pytest.raises(InputError, match=re.escape(f"{priv}: passage 'p4' (public.jsonl line 5) has no private twin")):
        load_twins(folder)
    priv.write_text("\n".join(lines + ['{"id": "p9", "variant": 1, "text": "stray", "salt": "00"}']) + "\n")
    _rehash(folder)
    with pytest.raises(InputError, match=re.escape(f"{priv}:7: passage id 'p9' is not in public.jsonl")):
        load_twins(folder)
    (folder / "manifest.json").unlink()
    with pytest.raises(InputError, match=re.escape(f"{folder / 'manifest.json'}: missing")):
        load_twins(folder)
    with pytest.raises(InputError, match="at least 2 variants"):
        make_twins(passages, k=1, rewriter=Tag())


def test_paired_pairs_keep_each_passage_together_in_a_seeded_order():
    suspect = [{"id": f"p{n}", "text": f"a{n}"} for n in range(30)]
    heldout = [{"id": f"p{n}#1", "text": f"b{n}"} for n in range(30)]
    pairs = make_pairs(suspect, heldout, seed=3, paired=True)
    assert all(h["id"] == s["id"] + "#1" for s, h in pairs) and len(pairs) == 30
    assert [s["id"] for s, _ in pairs] != [s["id"] for s in suspect]  # shuffled (1/30! to fail by chance)
    assert pairs == make_pairs(suspect, heldout, seed=3, paired=True)
    assert len(make_pairs(suspect, heldout, seed=3, max_pairs=7, paired=True)) == 7
    with pytest.raises(InputError, match="paired sides differ"):
        make_pairs(suspect, heldout[:-1], paired=True)


def test_config_twins_names_the_folder_files_and_excludes_suspect():
    config = AuditConfig(twins="dir", model="hf:/m")
    assert (config.suspect, config.heldout, config.paired, config.unguarded_min_pairs) == (
        "dir/public.jsonl", "dir/private.jsonl", True, 0)
    assert AuditConfig(**config.model_dump(mode="json")) == config
    with pytest.raises(ValidationError, match="twins replaces suspect and heldout"):
        AuditConfig(twins="dir", suspect="s.jsonl", model="hf:/m")


def _fake_model(passages, batch_no):
    """A model that never saw any version but prefers some words to others: the mean of a hash of
    the words (systematic between the variants' keys) and the length."""
    def h(w):
        return hashlib.sha256(w.encode()).digest()[0] / 255

    return [{"gray_ppl": -sum(map(h, p["text"].split())) / len(p["text"].split()),
             "gray_zlib_ratio": float(len(p["text"]))}
            for p in passages]


@pytest.fixture(scope="module")
def variants(leads):
    return make_twins(leads[:60], k=2, beacon_round=STAND_IN.round)


def _twins_audit(twins, seed, **test):
    config = AuditConfig(twins="unused", model="hf:/never-loaded", seed=seed, test=test)
    suspect, heldout = twins.sides(seed)
    return audit(config, extract_fn=_fake_model, passages={config.suspect: suspect, config.heldout: heldout})


def test_twins_audits_under_h0_reject_at_most_alpha(variants):
    """Under H0 (no model saw any version) with the public versions drawn at random, the e-process
    rejects at most α = 0.05 of the time: one-sided binomial test over 40 audits of 60 pairs (false
    failure 0.001; it catches a rate far above α, not a small excess), although the fake model
    tells the variants' keys apart. Each trial draws the public versions from a fresh secret and
    the test beacon, as `twins release` does; no reference, no --assume-exchangeable. Twins in
    memory have no folder to show their draw, so none of these audits may say "trained on"."""
    import secrets

    trials, rejections = 40, 0
    for trial in range(trials):
        variants.secret = secrets.token_bytes(32)
        beacon_draw(variants, STAND_IN)
        result = _twins_audit(variants, seed=trial)
        assert result.guard != "small"  # the small-audit rule does not apply to twins
        assert result.verdict != "trained on" and result.draw.status == "unproven"
        assert result.guard == ("draw" if result.model_reject else None)
        rejections += result.model_reject
    assert binomtest(rejections, trials, 0.05, alternative="greater").pvalue > 0.001, rejections


def test_a_draw_that_is_not_uniform_is_caught_by_the_blind_check(leads):
    """What breaks the guarantee: publishing variant 0 of every passage instead of a random one.
    Each variant's key has its own dataset-wide word preferences, so the texts alone tell the
    sides apart: the blind check fires (far more often than α: ≥ 3 of 4 audits, one-sided
    binomial p < 0.001 against α = 0.05; it fired in 4 of 4 when measured) and the explanation
    says the twins were made or released wrongly (120 passages; at 60 the check has too few pairs)."""
    variants = make_twins(leads, k=2)
    variants.public = {i: 0 for i in variants.ids}
    results = [_twins_audit(variants, seed=s) for s in range(4)]
    fired = [r for r in results if r.blind.fired]
    assert binomtest(len(fired), 4, 0.05, alternative="greater").pvalue < 0.001, [r.blind.e_value for r in results]
    assert all(r.verdict == "inconclusive" and "twins were made or released wrongly" in r.explanation for r in fired)
