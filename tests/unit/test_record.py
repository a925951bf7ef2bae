"""The sealed audit record and its offline check, on synthetic audits (no model is loaded:
``extract_fn`` returns features computed from the texts, the model spec points at a folder
whose weight file is only hashed). Every tampering must fail naming what was changed."""

from __future__ import annotations

import copy
import hashlib
import json
import random

import pytest

from trainspotter import audit
from trainspotter.errors import InputError
from trainspotter.loop.ledger import load_ledger
from trainspotter.record.keys import load_private_key, load_public_key, sign
from trainspotter.record.verify import load_record, verify_records

WORDS = "river stone light paper garden window market silver winter orange music engine".split()


def write_passages(folder, n: int, seed: int = 0) -> tuple[str, str, str]:
    """suspect.jsonl, heldout.jsonl (texts from one generator: the blind check stays quiet) and
    an hf: model folder whose weights are only hashed."""
    rng = random.Random(seed)
    for side in ("suspect", "heldout"):
        with open(folder / f"{side}.jsonl", "w") as f:
            for i in range(n):
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))) + "."
                f.write(json.dumps({"id": f"{side[0]}{i}", "text": text}) + "\n")
    model = folder / "model"
    model.mkdir(exist_ok=True)
    (model / "model.safetensors").write_bytes(b"not really weights")
    return str(folder / "suspect.jsonl"), str(folder / "heldout.jsonl"), f"hf:{model}"


def synthetic_extract(shift: float = 0.6):
    """Two features per passage from its text's hash; suspect passages (ids s…) shifted."""
    def extract_fn(passages: list[dict], batch_no: int) -> list[dict]:
        rows = []
        for p in passages:
            h = hashlib.sha256(p["text"].encode()).digest()
            a, b = h[0] / 255 - 0.5, h[1] / 255 - 0.5
            rows.append({"f1": a + (shift if str(p["id"]).startswith("s") else 0.0), "f2": b})
        return rows

    return extract_fn


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    folder = tmp_path_factory.mktemp("record")
    suspect, heldout, model = write_passages(folder, 120)
    result = audit(suspect=suspect, heldout=heldout, model=model, batch_pairs=8, seed=2, assume_exchangeable=True,
                   extract_fn=synthetic_extract())
    path = folder / "record.json"
    path.write_text(json.dumps(result.record))
    return result, path


def _verify(record, key=None):
    return verify_records([("record.json", record)], key)


def test_a_fresh_audit_record_verifies_bit_for_bit(fresh):
    result, path = fresh
    record = load_record(path)
    assert record["digest"] == result.record_digest and result.verdict == "trained on"
    assert record["result"]["pairs_used"] == len([p for b in record["batches"] for p in b["pairs"]]) > 0
    check = _verify(record)
    assert check.ok, check.failure
    details = {c.name: c.detail for c in check.checks}
    assert "bit-for-bit" in details["model test"] and "bit-for-bit" in details["blind check"]
    assert record["model"]["weights_sha256"] == {"model.safetensors": hashlib.sha256(b"not really weights").hexdigest()}


def _pair(record, k=2):
    return [p for b in record["batches"] for p in b["pairs"]][k]


def _feature(r):
    _pair(r)["suspect"]["features"]["f1"] += 0.25


def _text(r):
    r["passages"]["heldout"][5]["text"] += " changed"


def _seed(r):
    r["config"]["seed"] = 3


def _verdict(r):
    r["result"]["verdict"] = "no evidence"


def _wealth(r):
    _pair(r)["wealth"] *= 1.001


def _chain(r):
    r["batches"][0]["digest"] = "f" * 64


def _model(r):
    r["model"]["weights_sha256"]["model.safetensors"] = "0" * 64


@pytest.mark.parametrize("tamper, name, words", [
    (_feature, "features", "pair 3, suspect"),
    (_text, "passages", "passage heldout 'h5'"),
    (_seed, "pair order", "seed 3"),
    (_verdict, "result", "result.verdict: recorded 'no evidence', replayed 'trained on'"),
    (_wealth, "model test", "pair 3 "),
    (_chain, "chain", "batch 1"),
    (_model, "digest", "section 'model'"),
], ids=lambda v: v.__name__.strip("_") if callable(v) else None)
def test_each_change_fails_naming_it(fresh, tamper, name, words):
    record = load_record(fresh[1])
    tamper(record)
    failure = _verify(record).failure
    assert failure is not None and failure.name == name and words in failure.detail, failure
    if tamper is _wealth:
        assert "wealth recorded" in failure.detail


