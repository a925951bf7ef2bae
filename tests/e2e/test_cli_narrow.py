"""What a new user meets at 80 columns, and advice computed from what they did (issue 38,
items 6 and 2). The CLI runs in this process (typer's runner) with COLUMNS=80; audits bet on
constructed features (``constant_features``: an ``extract_fn`` in place of the model's), never
on a borderline value of a model trained during the tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainspotter.flows.cli import app

NARROW = {"COLUMNS": "80", "TERMINAL_WIDTH": "80"}


def invoke(*args, env=None):
    return CliRunner().invoke(app, list(args), env=NARROW | (env or {}))


def lines(text: str) -> list[str]:
    return text.splitlines()


def no_evidence_features(seed: int = 5):
    """Features with no difference between the sets (gray_ppl ~ N(0, 1) on both sides, drawn
    per passage id): the e-process stays far below 1/α whatever the pair order."""
    import zlib

    import numpy as np

    def extract_fn(passages: list[dict], batch_no: int) -> list[dict]:
        return [{"gray_ppl": float(np.random.default_rng([seed, zlib.crc32(str(p["id"]).encode())]).normal())}
                for p in passages]

    return extract_fn


@pytest.fixture
def constructed(monkeypatch, mini_testbed):
    import trainspotter.flows.audit as audit_flow

    monkeypatch.setattr(audit_flow, "_extract_fn", lambda config, remote: no_evidence_features())
    return mini_testbed


# ------------------------------------------------------------------ --help at 80 columns


def _verbs():
    import typer.main

    def walk(cmd, path=()):
        for name, sub in cmd.commands.items():
            yield path + (name,)
            if hasattr(sub, "commands"):
                yield from walk(sub, path + (name,))

    return [()] + list(walk(typer.main.get_command(app)))


@pytest.mark.parametrize("path", _verbs(), ids=lambda p: " ".join(p) or "trainspotter")
def test_help_at_80_columns_cuts_no_word(path):
    """At 80 columns rich's option panel gave the help 18 columns and cut option names and
    words with … (`--assume-exchang…`, `target-vs-refer…`, `$MLFLOW_TRACKING_UR…`)."""
    out = invoke(*path, "--help")
    assert out.exit_code == 0, out.output
    assert "…" not in out.output, [line for line in lines(out.output) if "…" in line]
    assert max(map(len, lines(out.output))) <= 80
    text = " ".join(out.output.split())
    if path == ("audit",):
        assert "--assume-exchangeable" in text and "$MLFLOW_TRACKING_URI," in text
        assert "target-vs- reference" in text or "target-vs-reference" in text  # a hyphen may end a line


# ------------------------------------------------------------------ tables and the demo


def _result(label: str, verdict: str, e: float, guard=None) -> dict:
    blind = {"e_value": 25.0 if guard == "blind" else 1.3, "fired": guard == "blind"}
    return {"set": label, "name": "demo", "verdict": verdict, "guard": guard, "alpha": 0.05, "e_value": e,
            "p_value": min(1.0, 1 / e), "pairs_used": 11, "pairs_available": 40, "baseline_p_value": 0.0123,
            "blind": blind, "explanation": f"EXPLANATION OF {label.upper()}", "baseline_disagrees": False,
            "baseline_note": "", "run_id": f"run-{label}", "experiment": "demo/tiny", "plot": f"{label}.png"}


@pytest.fixture
def demo_results(monkeypatch):
    """`demo` with its flow replaced by two constructed results: members rejected at e = 20.019
    (just above 1/α = 20), the negative control inconclusive."""
    import trainspotter.flows.demo as demo
    import trainspotter.tasks.server as server

    results = [_result("members", "trained on", 20.019),
               _result("negative-control", "inconclusive", 3.2, guard="blind")]
    monkeypatch.setattr(demo, "demo_flow", lambda **kw: results)
    monkeypatch.setattr(server, "use_local_api", lambda: None)
    return results


def test_demo_at_80_columns_breaks_no_word_and_names_each_set_first(demo_results):
    out = invoke("demo")
    assert out.exit_code == 0, out.output
    assert max(map(len, lines(out.output))) <= 80
    words = {w for line in lines(out.output) for w in re.findall(r"[\w-]+", line)}
    # rich broke cells mid-word: "inconclus|ive", "negative|-control"
    assert {"inconclusive", "negative-control", "trained", "members"} <= words, out.output
    assert not {"inconclus", "ive", "negative", "-control"} & words
    # e = 20.019 beside "trained on" is not "20" (which reads as just 1/α)
    assert "20.02" in out.output and not re.search(r"\b20\b(?!\.)", out.output.split("MLflow run")[0])
    # each set's explanation follows its own name, never the previous set's
    for r in demo_results:
        name_at = out.output.index(f"{r['set']}: MLflow run")
        if r["verdict"] != "trained on":
            assert out.output.index(f"{r['set']}: {r['explanation']}") > name_at


def test_e_values_keep_their_side_of_the_threshold():
    from trainspotter.auditing.verdict import format_e

    assert format_e(20.019, 0.05) == "20.02" and format_e(19.996, 0.05) == "19.996"
    assert format_e(20.0, 0.05) == "20" and format_e(0.551, 0.05) == "0.551" and format_e(28.05, 0.05) == "28.1"


# ------------------------------------------------------------------ features list


def test_features_list_is_short_and_names_each_sets_columns():
    from trainspotter.features.catalog import catalog
    from trainspotter.features.extract import feature_columns
    from trainspotter.features.features import FEATURE_SETS

    out = invoke("features", "list")
    assert out.exit_code == 0, out.output
    assert len(lines(out.output)) <= 60 and max(map(len, lines(out.output))) <= 80  # was 1036 lines
    text = "".join(out.output.split())  # table cells joined again
    for name in ("lean", "calibrated"):
        row = text[text.index("│" + name + "│"):]
        for column in feature_columns(FEATURE_SETS[name], "gray", 1):
            assert column + "," in row or column + "(" in row, (name, column)
    assert "│full│" in text
    full = invoke("features", "list", "--all")
    squashed = "".join(full.output.split())
    assert full.exit_code == 0 and all(s.name in squashed for s in catalog(FEATURE_SETS["full"]))


# ------------------------------------------------------------------ explanations


def _audit(mini, *extra, json_out=True):
    args = ["audit", "--suspect", str(mini / "nonmember.jsonl"), "--heldout", str(mini / "heldout.jsonl"),
            "--model", "testbed:mini", *extra]
    out = invoke(*args, *(["--json"] if json_out else []))
    return out, (json.loads(out.stdout) if json_out and out.exit_code in (0, 3) else None)


def test_no_evidence_after_every_pair_with_a_reference_asks_for_neither(constructed):
    """All available pairs used and a reference given: the advice was "more pairs, a reference
    model ..." all the same."""
    out, r = _audit(constructed, "--reference", "testbed:mini/reference", "--name", "all-used")
    assert out.exit_code == 0, out.output[-3000:]
    assert r["verdict"] == "no evidence" and r["pairs_used"] == r["pairs_available"]
    text = r["explanation"]
    assert f"All {r['pairs_available']} available pairs were used" in text
    assert "More pairs" not in text and "more pairs" not in text
    assert "--reference" not in text and "a reference model" not in text
    assert "second reference model" in text  # what can still change it


