"""`trainspotter verify` as a user runs it, on records of real audits of the `mini` testbed:
a gray audit's signed record verifies (with its placebo check; every feature recomputed from the recorded
answers; its model still answers alike), each kind of change fails naming it with exit 1, an unreadable record is one error line with exit 2, and a
recurring black-box audit's two runs verify as one chain, their black features recomputed from the recorded answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_process import run_cli



def run(*args):
    return run_cli([str(a) for a in args], timeout=600)


def _keys(folder: Path) -> dict[str, Path]:
    from cryptography.hazmat.primitives import serialization as s
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    paths = {}
    for name in ("auditor", "other"):
        key = Ed25519PrivateKey.generate()
        paths[name] = folder / f"{name}.pem"
        paths[name].write_bytes(key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption()))
        paths[name + ".pub"] = folder / f"{name}.pub"
        paths[name + ".pub"].write_bytes(key.public_key().public_bytes(s.Encoding.PEM,
                                                                       s.PublicFormat.SubjectPublicKeyInfo))
    return paths


@pytest.fixture(scope="module")
def gray(mini_testbed, tmp_path_factory):
    """A signed gray audit of mini's members with a reference model (so the placebo check runs
    and is sealed too): its --json result, the record file and the keys."""
    folder = tmp_path_factory.mktemp("verify")
    keys = _keys(folder)
    out = run("audit", "--suspect", mini_testbed / "member.jsonl", "--heldout", mini_testbed / "heldout.jsonl",
              "--model", "testbed:mini", "--reference", "testbed:mini/reference", "--name", "sealed",
              "--batch-pairs", "4", "--record", folder / "record.json",
              "--sign", keys["auditor"], "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout), folder / "record.json", keys


def test_a_gray_audit_record_verifies_and_its_model_answers_alike(gray):
    result, path, keys = gray
    record = json.loads(path.read_text())
    assert result["record"] == str(path) and result["record_digest"] == record["digest"]
    assert record["signature"]["algorithm"] == "ed25519"
    out = run("verify", path, "--public-key", keys["auditor.pub"], "--requery", "2", "--json")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert all(c["ok"] for c in checks.values())
    assert "bit-for-bit" in checks["model test"]["detail"] and "given public key" in checks["signature"]["detail"]
    # every feature computed again, offline, from the model's answers in the record (the placebo model's too)
    assert "recomputed from the model's recorded answers matches bit-for-bit" in checks["features"]["detail"]
    assert record["version"] == 2 and all("answers" in p[s] for b in record["batches"] for p in b["pairs"]
                                          for s in ("suspect", "heldout"))
    assert result["verdict"] == "trained on" and "placebo model's features" in checks["placebo check"]["detail"]
    assert "weight files' sha256 are unchanged" in checks["requery"]["detail"]
    # the HTML report (and the run's record.json) carry the digest and the command that checks it
    page = Path(result["report"]).read_text()
    assert record["digest"] in page and "trainspotter verify" in page
    logged = Path(result["artifacts"].removeprefix("file://")) / "record.json"
    assert json.loads(logged.read_text())["digest"] == record["digest"]
    table = run("verify", path)
    assert table.returncode == 0 and f"verified: record {record['digest']}" in " ".join(table.stdout.split())


def _first_pair(record):
    return record["batches"][0]["pairs"][1]


def _change_answer(record):
    """One of the target's log-probs of pair 2's suspect passage, a little higher."""
    import numpy as np

    from trainspotter.features.answers import decode, encode

    answers = _first_pair(record)["suspect"]["answers"]
    t = decode(answers)[0]
    t.logprobs[5] += 0.1
    answers["target"]["logprobs"] = encode(t, {}, [])["target"]["logprobs"]
    assert np.isfinite(t.logprobs).all()


CHANGES = {
    "feature": (lambda r: _first_pair(r)["suspect"]["features"].update(gray_ppl=1.5),
                ("pair 2, suspect", "feature gray_ppl changed after sealing")),
    "answer": (_change_answer, ("pair 2, suspect", "answer changed after sealing")),
    "passage": (lambda r: r["passages"]["suspect"][0].update(text="another text"), "passage suspect"),
    "seed": (lambda r: r["config"].update(seed=5), "seed 5"),
    "verdict": (lambda r: r["result"].update(verdict="inconclusive" if r["result"]["verdict"] != "inconclusive"
                                             else "trained on"), "result.verdict: recorded "),
    "wealth": (lambda r: _first_pair(r).update(wealth=_first_pair(r)["wealth"] * 1.5), "pair 2 "),
}


@pytest.mark.parametrize("kind", CHANGES)
def test_a_changed_record_does_not_verify_and_says_what(gray, tmp_path, kind):
    change, words = CHANGES[kind]
    record = json.loads(gray[1].read_text())
    change(record)
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(record))
    out = run("verify", path, "--json")
    assert out.returncode == 1, out.stderr[-2000:]
    failure = json.loads(out.stdout)["first_failure"]
    assert all(w in failure["detail"] for w in ([words] if isinstance(words, str) else words)), failure
    plain = run("verify", path)
    last = " ".join(plain.stdout.split()).rpartition("does not verify: ")[2]  # the cause, then the first failure
    assert plain.returncode == 1 and last.endswith(failure["detail"])


def test_a_truncated_record_is_one_error_line_exit_2(gray, tmp_path):
    path = tmp_path / "truncated.json"
    path.write_text(gray[1].read_text()[:5000])
    out = run("verify", path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().startswith(f"error: {path}: not a complete JSON document")
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_the_signature_of_another_key_does_not_verify(gray):
    _, path, keys = gray
    out = run("verify", path, "--public-key", keys["other.pub"], "--json")
    assert out.returncode == 1
    failure = json.loads(out.stdout)["first_failure"]
    assert failure["name"] == "signature" and "not the given public key" in failure["detail"]
    bad_key = run("verify", path, "--public-key", path)
    assert bad_key.returncode == 2 and "not a PEM key" in bad_key.stderr


def test_a_recurring_audit_verifies_as_one_chain(mini_testbed, tmp_path):
    """A black-box recurring audit: each run's black features are recomputed from its recorded
    answers (greedy tokens, their strings, MiniLM similarities) through the CLI."""
    records = []
    for k in (1, 2):
        records.append(tmp_path / f"run{k}.json")
        out = run("audit", "--suspect", mini_testbed / "nonmember.jsonl", "--heldout", mini_testbed / "heldout.jsonl",
                  "--model", "testbed:mini", "--access", "black", "--name", "sealed-recurring", "--ledger",
                  "--max-pairs", "8", "--batch-pairs", "4", "--record", records[-1], "--json")
        assert out.returncode == 0, out.stderr[-2000:]
    out = run("verify", *records, "--json")
    assert out.returncode == 0, out.stdout[-3000:]
    checks = [c for c in json.loads(out.stdout)["checks"]]
    assert {c["name"]: c for c in checks}["link 1-2"]["ok"] and "chained from the earlier run's chain" in " ".join(
        c["detail"] for c in checks)
    features = [c["detail"] for c in checks if c["name"] == "features"]
    assert len(features) == 2 and all("recomputed from the model's recorded answers matches bit-for-bit; the "
                                      "black-box token similarities computed again" in d for d in features), features
    backwards = run("verify", *reversed(records), "--json")
    assert backwards.returncode == 1 and json.loads(backwards.stdout)["first_failure"]["name"] == "link 1-2"
    record = json.loads(records[1].read_text())
    side = record["batches"][0]["pairs"][0]["heldout"]
    assert set(side["answers"]) == {"black"} and "black_match_rate" in side["features"]
    side["answers"]["black"]["target"]["argmax"][0] += 1  # a greedy token changed after sealing
    records[1].write_text(json.dumps(record))
    out = run("verify", *records, "--json")
    failure = json.loads(out.stdout)["first_failure"]
    assert out.returncode == 1 and failure["name"] == "features", failure
    assert "pair 9, heldout" in failure["detail"] and "answer changed after sealing" in failure["detail"], failure
