import pkgutil
import subprocess
import sys
from pathlib import Path

import trainspotter

SRC = Path(trainspotter.__file__).parent


def test_library_imports_no_orchestration():
    """Import every library module in a fresh interpreter; none may pull in
    prefect, mlflow, flows or tasks (DESIGN.md: imports point one way)."""
    modules = [m.name for m in pkgutil.walk_packages([str(SRC)], prefix="trainspotter.")]
    assert "trainspotter.stats.sequential" in modules and "trainspotter.backends.hf" in modules
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "bad = sorted({n.split('.')[0] for n in sys.modules} & {'prefect', 'mlflow', 'flows', 'tasks'})\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
