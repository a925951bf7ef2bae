"""The `trainspotter` command: the outermost layer; it parses options, runs flows and calls the
library. One module per verb group: ``audit`` (audit, demo, ledger), ``verify``, ``report``,
``keyed``, ``twins``, ``benchmark``, ``testbed`` (and assets), ``features`` (and extract), ``stats``
(test, simulate), ``api`` (serve, cache); ``common`` holds the options every verb shares, and
``command`` the app that registers them all and ``main``. ``app`` and ``main`` are loaded on first
use, so a module of the package can be imported alone."""


def __getattr__(name: str):
    if name in ("app", "main"):
        from trainspotter.flows.cli import command

        return getattr(command, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
