"""The statistics: online scoring, betting and the e-process, the sequential test, the
fixed-n p-value baseline and Monte Carlo simulation (BADI Sec. 4-5, App. A.4, C, D)."""

MAY_IMPORT = ()  # besides the foundation (tests/unit/test_layering.py)
