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


def start_prefect_api() -> None:
    """Start Prefect's temporary API server (when no ``PREFECT_API_URL`` is set) holding a
    file lock beside its database, so that processes started together (parallel audits on
    one artifacts folder) migrate and open the shared SQLite database one at a time: started
    together, the servers' migrations collide and a server fails to start. Flows started
    afterwards in this process use this server (Prefect keeps one per process)."""
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():
        return
    from filelock import FileLock
    from prefect.server.api.server import SubprocessASGIServer

    with FileLock(os.path.join(os.environ["PREFECT_HOME"], "server-start.lock")):
        SubprocessASGIServer().start()


configure_environment()
