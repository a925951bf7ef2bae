"""Recurring audits: a second run continues the stored e-process on new pairs only."""

import json

import pytest

from trainspotter.loop.ledger import load_ledger
from cli_process import run_cli


def _config(name, max_pairs, **kw):
    from trainspotter.testbeds.build import split_path
    from trainspotter.flows.audit import AuditConfig

    return AuditConfig(name=name, suspect=str(split_path("mini", "nonmember")),
                       heldout=str(split_path("mini", "heldout")), model="testbed:mini",
                       reference="testbed:mini/reference", max_pairs=max_pairs, ledger=True, **kw)


def test_second_run_continues_wealth_on_unused_pairs(mini_testbed):
    from trainspotter.flows.audit import audit_flow
    from trainspotter.stats.sequential import SequentialTest

    first = audit_flow(_config("recurring", 20))
    ledger1 = load_ledger("recurring")
    second = audit_flow(_config("recurring", 20))
    ledger2 = load_ledger("recurring")
    assert first["pairs_used"] == 20 and first["wealth_start"] == 1.0
    assert second["wealth_start"] == pytest.approx(first["wealth"])  # W2 starts where W1 ended
    assert second["pairs_used"] == 40 and second["pairs_this_run"] == 20
    used1, used2 = ledger1["used"]["suspect"], ledger2["used"]["suspect"]
    assert len(set(used2)) == 40 and set(used1) < set(used2)  # 20 new, never reused
    assert [r["run_id"] for r in ledger2["runs"]] == [first["run_id"], second["run_id"]]
    # The stored state is the uninterrupted e-process over the same 40 pairs in the same order.
    state = SequentialTest.from_dict(ledger2["state"])
    assert state.history["wealth"][19] == pytest.approx(first["wealth"])
    assert state.wealth == pytest.approx(second["wealth"])


def test_changed_settings_refuse_to_continue(mini_testbed):
    from trainspotter.errors import InputError
    from trainspotter.flows.audit import audit_flow
    from trainspotter.stats.sequential import TestConfig

    audit_flow(_config("strict", 5))
    with pytest.raises(InputError, match=r"settings differ from the stored ledger \(test.alpha: stored 0.05, now 0.01\)"):
        audit_flow(_config("strict", 5, test=TestConfig(alpha=0.01)))


def test_ledger_show_json(mini_testbed):
    from trainspotter.flows.audit import audit_flow

    audit_flow(_config("shown", 8))
    out = run_cli(["ledger", "show", "shown", "--json"], timeout=120)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["pairs_used"] == {"suspect": 8, "heldout": 8} and len(info["runs"]) == 1
    missing = run_cli(["ledger", "show", "nope"], timeout=120)
    assert missing.returncode == 2 and "no ledger for audit 'nope'" in missing.stderr
