"""benchmarks/: every script is a command over the library, never over another script (read
with ``ast``: an import inside a function or under ``if`` counts too), and each committed table
that a script renders from its committed JSON renders to the very bytes committed."""

import ast
import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
RESULTS = BENCHMARKS / "results"


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
    return names


def test_no_script_imports_another_script():
    scripts = sorted(BENCHMARKS.glob("*.py"))
    assert len(scripts) > 10
    own = {p.stem for p in scripts} | {"benchmarks"}
    wrong = {f"{p.name} imports {name}" for p in scripts for name in _imports(p)
             if name.startswith(".") or name.split(".")[0] in own}
    assert wrong == set()


def test_the_rule_reads_imports_inside_functions(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("def main():\n    if True:\n        from bench_twins import ACCESS\n")
    assert _imports(script) == {"bench_twins"}


@pytest.mark.parametrize("folder", sorted(str(p.parent.relative_to(RESULTS)) for p in RESULTS.glob("twins/**/twins.json")))
def test_committed_twins_tables_render_from_their_json(folder):
    from studies.twins_tables import render_k2, render_kmean

    report = json.loads((RESULTS / folder / "twins.json").read_text())
    render = render_k2 if report.get("k", 2) == 2 else render_kmean
    assert render(report) == (RESULTS / folder / "twins.md").read_text()


@pytest.mark.parametrize("folder", ["shift-matched", "shift-matched/greedy", "shift-matched/tiny-pretrain-2k-x2"])
def test_committed_matched_tables_render_from_their_json(folder):
    from studies.shift_matched_tables import render

    summary = json.loads((RESULTS / folder / "shift-matched.json").read_text())
    assert render(summary, 0.05) == (RESULTS / folder / "shift-matched.md").read_text()


def test_shift_md_is_the_suite_rederived_from_its_stops_plus_the_matched_section():
    """shift.md, shift.json: `shift_verdicts.py` from shift.json and shift-stops.npz, then
    `bench_shift_matched.py --shift-md` from shift-matched.json."""
    import numpy as np

    from trainspotter.evaluation.shift_suite import render_markdown
    from studies.shift_matched_tables import with_shift_section
    from studies.shift_stops import rederive

    committed = json.loads((RESULTS / "shift.json").read_text())
    summary = rederive(json.loads((RESULTS / "shift.json").read_text()), np.load(RESULTS / "shift-stops.npz"))
    assert json.dumps(summary, indent=1) == (RESULTS / "shift.json").read_text() and summary == committed
    matched = json.loads((RESULTS / "shift-matched" / "shift-matched.json").read_text())
    assert with_shift_section(render_markdown(summary, 0.05), matched) == (RESULTS / "shift.md").read_text()


def test_text_features_tables_are_in_the_joined_page():
    """text-features.md joins the runs' tables (with a preamble, their headings one level down):
    every line of each run's table is on it."""
    from studies.shift_text_features import render_text_features

    page = (RESULTS / "shift-matched" / "text-features.md").read_text()
    runs = sorted((RESULTS / "shift-matched").glob("text-features-*.json"))
    assert len(runs) == 4
    for path in runs:
        table = render_text_features(json.loads(path.read_text()), 0.05).splitlines()[3:]  # below its header
        assert [line for line in table if line and line not in page] == []


def test_exposures_table_renders_from_its_json():
    """(exposures.json was written before it recorded torch's threads: 2, as its header says.)"""
    from studies.exposures import render_exposures

    report = json.loads((RESULTS / "exposures" / "exposures.json").read_text())
    assert render_exposures(report, 2) == (RESULTS / "exposures" / "exposures.md").read_text()


def test_references_table_renders_from_its_json_but_the_hand_written_build_note():
    """references.md's line 3 (the run's minutes and the reference models' builds) was rewritten
    by hand after the run; every other line renders from references.json."""
    from studies.reference_bank import render_references

    report = json.loads((RESULTS / "tiny-pretrain" / "references.json").read_text())
    made = render_references(report, "tiny-pretrain").splitlines()
    committed = (RESULTS / "tiny-pretrain" / "references.md").read_text().splitlines()
    assert len(made) == len(committed) and [i for i, (a, b) in enumerate(zip(made, committed)) if a != b] == [2]


def test_mmd_tables_render_from_their_json_but_the_names_changed_since():
    """mmd_payoff.md's measured part renders from mmd_payoff.json; the payoffs were renamed after
    the run (its note atop: then ``mmd`` was the standardised witness and ``mmd-paper`` the paper's),
    so two lines of the committed page keep the old names."""
    from studies.mmd_payoff import MARKER, render_mmd

    committed = (RESULTS / "mmd_payoff.md").read_text().split(MARKER)[1].removeprefix("\n").splitlines()
    made = render_mmd(json.loads((RESULTS / "mmd_payoff.json").read_text())).splitlines()
    differ = [i for i, (a, b) in enumerate(zip(made, committed)) if a != b]
    assert len(made) == len(committed) and len(differ) == 2
    assert "mmd-paper mean u" in committed[differ[0]] and "mmd-std mean u" in made[differ[0]]
    assert "of the fixed payoff (`mmd`)" in committed[differ[1]] and "(`mmd-std`)" in made[differ[1]]


def test_scorer_tables_render_from_their_json():
    """scoring.md exactly; online_scorer.md but for the notes written below it by hand."""
    from studies.scorer_cost import render_online, render_scoring

    assert render_scoring(json.loads((RESULTS / "scoring.json").read_text())) + "\n" == (
        RESULTS / "scoring.md").read_text()
    made, committed = render_online(json.loads((RESULTS / "online_scorer.json").read_text())), (
        RESULTS / "online_scorer.md").read_text()
    assert committed.startswith(made) and committed[len(made):].startswith("\nNotes. ")


def test_extract_table_renders_from_its_json_but_a_rounded_load_time():
    """extract_smollm2-135m.md renders from its JSON, which holds the untimed load rounded to 0.1 s
    (6.5 there): the page says 7 s, from the unrounded value; extract.md/json are of an earlier
    script (another table) and render no more."""
    from studies.extract_cost import render_extract

    made = render_extract(json.loads((RESULTS / "extract_smollm2-135m.json").read_text()),
                          "python benchmarks/bench_extract.py --model artifacts/models/smollm2-135m "
                          "--passages-from tiny-pretrain").splitlines()
    committed = (RESULTS / "extract_smollm2-135m.md").read_text().splitlines()
    assert [(i, committed[i].replace("Loading (7 s)", "Loading (6 s)")) for i, (a, b) in enumerate(zip(made, committed))
            if a != b] == [(2, made[2])] and len(made) == len(committed)


def test_cli_and_verify_tables_render_from_their_json():
    """cli_stats.md and verify.md exactly (verify.json was written before it recorded the features
    per passage: 7, the lean set with one reference); cli_overhead.md but for the reading written
    below it by hand (--render keeps it)."""
    from studies.cli_cost import render_cli_stats, render_overhead
    from studies.verify_cost import render_verify

    assert render_cli_stats(json.loads((RESULTS / "cli_stats.json").read_text())) == (RESULTS / "cli_stats.md").read_text()
    assert render_verify(json.loads((RESULTS / "verify.json").read_text()), 7) == (RESULTS / "verify.md").read_text()
    made = render_overhead(json.loads((RESULTS / "cli_overhead.json").read_text()),
                           json.loads((RESULTS / "cli_overhead.before.json").read_text()))
    committed = (RESULTS / "cli_overhead.md").read_text()
    assert committed.startswith(made) and committed[len(made):].startswith("\n## Reading")


def test_twins_gate_table_renders_from_its_json():
    from studies.twins_gate import render_gate

    assert render_gate(json.loads((RESULTS / "twins_gate.json").read_text())) == (RESULTS / "twins_gate.md").read_text()


def test_keyed_effect_table_renders_from_its_json():
    from trainspotter.evaluation.keyed_suite_report import render_effect

    report = json.loads((RESULTS / "keyed" / "effect.json").read_text())
    assert render_effect(report) == (RESULTS / "keyed" / "effect.md").read_text()


def test_keyed_contexts_table_renders_from_its_json():
    from studies.keyed_contexts import render_contexts

    report = json.loads((RESULTS / "keyed" / "contexts.json").read_text())
    assert render_contexts(report) == (RESULTS / "keyed" / "contexts.md").read_text()
