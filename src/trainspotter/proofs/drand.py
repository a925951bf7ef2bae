"""A beacon round checked, not taken on the user's word (DESIGN.md: "Proofs are checked, not trusted";
issue 63). A drand round is a BLS signature by the network's threshold key (League of Entropy): on
round r, σ_r = sk·H(m_r) with m_r = sha256(r as 8 bytes, big-endian) on the unchained networks
(quicknet, scheme ``bls-unchained-g1-rfc9380``: σ in G1, the key in G2) and m_r = sha256(σ_{r−1} ‖ r)
on the chained default network (``pedersen-bls-chained``: σ in G2, the key in G1). Anyone checks it
offline with the network's public key, e(σ_r, g) = e(H(m_r), pk), and its randomness is sha256(σ_r),
so a value nobody signed cannot pass for a round, nor a round's signature for another round. A round
is published at genesis + (r − 1)·period (drand's clock).

The networks whose keys the package ships are ``CHAINS``; the pairing check is ``drand-verify``'s
(Rust, BLS12-381). ``proofs.beacon.verify_round`` reads a round from its JSON with these; a round of
another network, or one that does not verify, is one ``InputError`` there.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from trainspotter.errors import InputError

__all__ = ["CHAINS", "Chain", "chain_of", "check_round", "published_at"]


class Chain(NamedTuple):
    """A drand network as its ``/info`` describes it."""

    name: str
    hash: str  # the chain hash: sha256 of its info, how drand names a network
    public_key: str  # hex: the group's public key
    period: int  # seconds between rounds
    genesis_time: int  # Unix seconds of round 1
    scheme: str
    chained: bool  # each round signs the previous round's signature too


CHAINS = {c.name: c for c in (
    Chain("quicknet", "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971",
          "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1f"
          "ec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a",
          3, 1692803367, "bls-unchained-g1-rfc9380", False),
    Chain("default", "8990e7a9aaed2ffed73dbd7092123d6f289930540d7651336225dc172e51b2ce",
          "868f005eb8e6e4ca0a47c8a77ceaa5309a47978a7c71bc5cce96366b5d7a569937c529eeda66c7293784a9402801af31",
          30, 1595431050, "pedersen-bls-chained", True),
)}


def published_at(chain: Chain, round_: int) -> float:
    """When ``chain`` published round ``round_`` (Unix seconds): genesis + (round − 1)·period."""
    return float(chain.genesis_time + (round_ - 1) * chain.period)


def chain_of(data: dict, where: str) -> Chain:
    """The shipped network a round names (``chain``: its name or chain hash), else the one its shape
    fits: a round with a ``previous_signature`` is the chained default network's, one without it
    quicknet's (the two that the drand HTTP API serves without a chain hash in the round)."""
    named = data.get("chain") or data.get("chain_hash")
    if named is not None:
        for chain in CHAINS.values():
            if named in (chain.name, chain.hash):
                return chain
        raise InputError(f"{where}: drand network {named!r} is not one whose key this trainspotter ships "
                         f"({', '.join(f'{c.name} {c.hash[:12]}…' for c in CHAINS.values())})")
    return CHAINS["default" if "previous_signature" in data else "quicknet"]


def check_round(round_: int, signature: str, chain: Chain, previous_signature: str | None = None) -> bytes:
    """The round's randomness, sha256(signature), once the signature verifies against ``chain``'s
    public key for this very round (and, chained, the previous signature); ValueError otherwise."""
    import drand_verify

    if chain.chained:
        if previous_signature is None:
            raise ValueError("a round of a chained network needs its previous_signature")
        drand_verify.verify_pedersen_bls_chained(round_, previous_signature, signature, chain.public_key)
    else:
        drand_verify.verify_bls_unchained_g1_rfc9380(round_, signature, chain.public_key)
    return hashlib.sha256(bytes.fromhex(signature)).digest()
