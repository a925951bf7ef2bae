"""Cache keys follow the code that computes the cached value: an edited feature formula
changes the extract key, an edit elsewhere does not (and likewise for simulate/p-value).

The digest's source reader is pointed at an editable copy of the library, so the edits
below are real edits of real module text, never asserted constants."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import shutil
from pathlib import Path

import pytest

import trainspotter
from trainspotter import config as C
from trainspotter.features import features as F
from trainspotter.features.features import FeatureConfig
from trainspotter.stats import eprocess, pvalue
from trainspotter.stats.sequential import TestConfig
from trainspotter.tasks.benchmark import pvalue_cache_key
from trainspotter.tasks.extract import chunk_cache_key
from trainspotter.tasks.simulate import simulate_cache_key

SRC = Path(trainspotter.__file__).parent


@pytest.fixture
def library(tmp_path, monkeypatch):
    """A copy of the library source that the digest reads instead of the installed one."""
    root = tmp_path / "copy"
    shutil.copytree(SRC, root, ignore=shutil.ignore_patterns("__pycache__"))

    def read(module: str) -> str:
        path = root.joinpath(*module.split(".")[1:])
        return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()

    C._module_digest.cache_clear()
    real = _keys(tmp_path)
    monkeypatch.setattr(C, "_read_source", read)
    C._module_digest.cache_clear()
    assert _keys(tmp_path) == real  # the copy reads exactly like the library
    yield root
    C._module_digest.cache_clear()


def _edit(root: Path, obj) -> None:
    """Change the formula of function ``obj`` in the copy: its first return doubles."""
    path = root / Path(inspect.getsourcefile(obj)).relative_to(SRC)
    src = inspect.getsource(obj)
    text = path.read_text()
    assert src in text
    path.write_text(text.replace(src, src.replace("return ", "return 2 * ", 1)))
    C._module_digest.cache_clear()  # a new process would read the edited file


def _model(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    if not d.exists():
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"weights" * 100)
    return d


def _extract_key(tmp_path: Path, model: str | None = None) -> str:
    return chunk_cache_key(None, {"model": model or f"hf:{_model(tmp_path)}", "reference": None,
                                  "access": "gray", "features": FeatureConfig(),
                                  "passages": [{"id": "a", "text": "some text"}]})


def _table(tmp_path: Path) -> str:
    path = tmp_path / "features.parquet"
    path.write_bytes(b"not read as a table, only hashed")
    return str(path)


def _keys(tmp_path: Path) -> dict[str, str]:
    table = _table(tmp_path)
    return {"extract": _extract_key(tmp_path),
            "simulate": simulate_cache_key(None, {"features": table, "configs": [TestConfig()], "trials": 10,
                                                  "n_max": None, "null": False, "seed": 0, "alphas": ()}),
            "pvalue": pvalue_cache_key(None, {"features": table, "trials": 10, "n_max": None,
                                              "alphas": [0.05], "seed": 0})}


def _changed(before: dict, after: dict) -> set[str]:
    return {k for k in before if before[k] != after[k]}


def test_feature_formula_edit_changes_only_the_extract_key(library, tmp_path):
    before = _keys(tmp_path)
    _edit(library, F.min_k)
    assert _changed(before, _keys(tmp_path)) == {"extract"}


def test_betting_edit_changes_simulate_key_not_extract(library, tmp_path):
    before = _keys(tmp_path)
    _edit(library, eprocess.wealth_path)
    assert _changed(before, _keys(tmp_path)) == {"simulate"}


def test_pvalue_edit_changes_only_the_pvalue_key(library, tmp_path):
    before = _keys(tmp_path)
    _edit(library, pvalue.di_pvalue)
    assert _changed(before, _keys(tmp_path)) == {"pvalue"}


def _library_imports(module: str, seen: set[str]) -> set[str]:
    """``module`` and every trainspotter module it imports, directly or not (any scope)."""
    if module not in seen:
        seen.add(module)
        tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
        for node in ast.walk(tree):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                if name and name.startswith("trainspotter."):
                    _library_imports(name, seen)
    return seen


def test_simulate_key_covers_every_module_the_monte_carlo_runs():
    """A module split in two must list both halves: every library module that the task's
    simulation on a table (``tables``: the table split, the catalogue's signs, the Monte Carlo)
    or the table reader imports is in SIMULATE_CODE, but error messages and presets (the test
    configuration is in the key itself)."""
    from trainspotter.tasks.simulate import SIMULATE_CODE, simulate_many

    assert simulate_many.__module__ == "trainspotter.auditing.tables"
    used = _library_imports("trainspotter.auditing.tables", _library_imports("trainspotter.data", set()))
    assert used - set(SIMULATE_CODE) == {"trainspotter.errors", "trainspotter.presets"}


def test_edit_outside_every_list_changes_no_key(library, tmp_path):
    from trainspotter.evaluation import plots as report

    before = _keys(tmp_path)
    _edit(library, report.power_plot)
    assert _changed(before, _keys(tmp_path)) == set()


def test_dtype_is_in_the_extract_key_device_and_batch_size_are_not(tmp_path):
    plain = _extract_key(tmp_path)
    model = _model(tmp_path)
    assert _extract_key(tmp_path, f"hf:{model}?device=cpu&batch_size=3") == plain
    assert _extract_key(tmp_path, f"hf:{model}?dtype=float32") == plain
    assert _extract_key(tmp_path, f"hf:{model}?dtype=bfloat16") != plain
    assert _extract_key(tmp_path, f"hf:{model}?dtype=float16") != _extract_key(tmp_path, f"hf:{model}?dtype=bfloat16")


def test_rows_with_the_models_answers_have_their_own_extract_key(tmp_path):
    """An audit's chunks carry the answers (for its sealed record), the extract verb's do not:
    a chunk cached without them must not be served where they are needed."""
    params = {"model": f"hf:{_model(tmp_path)}", "reference": None, "access": "gray", "features": FeatureConfig(),
              "passages": [{"id": "a", "text": "some text"}]}
    assert chunk_cache_key(None, params) == chunk_cache_key(None, params | {"answers": False})
    assert chunk_cache_key(None, params | {"answers": True}) != chunk_cache_key(None, params)


def test_code_digest_reads_module_files_once_per_process(tmp_path, monkeypatch):
    pkg = tmp_path / "digest_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f(x):\n    return x + 1\n")
    (pkg / "b.py").write_text("def g(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = C.code_digest("digest_pkg.a")
    assert C.code_digest("digest_pkg.a", "digest_pkg.a") == first != C.code_digest("digest_pkg.a", "digest_pkg.b")
    (pkg / "b.py").write_text("def g(x):\n    return 2 * x\n")
    (pkg / "a.py").write_text("def f(x):\n    return x + 2\n")
    assert C.code_digest("digest_pkg.a") == first  # read once per process
    C._module_digest.cache_clear()
    assert C.code_digest("digest_pkg.a") != first  # the edit is seen by a new process
    with pytest.raises(ValueError, match="no Python source"):
        C.code_digest("digest_pkg.missing")


# Library modules a feature row imports that do not shape its values: error types, the
# artifacts root and fingerprints, packaged asset paths, file layout, the API's budget, answer
# cache (content-addressed) and error types, and bare package __init__ files.
NOT_FEATURE_CODE = {"trainspotter.errors", "trainspotter.config", "trainspotter.assets", "trainspotter.layout",
                    "trainspotter.features", "trainspotter.backends.budget", "trainspotter.backends.cache",
                    "trainspotter.backends.api.errors",
                    # which passages and which snapshot: their texts and the model's commit are in the key itself
                    "trainspotter.data", "trainspotter.hub", "trainspotter.hub_data"}


def test_extract_key_covers_every_module_a_feature_row_imports():
    """EXTRACT_CODE (feature modules + each scheme's code) lists every library module that the
    extraction or any scheme's backend imports, but those in NOT_FEATURE_CODE."""
    from trainspotter.backends import SCHEMES
    from trainspotter.tasks.extract import EXTRACT_CODE

    used: set[str] = set()
    for root in ("trainspotter.features.extract", *(s.backend.partition(":")[0] for s in SCHEMES.values())):
        _library_imports(root, used)
    assert used - set(EXTRACT_CODE) <= NOT_FEATURE_CODE, sorted(used - set(EXTRACT_CODE) - NOT_FEATURE_CODE)
    assert "trainspotter.features.orientation" in EXTRACT_CODE and "trainspotter.backends.api.config" in EXTRACT_CODE


def test_pvalue_key_covers_the_pvalue_modules():
    from trainspotter.tasks.benchmark import PVALUE_CODE

    assert _library_imports("trainspotter.stats.pvalue", set()) <= set(PVALUE_CODE)
