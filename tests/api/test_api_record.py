"""A black-box audit through `trainspotter serve`: its sealed record names the API model
without its key (the autouse scan checks every file) and verifies offline, then re-asked."""

from __future__ import annotations

import json

from trainspotter.evaluation.testbed import split_path


def test_a_black_box_audit_through_serve_verifies(mini_testbed, start_server, monkeypatch):
    from trainspotter.flows.audit import AuditConfig, audit_flow
    from trainspotter.requery import requery
    from trainspotter.verify import load_record, verify_records

    monkeypatch.setenv("TS_TEST_KEY", "sk-test-SECRET-12345")
    with start_server(seed=3) as (app, url):
        spec = f"openai:mini@{url}?tokenizer=testbed:mini&key_env=TS_TEST_KEY&batch=4"
        config = AuditConfig(name="api-record", suspect=str(split_path("mini", "member")),
                             heldout=str(split_path("mini", "heldout")), model=spec, access="black",
                             max_pairs=16, batch_pairs=8)
        result = audit_flow(config)
        record = load_record(result["record"])
        assert record["model"]["scheme"] == "openai" and record["model"]["host"] == "127.0.0.1"
        assert "mode" in next(iter(record["model"]["server"].values()))
        checked = verify_records([(result["record"], record)])
        assert checked.ok, checked.failure
        again = requery(record, 2)
        assert again.ok, again.detail
    assert "sk-test" not in json.dumps(record)
