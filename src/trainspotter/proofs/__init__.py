"""What shows that nobody chose a draw or a key (DESIGN.md: "A draw is only as good as the proof that
nobody chose it"; "Proofs are checked, not trusted"): ``beacon``, every draw and key derived from a
secret committed first and the public random value of a beacon round that appeared after the
commitment; ``drand``, a drand round's signature checked against the network's public key, shipped
here, so the value is the network's and not the user's word; ``timestamp``, an RFC 3161 token of the
commitment, checked against the authority's certificates, which with a verified round proves the
order: the commitment existed before the round's value did.
"""

from trainspotter import lazy_exports

MAY_IMPORT = ()  # besides the foundation (tests/unit/test_layering.py)
__getattr__, __all__ = lazy_exports(__name__, {
    "beacon": ("Beacon", "TEST_BEACON", "derive", "parse_beacon", "uniform_index", "verify_round"),
    "drand": ("CHAINS",),
    "timestamp": ("Stamp", "check", "order", "request"),
})
