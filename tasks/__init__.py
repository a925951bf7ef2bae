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
        _server_class(SubprocessASGIServer)().start()


def _server_class(base):
    """Prefect's temporary server, sent SIGTERM when this process dies, even by kill -9
    (Linux PR_SET_PDEATHSIG, which fires when the *thread* that started it ends: the
    CLI starts it from the main thread), which otherwise leaves it running. Prefect keeps one
    instance per port in a dict shared with the subclass, so flows in this process
    find and use it."""
    import ctypes
    import functools
    import signal
    import subprocess
    import types
    from unittest import mock

    import prefect.server.api.server as module

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before the fork
    except (OSError, AttributeError):  # not Linux: nothing ties the server to us
        return base

    def die_with_parent() -> None:  # runs in the child, between fork and exec
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    class ParentBoundServer(base):
        def _run_uvicorn_command(self):
            tied = types.SimpleNamespace(**vars(subprocess))
            tied.Popen = functools.partial(subprocess.Popen, preexec_fn=die_with_parent)
            with mock.patch.object(module, "subprocess", tied):  # this module's Popen only
                return super()._run_uvicorn_command()

    return ParentBoundServer


configure_environment()
