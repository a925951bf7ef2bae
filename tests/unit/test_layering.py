import pkgutil
import subprocess
import sys
from pathlib import Path

import trainspotter

SRC = Path(trainspotter.__file__).parent
ORCHESTRATION = ("trainspotter.flows", "trainspotter.tasks")  # installed inside the package, not part of the library


def test_library_imports_no_orchestration():
    """Import every library module in a fresh interpreter; none may pull in
    prefect, mlflow, trainspotter.flows or trainspotter.tasks (docs/architecture.md: imports point one way)."""
    modules = [m.name for m in pkgutil.walk_packages([str(SRC)], prefix="trainspotter.")
               if not m.name.startswith(ORCHESTRATION)]
    assert "trainspotter.stats.sequential" in modules and "trainspotter.backends.hf" in modules
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            f"bad = sorted(n for n in sys.modules if n.startswith({ORCHESTRATION + ('prefect', 'mlflow')!r}))\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_orchestration_installs_inside_the_package(tmp_path):
    """The installed project adds one top-level name, trainspotter: flows/ and tasks/ are
    trainspotter.flows and trainspotter.tasks, never generic site-packages names."""
    code = ("import importlib.util as u, trainspotter.flows.cli, trainspotter.tasks.extract\n"
            "print(u.find_spec('flows'), u.find_spec('tasks'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.split() == ["None", "None"]


# The library's own layers, lowest first (docs/architecture.md, "Inside the library"): a module
# may import its own layer and the layers below, never one above. Every import counts, also one
# inside a function (a lazy import is still an arrow).
LAYERS = [
    ("foundation", {"errors", "config", "layout", "presets", "assets", "data"}),
    ("backends", {"backends"}),
    ("features", {"features"}),
    ("stats", {"stats"}),
    ("audit", {"audit", "auditor", "verdict", "placebo", "matching", "matched_ledger", "multi", "twins", "twin_rounds",
               "twins_gate", "rewrite", "rewrite_generative",
               "ledger", "record", "recompute", "verify", "requery", "report", "tables"}),
    ("evaluation", {"evaluation"}),
]


def _layer(module: str) -> int | None:
    part = module.split(".")[1] if "." in module else ""
    for i, (_, names) in enumerate(LAYERS):
        if part in names:
            return i
    return None  # the package's __init__ (the public names) and orchestration


def _arrows():
    import ast

    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__")
        if module.startswith(ORCHESTRATION):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                if name.startswith("trainspotter."):
                    yield module, name


def test_every_library_layer_imports_only_its_own_and_lower_layers():
    """backends never import features, stats, the audit or evaluation (a testbed: spec resolves
    through trainspotter.layout); features never stats or above; stats only stats and the
    foundation (it works on arrays: the caller reads each column's sign from the catalogue and
    featurises the blind check's texts); the audit modules never evaluation. Every library
    module is in a layer."""
    every = {m for m, _ in _arrows()} | {m for _, m in _arrows()}
    unplaced = sorted(m for m in every if _layer(m) is None and m != "trainspotter" and not m.startswith(ORCHESTRATION))
    assert unplaced == [], "put each module in a layer of LAYERS"
    up = sorted(f"{a} -> {b}" for a, b in _arrows() if (_layer(b) or 0) > (_layer(a) or 0))
    assert up == []
    stats = [name for name, _ in LAYERS].index("stats")
    sideways = sorted(f"{a} -> {b}" for a, b in _arrows() if _layer(a) == stats and _layer(b) not in (0, stats))
    assert sideways == [], "stats may import only stats and the foundation"
