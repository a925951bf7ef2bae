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
    from trainspotter.evaluation.twins_tables import render_k2, render_kmean

    report = json.loads((RESULTS / folder / "twins.json").read_text())
    render = render_k2 if report.get("k", 2) == 2 else render_kmean
    assert render(report) == (RESULTS / folder / "twins.md").read_text()
