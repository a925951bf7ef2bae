"""Evaluation with known ground truth: per-sample MIA methods, metrics, benchmarks and
the built-in testbeds (TDDBench Sec. 3; EZ-MIA Sec. 4), and what each script of
``benchmarks/`` measures (benchmarks/README.md maps them to the claims they back)."""

MAY_IMPORT = ("backends", "features", "stats", "twins", "auditing", "record", "loop", "keyed")  # besides the foundation (tests/unit/test_layering.py)
