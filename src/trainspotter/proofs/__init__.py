"""What shows that nobody chose a draw or a key (DESIGN.md: "A draw is only as good as the proof that
nobody chose it"): ``beacon``, every draw and key derived from a secret committed first and the
public random value of a beacon round that appeared after the commitment.
"""

from trainspotter import lazy_exports

MAY_IMPORT = ()  # besides the foundation (tests/unit/test_layering.py)
__getattr__, __all__ = lazy_exports(__name__, {
    "beacon": ("Beacon", "TEST_BEACON", "derive", "parse_beacon", "uniform_index"),
})
