"""Where built models live under the artifacts root (docs/architecture.md, "State"): a testbed's
folder and manifest, and its reference models' folder and manifest.

Kept below ``backends`` (it imports only ``config``): resolving a ``testbed:`` spec reads
these files and nothing of ``evaluation``, which builds them (``testbeds.build``,
``testbeds.reference_models``) and imports these functions from here.
"""

from __future__ import annotations

import json
from pathlib import Path

from trainspotter.config import artifacts_root

__all__ = ["testbed_dir", "load_manifest", "references_dir", "load_reference_manifest"]


def testbed_dir(name: str, root: Path | None = None) -> Path:
    return (root or artifacts_root()) / "testbeds" / name


def load_manifest(name: str, root: Path | None = None) -> dict | None:
    """A testbed's ``manifest.json`` (written last by its build), None when not built."""
    path = testbed_dir(name, root) / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def references_dir(name: str, root: Path | None = None) -> Path:
    return testbed_dir(name, root) / "refs"


def load_reference_manifest(name: str, root: Path | None = None) -> dict | None:
    """``refs/manifest.json`` with only the models built for the current build of the base
    testbed (None when the base is not built); ``models`` maps ``out-i``/``in-i`` to entries."""
    base = load_manifest(name, root)
    path = references_dir(name, root) / "manifest.json"
    if base is None or not path.exists():
        return None
    manifest = json.loads(path.read_text())
    manifest["models"] = {m: e for m, e in manifest["models"].items()
                          if e["base_fingerprint"] == base["fingerprint"]}
    return manifest
