"""``--refresh`` for every cached task: recompute instead of reusing stored results.

The flag sets Prefect's ``tasks.refresh_cache`` setting for everything run inside
``refreshing(True)``: each cached task then runs again and overwrites its stored result
under the same key. Prefect carries the setting into worker threads and onto Dask
workers with the rest of its context, so a CLI verb only wraps its flow call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prefect.settings import PREFECT_TASKS_REFRESH_CACHE, temporary_settings


@contextmanager
def refreshing(enabled: bool = True) -> Iterator[None]:
    """Within the block, cached tasks recompute and overwrite their results (if enabled)."""
    if not enabled:
        yield
        return
    with temporary_settings(updates={PREFECT_TASKS_REFRESH_CACHE: True}):
        yield