def test_no_evidence_with_pairs_left_and_no_reference_says_both(constructed):
    out, r = _audit(constructed, "--max-pairs", "20", "--name", "pairs-left")
    assert out.exit_code == 0, out.output[-3000:]
    assert r["verdict"] == "no evidence" and r["pairs_used"] == 20  # of the files' 40
    from trainspotter.data import load_passages

    left = min(len(load_passages(constructed / f)) for f in ("nonmember.jsonl", "heldout.jsonl")) - 20
    assert left > 0 and f"{left} pairs not yet used (a larger --max-pairs" in r["explanation"]
    assert "All " not in r["explanation"]
    assert "--reference" in r["explanation"]


def test_the_audit_table_and_its_record_line_fit_80_columns(constructed, tmp_path, monkeypatch):
    """The line naming the sealed record ran to 111 columns, the plot's path was broken mid-name
    and a fresh MLflow store logged 90-column INFO lines: every line now fits, except the plot's
    path, which has a line of its own and is never broken."""
    monkeypatch.chdir(tmp_path)
    out, _ = _audit(constructed, "--max-pairs", "20", "--name", "narrow-table", "--record", "r.json",
                    json_out=False)
    assert out.exit_code == 0, out.output[-3000:]
    plot = [line for line in lines(out.output) if line.startswith("  plot: ")]
    assert len(plot) == 1 and plot[0].endswith("wealth.png") and Path(plot[0].split(": ", 1)[1]).is_file()
    assert max(len(line) for line in lines(out.output) if line not in plot) <= 80, out.output
    verify = [line for line in lines(out.output) if line.endswith("trainspotter verify r.json")]
    assert len(verify) == 1 and verify[0].startswith("  "), out.output  # the command as it runs (test_onboarding_cli)
    assert (tmp_path / "r.json").is_file()


def test_shift_check_continue_states_the_models_e_value(constructed, tmp_path):
    """Held-out passages that differ from the suspect ones (shouted, short): the blind check
    fires; with --shift-check continue the model is queried and its e-value is in the
    explanation (it was left out)."""
    from trainspotter.data import load_passages

    shouted = tmp_path / "shouted.jsonl"
    shouted.write_text("".join(json.dumps({"text": " ".join(p["text"].split()[:8]).upper() + "!!!"}) + "\n"
                               for p in load_passages(constructed / "heldout.jsonl")))
    args = ["audit", "--suspect", str(constructed / "nonmember.jsonl"), "--heldout", str(shouted),
            "--model", "testbed:mini", "--name", "shift-continue"]
    out = invoke(*args, "--shift-check", "continue", "--json")
    assert out.exit_code == 3, out.output[-3000:]
    r = json.loads(out.stdout)
    assert r["verdict"] == "inconclusive" and r["guard"] == "blind" and r["stopped_by"] != "shift"
    assert f"its e-value was {r['e_value']:.3g} after {r['pairs_used']} pairs" in r["explanation"]
    assert "same source and period" in r["explanation"] and "twins" in r["explanation"]
    stop = json.loads(invoke(*args, "--name", "shift-stop", "--json").stdout)
    assert stop["stopped_by"] == "shift" and "The model was not queried" in stop["explanation"]


def test_a_ledger_run_with_nothing_left_says_so(constructed):
    """The second run of a recurring audit over the same files has no pair left: it says so,
    and its progress bar shows the stored e-value, not 1."""
    first, r1 = _audit(constructed, "--name", "drained", "--ledger")
    assert first.exit_code == 0 and r1["pairs_used"] == r1["pairs_available"], first.output[-3000:]
    again = invoke("audit", "--suspect", str(constructed / "nonmember.jsonl"), "--heldout",
                   str(constructed / "heldout.jsonl"), "--model", "testbed:mini", "--name", "drained", "--ledger")
    assert again.exit_code == 0, again.output[-3000:]
    text = " ".join(again.stdout.split())
    assert "Nothing left to query" in text and "add new passages" in text
    bar = again.stderr
    assert "e-value 1 " not in bar and f"e-value {r1['e_value']:.3g}" in bar, bar
