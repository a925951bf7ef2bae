import ast
import pkgutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import trainspotter

SRC = Path(trainspotter.__file__).parent
ORCHESTRATION = ("trainspotter.flows", "trainspotter.tasks")  # installed inside the package, not part of the library
# The root holds only the foundation (docs/architecture.md, "Inside the library"); every other concept is a package.
FOUNDATION = {"errors", "config", "data", "presets", "assets", "layout"}


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


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__")


@cache
def _modules() -> dict[str, Path]:
    out = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}
    return {m: p for m, p in out.items() if not m.startswith(ORCHESTRATION)}


@cache
def _arrows() -> tuple[tuple[str, str], ...]:
    """(importer, imported) for every import of a library module by a library module: at the top, inside a
    function and under TYPE_CHECKING alike (each is an arrow). ``from trainspotter.pkg import mod`` points at
    the module ``mod``."""
    known, out = _modules(), []
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                         for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            out += [(module, name) for name in names if name.startswith("trainspotter.") or name == "trainspotter"]
    return tuple(sorted(set(out)))


def _package(module: str) -> str:
    """The concept a module belongs to: its package under trainspotter, or "foundation" for the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] not in FOUNDATION) else "foundation"


@cache
def _rules() -> dict[str, tuple[str, ...]]:
    """Each package's ``MAY_IMPORT`` as its ``__init__`` states it (read, not imported)."""
    rules = {}
    for init in sorted(SRC.glob("*/__init__.py")):
        if _module_name(init).startswith(ORCHESTRATION):
            continue
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), f"{init}: say what the package owns"
        stated = [n.value for n in tree.body if isinstance(n, ast.Assign)
                  and any(getattr(t, "id", None) == "MAY_IMPORT" for t in n.targets)]
        assert stated, f"{init}: state MAY_IMPORT, the packages it may import besides the foundation"
        rules[init.parent.name] = tuple(ast.literal_eval(stated[0]))
    return rules


def test_the_root_holds_only_the_foundation():
    """Every module at the package root is part of the foundation; every other concept is a package."""
    root = {p.stem for p in SRC.glob("*.py")} - {"__init__"}
    assert root == FOUNDATION


def test_every_package_imports_only_what_its_init_allows():
    """An arrow leaves a package only for the foundation or a package its ``__init__`` names in
    ``MAY_IMPORT`` (a lazy import and a type-only one count too); the foundation imports only itself."""
    rules = _rules()
    assert set(rules) == {"backends", "features", "stats", "twins", "auditing", "record", "loop", "keyed",
                          "evaluation"}
    for package, allowed in rules.items():
        assert set(allowed) <= set(rules), f"{package}: MAY_IMPORT names an unknown package"
    wrong = sorted(f"{a} -> {b}" for a, b in _arrows() if _package(a) != _package(b) and _package(b) != "foundation"
                   and (_package(a) == "foundation" or _package(b) not in rules[_package(a)]))
    assert wrong == []


def test_the_packages_are_layered():
    """The rules themselves form layers: no package may import one that may import it (directly or
    through others), so no circle can form between packages."""
    rules = _rules()
    order = []
    while len(order) < len(rules):
        ready = sorted(p for p in rules if p not in order and set(rules[p]) <= set(order))
        assert ready, f"a circle among {sorted(set(rules) - set(order))}"
        order += ready
    assert order.index("stats") < order.index("auditing") < order.index("record") < order.index("loop")
    assert order.index("twins") < order.index("record") < order.index("keyed") < order.index("evaluation")


def test_no_module_circle():
    """No two library modules import each other, directly or around a loop, not even under TYPE_CHECKING."""
    graph: dict[str, set[str]] = {}
    for a, b in _arrows():
        if a != b:
            graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path + [node, nxt]
            if nxt not in state and (found := visit(nxt, path + [node])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            assert visit(start, []) is None, "a circle of imports"


def test_library_modules_and_functions_stay_small():
    """A module one reads in a sitting, a function one holds in mind (issue 51): at most 400
    lines per library module and 80 per function (the library only: flows/ and tasks/, which
    wire options, live outside it)."""
    long_modules, long_functions = [], []
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 400:
            long_modules.append(f"{path.relative_to(SRC)}: {text.count(chr(10))} lines")
        long_functions += [f"{path.relative_to(SRC)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
                           for node in ast.walk(ast.parse(text))
                           if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                           and node.end_lineno - node.lineno + 1 > 80]
    assert not long_modules and not long_functions, long_modules + long_functions
