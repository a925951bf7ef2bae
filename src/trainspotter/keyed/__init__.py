"""A keyed release (docs/architecture.md, "Keyed releases"): every public passage written under one
secret key that derives from a committed secret and a later public random value, and its audit, in
anything a model writes or predicts, unit by unit, against the exact null probability the key's
randomness gives.

``release`` (commit the originals and a secret before the beacon round; derive the key and release;
verify the folder), ``watermark`` (green lists: the keyed scheme and transformers' CUDA lists),
``units`` (the scoring units of a model's answers, each counted once ever), ``score`` (a unit's
outcome and exact null mean under a key), ``queries`` (what the audit asks a model), ``audit`` (its
settings, the release read back, the batches, the key's rank), ``run`` (one run: ledger, verdict,
sealed record), ``sealed`` (the keyed record and its offline check).
"""

from trainspotter import lazy_exports

MAY_IMPORT = ("backends", "stats", "rewriters", "proofs", "record", "loop")  # besides the foundation (tests/unit/test_layering.py)
__getattr__, __all__ = lazy_exports(__name__, {
    "release": ("KeyedRelease", "commit_release", "load_release", "verify_release"),
    "units": ("LexicalForms", "Seen", "lexical_units", "window_units"),
    "audit": ("KeyedAuditConfig", "open_release"),
    "run": ("audit_release",),
    "sealed": ("verify_keyed",),
})
