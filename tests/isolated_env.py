"""``env_for``: the environment of a test's subprocess that keeps all its state in a folder of
its own (imported by name: tests/ is on sys.path through its conftest.py)."""

import os
from pathlib import Path


def env_for(root: Path | str, **extra: str) -> dict[str, str]:
    """The environment of a subprocess that keeps all its state under ``root``: once this
    process has imported ``trainspotter.tasks``, os.environ names the session's Prefect home
    and result storage, and explicit settings win over ``TRAINSPOTTER_ARTIFACTS``: a child
    would then reuse results cached by earlier tests."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PREFECT_HOME", "PREFECT_LOCAL_STORAGE_PATH", "PREFECT_API_URL", "MLFLOW_TRACKING_URI")}
    return env | {"TRAINSPOTTER_ARTIFACTS": str(root)} | extra

