"""Thin Prefect task wrappers over library calls (cache policy, retries, persistence).

Importing this package points Prefect's home, result storage and telemetry at the
artifacts root before prefect itself is imported; explicit environment variables win.
"""

import os

from trainspotter.config import artifacts_root


def configure_environment() -> None:
    root = artifacts_root()
    defaults = {
        "PREFECT_HOME": str(root / "prefect"),
        "PREFECT_LOCAL_STORAGE_PATH": str(root / "prefect" / "results"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "true",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
        # a busy 2-core machine can need more than the default 20 s to start it
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    # Prefect's SQLite database cannot be created in a missing folder.
    os.makedirs(os.environ["PREFECT_HOME"], exist_ok=True)


configure_environment()
