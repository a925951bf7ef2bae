"""The audit loop: pairs queried in small batches until W_t ≥ 1/α, the budget or the data runs out,
sealed; continued later on the stored e-process (ledgers); several suspect sets under one FDR level.

``run`` (``audit``), ``inputs`` (the two sides read once and checked before any model loads),
``ledger`` (a recurring audit's stored state), ``matched_ledger`` (a matched audit continuing its
ledger), ``sets`` (``audit_sets``: several suspect sets, e-BH).
"""

from importlib import import_module

MAY_IMPORT = ("backends", "features", "stats", "twins", "auditing", "record")  # besides the foundation (tests/unit/test_layering.py)
_PUBLIC = {
    "run": ("audit",),
    "inputs": ("check_inputs", "model_extract", "read_passages", "read_sides"),
    "ledger": ("history", "ledger_path", "load_ledger"),
    "sets": ("AuditSetsConfig", "AuditSetsResult", "audit_sets", "check_sets", "set_labels"),
}
_WHERE = {name: module for module, names in _PUBLIC.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:  # on first use: importing one module of the package need not import the others
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
