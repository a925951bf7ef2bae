"""Membership features: perturbations, black-box probability estimates, the feature
catalogue, the EZ score and extraction from a backend (BADI Sec. 3, App. A; EZ-MIA)."""

MAY_IMPORT = ("backends",)  # besides the foundation (tests/unit/test_layering.py)
