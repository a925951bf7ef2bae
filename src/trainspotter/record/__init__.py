"""The sealed record: an audit's verdict bound by sha256 to its inputs, models, code and every
pair's evidence, checked offline by anyone (docs/guide/check.md).

``format`` (what a record holds, its digests and chain), ``seal`` (sealing one run's result),
``keys`` (Ed25519 signatures), ``verify`` (every check, the audit replayed from the record; ``checks``
what it reports),
``recompute`` (features computed again from the recorded answers), ``requery`` (a few passages
asked of the model again), ``report`` (an audit's page and plots).
"""

from trainspotter import lazy_exports

MAY_IMPORT = ("backends", "features", "stats", "twins", "auditing")  # besides the foundation (tests/unit/test_layering.py)
__getattr__, __all__ = lazy_exports(__name__, {
    "format": ("FORMAT", "VERSION", "canonical", "file_sha256", "model_identity", "record_digest", "sha256", "text_sha256"),
    "seal": ("prior_of",),
    "keys": ("load_private_key", "load_public_key", "public_hex", "sign"),
    "checks": ("Check", "Verification"),
    "verify": ("load_record", "verify_one", "verify_records"),
    "recompute": ("check_recomputed",),
    "report": ("html_report", "sets_html", "sets_wealth_plot", "wealth_plot"),
})
