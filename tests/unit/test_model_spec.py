"""Model specs are parsed once (backends/spec.py): ``parse_spec`` gives a frozen ModelSpec that
``load_backend``, ``spec_fingerprint`` and ``resolve_spec`` take as it is; its fingerprint is
computed once. The error messages of bad specs are checked in tests/unit/test_backend_hf.py,
tests/api/test_api_backend.py and tests/reliability/test_bad_input.py."""

from __future__ import annotations

import re

import pytest

from trainspotter.backends import ModelSpec, parse_spec, resolve_spec, spec_fingerprint
from trainspotter.backends import spec as S
from trainspotter.errors import InputError


@pytest.fixture
def model_dir(tmp_path):
    d = tmp_path / "model"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"weights" * 100)
    return d


def test_fields_of_each_scheme():
    s = parse_spec("testbed:mini/reference?dtype=float16&batch_size=4")
    assert (s.scheme, s.base, s.where, s.role, s.options) == (
        "testbed", "testbed:mini/reference", "mini", "reference", {"dtype": "float16", "batch_size": 4})
    assert parse_spec("testbed:mini").role == "target" and parse_spec("hf:~/m").where == "~/m"
    api = parse_spec("openai:gpt-x@https://h:8000/v1/?tokenizer=testbed:mini&price=0.5&mode=label")
    assert (api.scheme, api.model, api.where, api.base) == ("openai", "gpt-x", "https://h:8000/v1",
                                                            "openai:gpt-x@https://h:8000/v1/")
    assert api.options == {"price_prompt_1k": 0.5, "price_completion_1k": 0.5, "mode": "label"}
    assert api.tokenizer == parse_spec("testbed:mini")  # the nested spec, parsed with it
    assert parse_spec("openai:m@http://h/v1?tokenizer=/some/dir").tokenizer == "/some/dir"


def test_a_spec_is_frozen_equal_by_text_and_parsed_once():
    s = parse_spec("hf:/m?dtype=bfloat16")
    assert parse_spec(s) is s and s == parse_spec("hf:/m?dtype=bfloat16") and hash(s) == hash(parse_spec(s.text))
    assert s != parse_spec("hf:/m") and isinstance(s, ModelSpec)
    with pytest.raises(AttributeError):
        s.scheme = "testbed"


def test_strings_are_parsed_once_at_entry_and_the_fingerprint_computed_once(model_dir, monkeypatch):
    import trainspotter.backends.weights as weights

    parses, digests = [], []
    real_parse, real_fp = S._parse_local, weights.model_fingerprint
    monkeypatch.setattr(S, "_parse_local", lambda text: parses.append(text) or real_parse(text))
    monkeypatch.setattr(weights, "model_fingerprint", lambda *a: digests.append(a) or real_fp(*a))
    text = f"hf:{model_dir}?dtype=float16"
    fp = spec_fingerprint(text)
    assert parses == [text] and len(digests) == 1
    assert resolve_spec(text) == model_dir and len(parses) == 2  # a string: parsed again, once
    s = parse_spec(text)
    assert spec_fingerprint(s) == s.fingerprint == fp and resolve_spec(s) == model_dir
    assert len(parses) == 3 and len(digests) == 2  # the ModelSpec's own fingerprint: computed once
    assert fp != spec_fingerprint(f"hf:{model_dir}")  # the dtype is part of it


def test_bad_spec_messages_name_what_they_always_named():
    for bad, message in [("testbed:mini/x?dtype=float16", "model spec 'testbed:mini/x': role must be"),
                         ("gpt:x?colour=red", "model spec 'gpt:x?colour=red': unknown option 'colour'"),
                         ("gpt:x", "model spec 'gpt:x': unknown backend 'gpt'"),
                         ("openai:m@http://h/v1?tokenizer=testbed:mini/x", "model spec 'testbed:mini/x': role"),
                         ("openai:m@http://h/v1?tokenizer=hf:/m&mode=psychic", "mode must be one of auto, "
                                                                                "logprobs-echo")]:
        with pytest.raises(InputError, match=re.escape(message)):
            parse_spec(bad)
    with pytest.raises(InputError, match="model spec 'hf:/m': expected openai:MODEL@"):
        S.parse_api_spec(parse_spec("hf:/m"))


