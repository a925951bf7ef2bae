"""The built-in testbeds: models with known training members, built offline and cached (TDDBench
Sec. 3; EZ-MIA Sec. 4). ``recipes`` (``TestbedConfig``, ``PRESETS``: each testbed's recipe),
``build`` (the locked, cached build: splits, reference and target models), ``training`` (tokenizer,
models from scratch, fine-tuning), ``twins_variant`` and ``keyed_variant`` (a testbed whose members
are trained on their twins' public versions or on a keyed release), ``reference_models`` (a
pre-training testbed's K OUT and K IN reference models). Where built models live is
``trainspotter.layout`` (a ``testbed:`` spec resolves there without this package).
"""

from trainspotter import lazy_exports

MAY_IMPORT = ("backends", "features", "rewriters", "proofs", "twins", "keyed")  # besides the foundation (tests/unit/test_layering.py)
__getattr__, __all__ = lazy_exports(__name__, {
    "recipes": ("PRESETS", "TestbedConfig"),
    "build": ("build_testbed", "split_path"),
    "reference_models": ("build_references", "check_request"),
})
