"""Rewriters: a passage written again under a secret key, the same key giving the same choices
everywhere (docs/architecture.md, "Twins" and "Keyed releases"). ``base`` (``Rewriter``: what every
rewriter is; ``mac``, the keyed hash), ``lexical`` (keyed word and phrase choices from WordNet),
``generative`` (a local model's or an API's paraphrases, keyed per variant, or a table of
paraphrases made elsewhere). Twins rewrite each passage k times; a keyed release once, under one key.
"""

from trainspotter import lazy_exports

MAY_IMPORT = ("backends", "features")  # besides the foundation (tests/unit/test_layering.py)
__getattr__, __all__ = lazy_exports(__name__, {
    "base": ("EmptyRewrite", "Rewriter", "mac"),
    "lexical": ("KeyedLexicalRewriter",),
    "generative": ("HFRewriter", "OpenAIRewriter", "TableRewriter", "make_rewriter"),
})
