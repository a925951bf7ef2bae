"""Twins: exchangeability made, not assumed (docs/architecture.md, "Twins").

For data not yet released, every passage is rewritten k ≥ 2 times (``make``), each variant under its
own secret key by a rewriter (``trainspotter.rewriters``; ``gate``: the MiniLM similarity of the
quality gate); the owner commits to every variant and to a secret (``draw``), and once a public
random value appears that the commitment named (``trainspotter.proofs.beacon``), it draws per passage
the variant to release (``release``); the others are kept (``folder``: the folder's files). Anyone
can re-derive the draw from what was published (``draw.prove``). A twins audit pairs each public
version with its private twins (``rounds``); under H0 the two are exchangeable because the draw was
random. The rewriters and the beacon are named here too, as twins make and release use them.
"""

from trainspotter import lazy_exports

MAY_IMPORT = ("backends", "features", "rewriters", "proofs")  # besides the foundation (tests/unit/test_layering.py)
__getattr__, __all__ = lazy_exports(__name__, {
    "folder": ("Twins", "commitment", "load_twins", "prove_folder", "read_release", "read_sides", "verify_commitment",
               "write_twins"),
    "draw": ("DrawProof", "prove"),
    "release": ("release_twins",),
    "make": ("GATES", "edit_rate", "make_twins"),
    "gate": ("minilm_similarity",),
    "trainspotter.rewriters.base": ("EmptyRewrite", "Rewriter"),
    "trainspotter.rewriters.lexical": ("KeyedLexicalRewriter",),
    "trainspotter.rewriters.generative": ("HFRewriter", "OpenAIRewriter", "TableRewriter", "make_rewriter"),
    "trainspotter.proofs.beacon": ("Beacon", "TEST_BEACON", "derive", "parse_beacon"),
})