def test_a_changed_test_seed_only_breaks_the_config_digest(fresh):
    """A seed that no replay reads (the online scorer's) is still bound by the config's digest."""
    record = load_record(fresh[1])
    record["config"]["test"]["seed"] = 7
    failure = _verify(record).failure
    assert failure.name == "digest" and "section 'config'" in failure.detail


def _keys(tmp_path):
    from cryptography.hazmat.primitives import serialization as s
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    paths = []
    for name in ("a", "b"):
        key = Ed25519PrivateKey.generate()
        (tmp_path / f"{name}.pem").write_bytes(key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8,
                                                                 s.NoEncryption()))
        (tmp_path / f"{name}.pub").write_bytes(key.public_key().public_bytes(s.Encoding.PEM,
                                                                             s.PublicFormat.SubjectPublicKeyInfo))
        paths.append(tmp_path / name)
    return paths


def test_signature_verifies_with_its_key_only(fresh, tmp_path):
    a, b = _keys(tmp_path)
    record = sign(load_record(fresh[1]), load_private_key(a.with_suffix(".pem")))
    assert _verify(record, load_public_key(a.with_suffix(".pub"))).ok
    assert _verify(record).ok  # the key in the record
    wrong = _verify(record, load_public_key(b.with_suffix(".pub"))).failure
    assert wrong.name == "signature" and "not the given public key" in wrong.detail
    forged = copy.deepcopy(record)
    forged["signature"]["public_key"] = load_public_key(b.with_suffix(".pub")).public_bytes_raw().hex()
    assert _verify(forged).failure.name == "signature"
    assert _verify(load_record(fresh[1]), load_public_key(a.with_suffix(".pub"))).failure.name == "signature"
    with pytest.raises(InputError, match="not a PEM key"):
        load_private_key(fresh[1])


