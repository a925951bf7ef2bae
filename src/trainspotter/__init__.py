"""trainspotter: was this dataset used to train that language model?

Anytime-valid dataset inference (BADI, ../shared/papers) with e-values, from local
weights or from an API that returns only tokens. This package is the library: every
formula lives here; it never imports prefect, mlflow, ``flows`` or ``tasks``.

    from trainspotter import audit, AuditConfig, AuditResult
    from trainspotter import audit_sets, AuditSetsConfig    # several suspect sets, e-BH
"""

import importlib
import sys
import types

__version__ = "0.1.0"

_API = {"audit": "trainspotter.audit", "AuditConfig": "trainspotter.audit", "AuditResult": "trainspotter.audit",
        "Auditor": "trainspotter.audit", "audit_sets": "trainspotter.multi",
        "AuditSetsConfig": "trainspotter.multi", "AuditSetsResult": "trainspotter.multi"}
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    """The audit API on first use: it imports torch (feature configs), which a bare
    ``import trainspotter`` should not."""
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'trainspotter' has no attribute {name!r}")


class _Package(types.ModuleType):
    def __setattr__(self, name, value):
        # Importing the submodule trainspotter.audit makes Python set it as the package
        # attribute ``audit``; keep the function there, so ``trainspotter.audit(...)`` and
        # ``from trainspotter import audit`` always mean the function.
        if name == "audit" and isinstance(value, types.ModuleType):
            value = value.audit
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
