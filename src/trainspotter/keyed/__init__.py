"""The audit of a keyed release (docs/architecture.md, "Keyed releases"): a release written under
one secret key is detected in anything a model writes or predicts, unit by unit, against the exact
null probability the key's randomness gives.

``units`` (the scoring units of a model's answers: windows, word types, gray-box contexts, each
counted once ever).
"""

from importlib import import_module

MAY_IMPORT = ("backends", "stats", "twins", "record", "loop")  # besides the foundation (tests/unit/test_layering.py)
_PUBLIC = {
    "units": ("LexicalForms", "Seen", "lexical_units", "window_units"),
}
_WHERE = {name: module for module, names in _PUBLIC.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:  # on first use: importing one module of the package need not import the others
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
