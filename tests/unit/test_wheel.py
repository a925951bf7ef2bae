"""A wheel built from the tracked files installs without ``-e`` and runs (issue 62): every install in
the project's own scripts is editable, which would hide a package the wheel leaves out."""

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "src", "flows", "tasks")


def test_the_built_wheel_installs_in_a_fresh_venv_and_runs(tmp_path):
    """Build the wheel from a copy of what the repository tracks, install it without -e into a fresh
    virtual environment (its dependencies taken from this one's site-packages), then, outside the
    checkout, run `trainspotter --help` and import every module of the installed package."""
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(
            REPO / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__", "*.egg-info")}
                                           if (REPO / name).is_dir() else {}))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(tmp_path / "dist"), str(source)], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("trainspotter-*.whl"))
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"trainspotter", wheel.name.split("-py3")[0] + ".dist-info"}, tops  # nothing but the package

    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # the dependencies, appended after the fresh site-packages: a .pth line adds a folder without reading
    # its own .pth files, so this environment's editable finder does not come along
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, capture_output=True)

    run = tmp_path / "elsewhere"
    run.mkdir()
    helped = subprocess.run([str(venv / "bin" / "trainspotter"), "--help"], cwd=run, capture_output=True, text=True)
    assert helped.returncode == 0, helped.stderr
    assert "keyed" in helped.stdout and "benchmark" in helped.stdout
    code = ("import importlib, pkgutil, trainspotter\n"
            "names = [m.name for m in pkgutil.walk_packages(trainspotter.__path__, 'trainspotter.')\n"
            "         if not m.name.endswith('__main__')]\n"
            "for name in names: importlib.import_module(name)\n"
            "print(trainspotter.__file__, len(names))")
    done = subprocess.run([str(python), "-c", code], cwd=run, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    where, count = done.stdout.split()
    assert Path(where).is_relative_to(site)  # the installed copy, not the checkout
    packages = {p.parent for p in (REPO / "src" / "trainspotter").rglob("__init__.py")}
    assert int(count) >= len(packages) + 60  # every subpackage, flows and tasks included, and their modules
    for sub in ("flows.cli.audit", "tasks.extract", "keyed.sealed", "testbeds.build", "rewriters.lexical"):
        assert (Path(where).parent / (sub.replace(".", "/") + ".py")).is_file(), sub