def test_an_audit_and_an_extraction_parse_each_spec_once(mini_testbed, tmp_path, monkeypatch):
    """At the edge: AuditConfig / ExtractConfig parse the strings; the audit loop, the usage
    meter, the backends, the ledger and the extract flow's cached chunks only pass the
    ModelSpec on (and dump it as written)."""
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.flows.extract import ExtractConfig, run_extract
    from trainspotter.loop.run import audit

    parses = []
    real_parse = S._parse_local
    monkeypatch.setattr(S, "_parse_local", lambda text: parses.append(text) or real_parse(text))
    config = AuditConfig(name="parsed-once", suspect=str(mini_testbed / "member.jsonl"),
                         heldout=str(mini_testbed / "heldout.jsonl"), model="testbed:mini",
                         reference="testbed:mini/reference", max_pairs=16, ledger=True)
    assert sorted(parses) == ["testbed:mini", "testbed:mini/reference"]
    assert config.model_dump()["model"] == "testbed:mini"  # MLflow params, Prefect: as written
    result = audit(config)
    assert result.pairs_used > 0 and sorted(parses) == ["testbed:mini", "testbed:mini/reference"]
    from trainspotter.loop.ledger import load_ledger

    run = load_ledger("parsed-once")["runs"][-1]
    assert run["model"] == "testbed:mini" and run["model_fingerprint"] == config.model.fingerprint
    parses.clear()
    out = run_extract(ExtractConfig(data=str(mini_testbed / "member.jsonl"), model="testbed:mini",
                                    out=str(tmp_path / "f.parquet"), chunk_size=8,
                                    features={"perturbations": False, "sequence": False}))
    assert out["rows"] > 0 and parses == ["testbed:mini"]


def test_the_sets_of_a_multi_set_audit_share_the_parsed_specs(monkeypatch):
    """Each set's AuditConfig gets the ModelSpec parsed once for the whole audit."""
    from trainspotter.loop.sets import AuditSetsConfig

    parses = []
    real_parse = S._parse_local
    monkeypatch.setattr(S, "_parse_local", lambda text: parses.append(text) or real_parse(text))
    config = AuditSetsConfig(suspect=["a.jsonl", "b.jsonl"], heldout="h.jsonl", model="hf:/m",
                             reference=["hf:/r", "hf:/r2"])
    sets = config.configs()
    assert parses == ["hf:/m", "hf:/r", "hf:/r2"]
    assert all(c.model is config.model and len(c.reference) == 2
               and all(a is b for a, b in zip(c.reference, config.reference)) for c in sets)
    assert [c.test.alpha for c in sets] == [config.test.alpha / 2] * 2


def test_references_one_or_several_dump_as_written_and_never_twice():
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.loop.run import setup_of

    one = AuditConfig(suspect="s", heldout="h", model="hf:/m", reference="hf:/r")
    assert [r.text for r in one.reference] == ["hf:/r"]
    # one reference dumps as the string it was before several existed (ledgers, Prefect parameters)
    assert one.model_dump(mode="json")["reference"] == "hf:/r" and setup_of(one)["reference"] == "hf:/r"
    two = AuditConfig(suspect="s", heldout="h", model="hf:/m", reference=["hf:/r", "hf:/r2?dtype=float16"])
    assert two.model_dump(mode="json")["reference"] == ["hf:/r", "hf:/r2?dtype=float16"]
    assert AuditConfig.model_validate(two.model_dump(mode="json")) == two
    assert AuditConfig(suspect="s", heldout="h", model="hf:/m").reference == ()
    with pytest.raises(ValueError, match="'hf:/r' is given twice"):
        AuditConfig(suspect="s", heldout="h", model="hf:/m", reference=["hf:/r", "hf:/r?dtype=float16"])
