"""Thin Prefect task wrappers over library calls (cache policy, retries, persistence).

Importing this package points Prefect's home, result storage and telemetry at the
artifacts root before prefect itself is imported; explicit environment variables win.
It also spares a process that runs flows most of the garbage collector's walks over
the objects that the imports of prefect, mlflow and the library build, which live until
it exits (``settled_imports``, ``freeze_at_exit``).
"""

import atexit
import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def settled_imports() -> Iterator[None]:
    """Import modules inside the block without the cyclic garbage collector, then move what
    they built (modules, classes, Prefect's and MLflow's registries: objects that live until
    exit) to the collector's permanent generation, so that later collections do not walk
    them again. Importing prefect and mlflow builds ~0.4 M such objects, and every full
    collection during the audit that follows walked them all: 2-4 s of a CLI audit on 2
    busy cores (benchmarks/results/cli_overhead.md). Collection resumes when the block
    ends, as it was; an exception leaves nothing frozen."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if enabled:
            gc.enable()


def freeze_at_exit() -> None:
    """At interpreter exit, after the exit handlers registered later (Prefect's and
    MLflow's run first), move every object to the collector's permanent generation. A
    process that imported prefect, mlflow, torch and transformers otherwise spends 2-3 s
    (2 busy cores) in the final collection over those objects while it tears down: a
    sixth of a short CLI audit (benchmarks/results/cli_overhead.md). That collection
    writes nothing (files, logs and stores are closed explicitly before it), and a
    notebook that imports the package is not affected until it exits."""
    atexit.register(gc.freeze)


configure_environment()
freeze_at_exit()
