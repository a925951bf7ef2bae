"""Where a long flow tells the command that runs it how far it got: ``step(label, done, total)``
goes to the callback the caller set with ``reporting`` (the CLI's progress lines on stderr), and
nowhere when none is set (a library call, a deployment). A flow or task names ``step``, never the
ContextVar itself: a flow sent to Dask is pickled by value, and a ContextVar cannot be."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Reporter = Callable[[str, int, "int | None", str], None]  # (label, done, total or None, note)
_REPORTER: ContextVar[Reporter | None] = ContextVar("progress_reporter", default=None)


def step(label: str, done: int, total: int | None = None, note: str = "") -> None:
    """``done`` of ``total`` (None: not known) items of the stage ``label`` are done; ``note``:
    what else the line shows (an audit's e-value so far)."""
    reporter = _REPORTER.get()
    if reporter is not None:
        reporter(label, done, total, note)


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Send every ``step`` in this context (this thread, and the flows and tasks it runs inline)
    to ``reporter``."""
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)
