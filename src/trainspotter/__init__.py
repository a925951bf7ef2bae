"""trainspotter: was this dataset used to train that language model?

Anytime-valid dataset inference (BADI, ../shared/papers) with e-values, from local weights or from
an API that returns only tokens. This package is the library: every formula lives here; it never
imports prefect, mlflow, ``flows`` or ``tasks``.

    from trainspotter import audit, AuditConfig, AuditResult
    from trainspotter import audit_sets, AuditSetsConfig    # several suspect sets, e-BH

The package by concept (docs/architecture.md, "Inside the library"), lowest first: the foundation
at the root (``errors``, ``config``, ``data``, ``presets``, ``assets``, ``layout``); ``backends``
(models), ``features`` (membership features), ``stats`` (scoring, betting, e-processes);
``rewriters`` (passages written again under a key), ``proofs`` (the beacon: what shows nobody chose
a key or a draw), ``twins``; ``auditing`` (one audit: settings, test, guards, verdict); ``record``
(the sealed record); ``loop`` (the audit loop, ledgers, several sets); ``keyed`` (a keyed release:
made, released, audited, sealed); ``testbeds`` (models with known members); ``evaluation`` (the
benchmark a user runs: MIA methods, metrics, TDDBench, the suites). Each package's ``__init__`` says
what it owns and which of them it may import. What measures the project itself lives in the
repository's ``benchmarks/``, not here.
"""

from importlib import import_module

__version__ = "0.1.0"


def lazy_exports(package: str, public: dict[str, tuple[str, ...]]):
    """A package face's ``__getattr__`` and ``__all__`` (PEP 562): each public name of ``public``
    (module -> names; a module of the package, or one named whole, ``trainspotter.…``, that the
    face re-exports) is imported from its module on first use, so importing one module of a
    package, or the package itself, need not import the others (the audit API imports torch)."""
    where = {name: module for module, names in public.items() for name in names}

    def __getattr__(name: str):
        if name in where:
            module = where[name]
            return getattr(import_module(module if module.startswith("trainspotter.") else f"{package}.{module}"),
                           name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__, sorted(where)


__getattr__, _names = lazy_exports(__name__, {"loop.run": ("audit",), "auditing.config": ("AuditConfig",),
                                              "auditing.verdict": ("AuditResult",), "auditing.auditor": ("Auditor",),
                                              "loop.sets": ("audit_sets", "AuditSetsConfig", "AuditSetsResult")})
__all__ = ["__version__", *_names]
