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
