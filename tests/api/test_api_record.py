"""A black-box audit through `trainspotter serve`: its sealed record names the API model
without its key (the autouse scan checks every file) and verifies offline, its black features
recomputed from the API's recorded answers, then re-asked."""

from __future__ import annotations

import json

from trainspotter.testbeds.build import split_path


def test_a_black_box_audit_through_serve_verifies(mini_testbed, start_server, monkeypatch):
    from trainspotter.flows.audit import AuditConfig, audit_flow
    from trainspotter.record.requery import requery
    from trainspotter.record.verify import load_record, verify_records

    monkeypatch.setenv("TS_TEST_KEY", "sk-test-SECRET-12345")
    with start_server(seed=3) as (app, url):
        spec = f"openai:mini@{url}?tokenizer=testbed:mini&key_env=TS_TEST_KEY&batch=4"
        config = AuditConfig(name="api-record", suspect=str(split_path("mini", "member")),
                             heldout=str(split_path("mini", "heldout")), model=spec, access="black",
                             max_pairs=16, batch_pairs=8)
        result = audit_flow(config)
        record = load_record(result["record"])
        assert record["model"]["scheme"] == "openai" and record["model"]["host"] == "127.0.0.1"
        server = next(iter(record["model"]["server"].values()))
        assert "mode" in server and server["system_fingerprints"] == [app.state.system_fingerprint]
        checked = verify_records([(result["record"], record)])
        assert checked.ok, checked.failure
        # the black features recomputed from the API's recorded answers: greedy tokens and their strings
        # (the API's tokenizer need not be at hand), similarities, continuations and BERTScore F1s
        detail = {c.name: c.detail for c in checked.checks}["features"]
        assert "matches bit-for-bit; the black-box token similarities computed again" in detail, detail
        side = record["batches"][0]["pairs"][0]["suspect"]
        assert set(side["answers"]) == {"black"} and {"true", "pred", "sim"} <= set(side["answers"]["black"]["target"])
        again = requery(record, 2)
        assert again.ok, again.detail
        assert f"system_fingerprint is unchanged ({app.state.system_fingerprint})" in again.detail
    with start_server(seed=3, system_fingerprint="fp_rebuilt") as (app, url2):
        moved = json.loads(json.dumps(record).replace(url, url2))  # the same server, restarted on another port
        again = requery(moved, 2)
        assert "system_fingerprint changed" in again.detail and "fp_rebuilt now" in again.detail, again.detail
    assert "sk-test" not in json.dumps(record)
