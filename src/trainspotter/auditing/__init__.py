"""One audit: its settings, the test fed batch by batch, its guards and its verdict.

``config`` (``AuditConfig``: texts, models, test and guards), ``auditor`` (the sequential test fed one
batch of feature rows at a time, the blind check on texts, API usage), ``placebo`` (the same test on
a model that saw neither set), ``matching`` (pairs of the same text-only propensity), ``verdict``
(``AuditResult`` and the verdict the guards allow), ``explain`` (how to read it), ``tables`` (the
test and its Monte Carlo on a features table). The loop that queries models is ``trainspotter.loop``.
"""

from trainspotter import lazy_exports

MAY_IMPORT = ("backends", "features", "stats", "twins")  # besides the foundation (tests/unit/test_layering.py)
__getattr__, __all__ = lazy_exports(__name__, {
    "config": ("AuditConfig", "ExtractFn"),
    "auditor": ("Auditor", "UsageMeter", "blind_check", "blind_on"),
    "placebo": ("run_placebo",),
    "matching": ("MatchResult", "match_pairs"),
    "verdict": ("AuditResult", "Guard", "PlaceboResult", "Verdict", "decide", "format_e"),
    "explain": ("BASELINE_CAPTION", "EBH_CAPTION", "explain_baseline"),
    "tables": ("pollution", "run_test", "simulate", "simulate_many"),
})
