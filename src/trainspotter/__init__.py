"""trainspotter: was this dataset used to train that language model?

Anytime-valid dataset inference (BADI, ../shared/papers) with e-values, from local
weights or from an API that returns only tokens. This package is the library: every
formula lives here; it never imports prefect, mlflow, ``flows`` or ``tasks``.
"""

__version__ = "0.1.0"
