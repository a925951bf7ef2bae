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
FOUNDATION = {"errors", "config", "data", "presets", "assets", "layout", "hub", "hub_data"}


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
    assert set(rules) == {"backends", "features", "stats", "rewriters", "proofs", "twins", "auditing", "record",
                          "loop", "keyed", "testbeds", "evaluation"}
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
    assert order.index("rewriters") < order.index("twins") < order.index("record") < order.index("keyed")
    assert order.index("proofs") < order.index("twins") and order.index("keyed") < order.index("testbeds")
    assert order.index("testbeds") < order.index("evaluation")


def _circle(arrows) -> list[str] | None:
    """A loop of imports among ``arrows`` ((importer, imported) pairs), or None."""
    graph: dict[str, set[str]] = {}
    for a, b in arrows:
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
        if start not in state and (found := visit(start, [])):
            return found
    return None


def test_no_module_circle():
    """No two library modules import each other, directly or around a loop, not even under TYPE_CHECKING."""
    assert _circle(_arrows()) is None, "a circle of imports"


def test_no_circle_among_the_commands_and_flows():
    """The CLI's verb modules, the flows and the tasks import each other one way only (issue 62: the keyed
    verbs and verify imported each other, one of them inside a function)."""
    folders = {"trainspotter.flows": SRC.parents[1] / "flows", "trainspotter.tasks": SRC.parents[1] / "tasks"}
    modules = {".".join([package, *p.relative_to(folder).with_suffix("").parts]).removesuffix(".__init__"): p
               for package, folder in folders.items() for p in folder.rglob("*.py")}
    arrows = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                         for a in node.names]
                arrows += [(module, n) for n in names if n in modules]
    assert ("trainspotter.flows.cli.keyed", "trainspotter.flows.cli.verify") in arrows  # the rule reads them
    assert _circle(arrows) is None


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



# Names a module may bear in several packages because they mean the same in each (issue 62); any
# other name that repeats means two things and is refused.
SAME_MEANING = {"config": "a package's settings", "errors": "its exceptions",
                "base": "the protocol every member of the package implements",
                "run": "one run of an audit: ledger, verdict, sealed record",
                "release": "the release step: the public files written from the commitment and the beacon round"}


def test_no_module_name_means_two_things_in_two_packages():
    """A module name repeats across library packages only where it means the same in each."""
    where: dict[str, list[str]] = {}
    for module, path in _modules().items():
        if path.name != "__init__.py":
            where.setdefault(module.rsplit(".", 1)[1], []).append(module)
    repeated = {name: sorted(ms) for name, ms in where.items() if len(ms) > 1}
    assert {"config", "release"} <= set(repeated)  # the rule reads what it should
    assert sorted(set(repeated) - set(SAME_MEANING)) == []


def _names_in(path: Path, package: str, known: set[str]) -> set[str]:
    """The library modules the file at ``path`` (of ``package``) reaches: by an import, or by a string
    that names one whole or within ``package`` (a package face's table of lazy exports, the backend
    schemes' "module:function" loaders)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.split(":")[0]
            out |= {text, f"{package}.{text}"}
    return out & known


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def test_every_library_module_is_reached_from_the_product():
    """No library module is there only for benchmarks/ or the tests (issue 62): each is reached from
    the CLI, a flow, a task or a package's ``__init__``, directly or through other library modules."""
    modules = _modules()
    known = set(modules)
    reached, todo = set(), [m for m, p in modules.items() if p.name == "__init__.py"]
    for folder, package in ((SRC.parents[1] / "flows", "trainspotter.flows"), (SRC.parents[1] / "tasks", "trainspotter.tasks")):
        for path in folder.rglob("*.py"):
            todo += sorted(_names_in(path, package, known))
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += sorted(_names_in(modules[module], _package_of(module, modules[module]), known))
    assert {"trainspotter.keyed.sealed", "trainspotter.testbeds.training", "trainspotter.evaluation.mia"} <= reached
    assert sorted(known - reached) == []


def test_the_reach_rule_reads_imports_and_loader_strings(tmp_path):
    """What the rule above follows, on a file made here: an import inside a function and a
    "module:function" string reach their modules; a module named nowhere is not reached."""
    lonely = tmp_path / "lonely.py"
    lonely.write_text("def f():\n    from trainspotter.stats.eprocess import EProcess\n"
                      "LOAD = 'trainspotter.backends.hf:from_spec'\n")
    known = set(_modules())
    assert _names_in(lonely, "trainspotter.stats", known) == {"trainspotter.stats.eprocess", "trainspotter.backends.hf"}


def test_no_package_face_exports_the_name_of_one_of_its_modules():
    """A public name that is also a module of the package would be the one or the other depending on
    what was imported first (``trainspotter.keyed.release``: the module, never a function)."""
    import importlib

    clashes = {}
    for module, path in _modules().items():
        if path.name == "__init__.py":
            face = importlib.import_module(module)
            subs = {p.stem for p in path.parent.glob("*.py")} | {p.parent.name for p in path.parent.glob("*/__init__.py")}
            clashes |= {module: sorted(subs & set(getattr(face, "__all__", [])))}
    assert {m: c for m, c in clashes.items() if c} == {}