def test_a_recurring_audit_extends_the_chain(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINSPOTTER_ARTIFACTS", str(tmp_path / "artifacts"))
    suspect, heldout, model = write_passages(tmp_path, 60, seed=1)
    runs = [audit(suspect=suspect, heldout=heldout, model=model, name="chained", ledger=True, max_pairs=12,
                  batch_pairs=4, extract_fn=synthetic_extract(shift=0.0)) for _ in range(2)]
    first, second = (r.record for r in runs)
    assert second["start"]["t0"] == 12 and second["start"]["previous"] == first["end"]["chain"]
    assert [r["record_chain"] for r in load_ledger("chained")["runs"]] == [first["end"]["chain"],
                                                                           second["end"]["chain"]]
    both = verify_records([("1.json", first), ("2.json", second)])
    assert both.ok, both.failure
    assert verify_records([("2.json", second)]).ok  # from its recorded start state
    backwards = verify_records([("2.json", second), ("1.json", first)]).failure
    assert backwards.name == "link 1-2" and "does not continue the chain" in backwards.detail
    broken = copy.deepcopy(second)
    broken["start"]["state"]["eprocess"]["wealth"] = 2.0
    assert verify_records([("2.json", broken)]).failure.detail.startswith("start: the stored e-process state")


@pytest.mark.parametrize("placebo_shift, verdict", [(0.0, "trained on"), (0.6, "inconclusive")])
def test_the_placebo_check_is_replayed_from_its_features(tmp_path, placebo_shift, verdict):
    """A placebo model that sees no difference leaves "trained on"; one that sees the same
    difference makes it inconclusive. Either way the record replays it, and a changed placebo
    wealth or a dropped placebo run does not verify."""
    suspect, heldout, model = write_passages(tmp_path, 120, seed=4)
    result = audit(suspect=suspect, heldout=heldout, model=model, placebo=model, batch_pairs=8,
                   extract_fn=synthetic_extract(), placebo_fn=synthetic_extract(placebo_shift))
    record = json.loads(json.dumps(result.record))
    assert result.verdict == verdict and result.placebo.ran and record["placebo"]["pairs"]
    check = _verify(record)
    assert check.ok, check.failure
    assert "replayed from the placebo model's features" in {c.name: c.detail for c in check.checks}["placebo check"]
    changed = copy.deepcopy(record)
    changed["placebo"]["pairs"][3]["wealth"] *= 1.01
    assert _verify(changed).failure.detail.startswith("placebo pair 4: wealth recorded")
    dropped = copy.deepcopy(record)
    dropped["placebo"] = {"result": dict(dropped["placebo"]["result"], ran=False, fired=False), "pairs": []}
    assert "it must have run" in _verify(dropped).failure.detail


@pytest.mark.parametrize("content, problem", [("", "not a complete JSON document"),
                                              ('{"format": "trainspotter-audit-record", "ver', "truncated"),
                                              ('{"a": 1}', "not a trainspotter audit record")])
def test_an_unreadable_record_is_one_input_error(tmp_path, content, problem):
    path = tmp_path / "r.json"
    path.write_text(content)
    with pytest.raises(InputError, match=problem):
        load_record(path)


@pytest.mark.parametrize("drift, ok", [(0.0, True), (5e-5, True), (1e-2, False)])
def test_requery_compares_the_models_answers_within_the_stated_tolerance(fresh, monkeypatch, drift, ok):
    """The model answers again through ``extract``, here the synthetic one plus ``drift``
    (relative) on f2: float noise within rtol 1e-4 passes, a changed model does not."""
    import pandas as pd

    import trainspotter.backends
    import trainspotter.features.extract
    from trainspotter.record.requery import requery

    def extract(passages, target, references, access, features):
        rows = synthetic_extract()(passages, 0)
        return pd.DataFrame([dict(r, f2=r["f2"] * (1 + drift)) for r in rows])

    monkeypatch.setattr(trainspotter.features.extract, "extract", extract)
    monkeypatch.setattr(trainspotter.backends, "load_backend", lambda spec: None)
    check = requery(load_record(fresh[1]), 4)
    assert check.ok is ok and "weight files' sha256 are unchanged" in check.detail
    if not ok:
        assert " f2: recorded " in check.detail


def _resealed_end(record: dict, scale: float) -> tuple[dict, str]:
    """The record with the first float of its kept end state scaled and every digest over it made
    again, as another machine's arithmetic (scale 1 + 1e-12) or an edited state would leave it."""
    from trainspotter.record.format import record_digest, sha256, state_sha256

    def first_float(node, where):
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            if isinstance(v, float) and v != 0.0:
                node[k] = v * scale
                return f"{where}.{k}" if isinstance(node, dict) else f"{where}[{k}]"
            if (found := first_float(v, f"{where}.{k}" if isinstance(node, dict) else f"{where}[{k}]")):
                return found
        return None

    where = first_float(record["end"]["state"], "end.state")
    record["end"]["state_sha256"] = state_sha256(record["end"]["state"])
    record["sections"]["end"] = sha256(record["end"])
    record["digest"] = record_digest(record)
    return record, where


@pytest.mark.parametrize("scale, ok", [(1 + 1e-12, True), (1.001, False)])
def test_the_end_state_is_compared_value_by_value_where_the_arithmetic_differs(fresh, scale, ok):
    """A record keeps the state its ledger continues from: another machine's last bits (1e-12 relative)
    pass within the tolerance the replays use; a state that differs by 1e-3 fails naming the value."""
    record = load_record(fresh[1])
    assert record["end"]["state"] is not None
    record, where = _resealed_end(record, scale)
    checks = {c.name: c for c in _verify(record).checks}
    assert checks["digest"].ok and checks["end state"].ok is ok and checks["end state"].done
    assert ("within 1e-09" in checks["end state"].detail) if ok else checks["end state"].detail.startswith(where)


def test_a_record_without_its_end_state_must_match_its_sha256_where_the_steps_replay_bit_for_bit(fresh):
    """A record sealed before end states were kept holds only their sha256: on the sealer's arithmetic
    (every step bit-for-bit, as here) a state that differs still fails."""
    from trainspotter.record.format import record_digest, sha256

    record = load_record(fresh[1])
    del record["end"]["state"]
    record["end"]["state_sha256"] = "0" * 64
    record["sections"]["end"] = sha256(record["end"])
    record["digest"] = record_digest(record)
    end = {c.name: c for c in _verify(record).checks}["end state"]
    assert not end.ok and "does not match the recorded sha256" in end.detail
