"""The audit loop: pairs queried in small batches until W_t ≥ 1/α, the budget or the data runs out,
sealed; continued later on the stored e-process (ledgers); several suspect sets under one FDR level.

``run`` (``audit``), ``inputs`` (the two sides read once and checked before any model loads),
``ledger`` (a recurring audit's stored state), ``matched_ledger`` (a matched audit continuing its
ledger), ``sets`` (``audit_sets``: several suspect sets, e-BH).
"""

from trainspotter import lazy_exports

MAY_IMPORT = ("backends", "features", "stats", "twins", "auditing", "record")  # besides the foundation (tests/unit/test_layering.py)
__getattr__, __all__ = lazy_exports(__name__, {
    "run": ("audit",),
    "inputs": ("check_inputs", "model_extract", "read_passages", "read_sides"),
    "ledger": ("history", "ledger_path", "load_ledger"),
    "sets": ("AuditSetsConfig", "AuditSetsResult", "audit_sets", "check_sets", "set_labels"),
})
