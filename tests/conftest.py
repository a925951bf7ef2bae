"""Test session setup: every artifact (Prefect DB and results, MLflow store, testbeds)
goes to a fresh temporary folder, set before tasks/flows are imported."""

import json
import os
import signal
import tempfile
from pathlib import Path

import pytest

ARTIFACTS = Path(tempfile.mkdtemp(prefix="trainspotter-tests-"))
os.environ["TRAINSPOTTER_ARTIFACTS"] = str(ARTIFACTS)
# Under pytest-xdist (scripts/test.sh runs two workers) each worker has its own artifacts folder,
# but the testbeds are shared: the first process to need one builds it, under the testbed's
# build lock, and every other waits for it instead of training the same models again. The
# controller, which loads this file before it starts the workers, names the shared folder.
SHARED_TESTBEDS = Path(os.environ.setdefault("TRAINSPOTTER_TEST_TESTBEDS", str(ARTIFACTS / "testbeds")))
if os.environ.get("PYTEST_XDIST_WORKER"):
    SHARED_TESTBEDS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "testbeds").symlink_to(SHARED_TESTBEDS, target_is_directory=True)
for var in ("PREFECT_HOME", "PREFECT_LOCAL_STORAGE_PATH", "PREFECT_API_URL", "MLFLOW_TRACKING_URI"):
    os.environ.pop(var, None)
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# The Hugging Face hub: the session's own cache (tests make layouts in it: tests/hub_cache.py), never a download.
os.environ["HF_HOME"], os.environ["HF_HUB_OFFLINE"] = str(ARTIFACTS / "hf-home"), "1"
os.environ.pop("HF_HUB_CACHE", None)
# One thread per math library and process: scripts/test.sh runs two workers on two cores, and two
# threads each (torch's OpenMP, OpenBLAS) oversubscribe them, spinning more than computing: a MiniLM
# test ran in 31 s beside a copy of itself with two threads each, 17 s with one (2026-11-29).
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")
# Each test's own artifacts folder gets its own local Prefect API (tasks/server.py): let it go soon.
os.environ.setdefault("TRAINSPOTTER_API_IDLE_S", "60")


@pytest.fixture(scope="session", autouse=True)
def stop_local_apis(tmp_path_factory):
    """At the end of the session, stop the CLI runner (tests/cli_process.py) and the local Prefect
    APIs its commands started."""
    yield
    import cli_process

    cli_process.close()
    for root in (ARTIFACTS, tmp_path_factory.getbasetemp()):
        for record in Path(root).rglob("api.json"):
            try:
                os.kill(json.loads(record.read_text())["pid"], signal.SIGTERM)
            except (OSError, ValueError, KeyError):
                pass


@pytest.fixture(scope="session")
def artifacts() -> Path:
    return ARTIFACTS


@pytest.fixture
def briefly_trained(monkeypatch):
    """:func:`brief_training.brief_training` for one test."""
    from brief_training import brief_training

    brief_training(monkeypatch)


@pytest.fixture(scope="session")
def mini_testbed(artifacts) -> Path:
    """The seconds-scale `mini` testbed (same recipe as `tiny`), built once per session."""
    from trainspotter.testbeds.build import PRESETS, build_testbed

    return build_testbed(PRESETS["mini"])


def find_secret(root: Path, secret: str) -> list[Path]:
    """Every file under ``root`` (recursively: SQLite DBs and their -wal/-journal files, the
    MLflow store, Prefect results, reports, logs) whose bytes contain ``secret`` as UTF-8
    or UTF-16 text."""
    needles = [secret.encode(), secret.encode("utf-16-le")]
    root = Path(root)
    if not root.exists():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()
                  and any(n in p.read_bytes() for n in needles))


@pytest.fixture(scope="session")
def secret_scan():
    """``find_secret(root, secret)``: the files under root that hold the secret."""
    return find_secret

