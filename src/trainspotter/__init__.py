"""trainspotter: was this dataset used to train that language model?

Anytime-valid dataset inference (BADI, ../shared/papers) with e-values, from local weights or from
an API that returns only tokens. This package is the library: every formula lives here; it never
imports prefect, mlflow, ``flows`` or ``tasks``.

    from trainspotter import audit, AuditConfig, AuditResult
    from trainspotter import audit_sets, AuditSetsConfig    # several suspect sets, e-BH

The package by concept (docs/architecture.md, "Inside the library"), lowest first: the foundation
at the root (``errors``, ``config``, ``data``, ``presets``, ``assets``, ``layout``); ``backends``
(models), ``features`` (membership features), ``stats`` (scoring, betting, e-processes); ``twins``
(twins and keyed releases); ``auditing`` (one audit: settings, test, guards, verdict); ``record``
(the sealed record); ``loop`` (the audit loop, ledgers, several sets); ``evaluation`` (benchmarks,
testbeds). Each package's ``__init__`` says what it owns and which of them it may import.
"""

from importlib import import_module

__version__ = "0.1.0"

_PUBLIC = {"audit": "loop.run", "AuditConfig": "auditing.config", "AuditResult": "auditing.verdict",
           "Auditor": "auditing.auditor", "audit_sets": "loop.sets", "AuditSetsConfig": "loop.sets",
           "AuditSetsResult": "loop.sets"}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    """The audit API on first use: it imports torch (feature configs), which a bare
    ``import trainspotter`` should not."""
    if name in _PUBLIC:
        return getattr(import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
