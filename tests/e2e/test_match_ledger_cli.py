"""A recurring matched audit through the command line (`audit --shift-check match --name NAME --ledger`,
issue 36): run 2, given more passages, continues run 1's stored e-value on matched pairs of passages
never bet on; a ledger begun matched (or ordinary) refuses to continue the other way, in one line,
before any model loads."""

import json

from test_match_cli import INCONCLUSIVE_EXIT, _heldout, run
from test_twins_cli import one_error_line

REFERENCE = ["--reference", "testbed:mini/reference"]


def _first(path, src, n: int) -> str:
    path.write_text("".join(src.read_text().splitlines(keepends=True)[:n]))
    return str(path)


def _audit(*args):
    out = run("audit", "--model", "testbed:mini", "--json", *args)
    assert out.returncode in (0, INCONCLUSIVE_EXIT), out.stderr[-2000:]
    return json.loads(out.stdout)


def test_a_matched_audit_continues_its_ledger_on_passages_never_bet_on(tmp_path, mini_testbed):
    from trainspotter.loop.ledger import ledger_path

    heldout = _heldout(mini_testbed, tmp_path / "heldout.jsonl", every=2)  # half reformatted
    members = str(mini_testbed / "member.jsonl")
    batch1 = ["--suspect", _first(tmp_path / "s1.jsonl", mini_testbed / "member.jsonl", 40),
              "--heldout", _first(tmp_path / "h1.jsonl", tmp_path / "heldout.jsonl", 40)]
    name = ["--name", "recurring-matched", "--ledger", "--shift-check", "match", *REFERENCE]
    first = _audit(*batch1, *name, "--max-pairs", "5")
    ledger1 = json.loads(ledger_path("recurring-matched").read_text())
    record = tmp_path / "run2.json"
    second = _audit("--suspect", members, "--heldout", heldout, *name, "--record", str(record))
    ledger2 = json.loads(ledger_path("recurring-matched").read_text())
    assert first["pairs_used"] == 5 and first["wealth_start"] == 1.0 and first["verdict"] != "trained on"
    # the stored e-value continues: run 2 starts where run 1 ended, in the result and in the ledger
    assert second["wealth_start"] == first["wealth"] == ledger1["runs"][0]["wealth_end"]
    assert ledger2["runs"][1]["wealth_start"] == ledger1["runs"][0]["wealth_end"]
    assert second["pairs_used"] == 5 + second["pairs_this_run"] and second["pairs_this_run"] >= 1
    # no passage is bet on twice; run 1's pairs come first, as bet on
    used = ledger2["used"]
    for side in ("suspect", "heldout"):
        assert len(used[side]) == len(set(used[side])) == second["pairs_used"]
        assert used[side][:5] == ledger1["used"][side]
    pairs2 = [p for b in json.loads(record.read_text())["batches"] for p in b["pairs"]]
    assert not {p["suspect"]["id"] for p in pairs2} & set(ledger1["used"]["suspect"])
    # each run says how many passages it matched and dropped; run 2 matched only the 75 never bet on
    assert ledger2["setup"]["matched"] is True
    m1, m2 = (r["match"] for r in ledger2["runs"])
    assert m1["suspect_total"] == 40 and m1["matched"] + m1["dropped"] == 40 and m1["pairs_before"] == 0
    assert m2["suspect_total"] == 75 and m2["matched"] + m2["dropped"] == 75 and m2["pairs_before"] == 5
    assert second["match"]["matched"] == m2["matched"]
    assert second["explanation"].startswith(f"Matched audit: {m2['matched']} of 75 suspect passages not bet on "
                                            f"before were paired")
    assert "The e-process continues from 5 matched pairs of earlier runs." in second["explanation"]
    # both guards ran on every matched pair of the e-process the run was given: run 1's and its own
    assert second["blind"]["pairs_available"] == 5 + m2["matched"]
    checked = run("verify", str(record))
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    # continued as an ordinary audit: refused in one line, before any model loads
    line = one_error_line(run("audit", "--suspect", members, "--heldout", heldout, "--model", "testbed:mini",
                              *REFERENCE, "--name", "recurring-matched", "--ledger"))
    assert line == ("error: audit 'recurring-matched': its ledger was begun as a matched audit (--shift-check "
                    "match) and cannot continue as an ordinary one; continue it with --shift-check match or start "
                    "a new audit name")
    assert json.loads(ledger_path("recurring-matched").read_text()) == ledger2  # untouched


def test_an_ordinary_ledger_refuses_to_continue_matched(tmp_path, mini_testbed):
    sides = ["--suspect", str(mini_testbed / "member.jsonl"), "--heldout", str(mini_testbed / "heldout.jsonl")]
    _audit(*sides, *REFERENCE, "--name", "recurring-plain", "--ledger", "--max-pairs", "4")
    line = one_error_line(run("audit", *sides, "--model", "testbed:mini", *REFERENCE, "--name", "recurring-plain",
                              "--ledger", "--shift-check", "match"))
    assert line == ("error: audit 'recurring-plain': its ledger was begun as an ordinary audit and cannot continue "
                    "as a matched one (--shift-check match); continue it without --shift-check match or start a "
                    "new audit name")
