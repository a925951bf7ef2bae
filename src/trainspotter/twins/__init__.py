"""Twins and keyed releases: exchangeability made, not assumed (docs/architecture.md, "Twins").

For data not yet released, every passage is rewritten k ≥ 2 times (``make``), each variant under its
own secret key by a rewriter (``rewriter``: what one is; ``lexical``: keyed word choices;
``generative``: a model's watermarked paraphrases; ``gate``: the MiniLM similarity of the quality
gate); per passage one variant, drawn at random, is released and the others are kept, and the
folder commits to the draw (``folder``). A twins audit pairs each public version with its private
twins (``rounds``); under H0 the two are exchangeable because the draw was random.
"""

from trainspotter import lazy_exports

MAY_IMPORT = ("backends", "features")  # besides the foundation (tests/unit/test_layering.py)
__getattr__, __all__ = lazy_exports(__name__, {
    "folder": ("Twins", "commitment", "load_twins", "read_sides", "verify_commitment", "write_twins"),
    "make": ("GATES", "edit_rate", "make_twins"),
    "rewriter": ("EmptyRewrite", "Rewriter"),
    "lexical": ("KeyedLexicalRewriter",),
    "generative": ("HFRewriter", "OpenAIRewriter", "TableRewriter", "make_rewriter"),
    "gate": ("minilm_similarity",),
})
