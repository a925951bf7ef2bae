"""Commit, then the beacon, then the draw: a twins draw nobody chose (DESIGN.md: "A draw is only as
good as the proof that nobody chose it"; ``proofs.beacon``: the derivation).

A commitment to the draw itself (sha256(salt ‖ draw), twins folders of version 1) shows the draw
was fixed before the release, not that it was random: the owner can score every variant on the
target, which already exists, and publish the ones it favours. Measured through the CLI on the
`mini` testbed, such a folder made `audit --twins` say "trained on" about a model that saw none
of the passages, and choosing by the target's preference over the reference's beat the placebo
check too (``benchmarks/bench_framing.py``). So the owner commits first, to every variant and to
a secret, and only a public random value that appears afterwards decides which variant is public:

1. ``twins make`` (``commit``): each variant j of passage i gets a random 256-bit salt s_ij and
   h_ij = sha256("trainspotter-variant" ‖ 0 ‖ s_ij ‖ text_ij); the commitment is the sha256 of
   the canonical JSON of {k, the beacon round the draw will use, sha256 of the secret
   (``beacon.secret_digest``), the rewriter, every [id, [h_i0 … h_i(k-1)]]}. Its digest is
   published before that round exists. A salt hides its variant: without it no text can be
   tested against h_ij, so publishing every h_ij reveals no private version.
2. ``twins release --beacon`` (``beacon_draw``): once the round exists, the public variant of
   passage i is ``uniform_index(derive(secret, beacon, "twins/draw/" + i), k)``. The manifest
   then records the beacon, reveals the secret and the public versions' salts; the private
   versions keep theirs (in private.jsonl, with their texts). The variants' keys are drawn
   independently of the secret, so revealing it reveals which variant is public, nothing else.
3. ``prove``: from public.jsonl and manifest.json alone (and private.jsonl where present) the
   commitment re-opens, the draw re-derives and every text is the committed variant. What no
   file can show is time: the proof holds if the commitment was public before the round it
   names (``DrawProof.rests_on``); pinning the digest one saw published (``pinned``) rules out a
   folder rewritten afterwards, e.g. with a new secret tried against an already public round.

A draw the tool cannot show random (version 1 folders; a testbed's, drawn from its seed,
``seeded_draw``) is "unproven"; one that does not re-derive, "failed".
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Literal

from pydantic import BaseModel

from trainspotter.proofs.beacon import SECRET_BYTES, Beacon, derive, secret_digest, uniform_index

__all__ = ["DrawProof", "VERSION", "beacon_draw", "commit", "commitment_digest", "drawn_index", "prove",
           "seeded_draw", "variant_hash"]

VERSION = 2  # the folder format whose draw derives from a beacon (1: sha256(salt ‖ draw))
SCHEME = ("sha256 of this object's canonical JSON without its digest; a variant's hash: sha256('trainspotter-variant' "
          "‖ 0 ‖ its 32-byte salt ‖ its UTF-8 text)")
RULE = ("public variant of passage ID = uniform_index(HMAC-SHA256(secret, 'trainspotter' ‖ 0 ‖ 'twins/draw/' ‖ ID ‖ 0 "
        "‖ round (8 bytes) ‖ randomness), k) (trainspotter.proofs.beacon)")
Status = Literal["shown", "unproven", "failed"]


def variant_hash(salt: bytes, text: str) -> str:
    """h = sha256("trainspotter-variant" ‖ 0 ‖ salt ‖ text): binds a variant, hides it without its salt."""
    return hashlib.sha256(b"trainspotter-variant\0" + salt + text.encode("utf-8")).hexdigest()


def commitment_digest(section: dict) -> str:
    """The digest of a manifest's commitment section: sha256 of its canonical JSON, digest left out."""
    body = {k: v for k, v in section.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                          .encode("utf-8")).hexdigest()


def commit(twins, rewriter: dict, beacon_round: int | None) -> dict:
    """Draw the secret and a salt per variant into ``twins`` and return the commitment section of
    its manifest (module docstring, step 1), binding the beacon round the draw will use (None: a
    seeded draw, ``seeded_draw``)."""
    twins.secret = secrets.token_bytes(SECRET_BYTES)
    twins.salts = {i: {j: secrets.token_bytes(SECRET_BYTES) for j in range(twins.k)} for i in twins.ids}
    section = {"scheme": SCHEME, "version": VERSION, "k": twins.k, "round": beacon_round,
               "secret_digest": secret_digest(twins.secret), "rewriter": rewriter,
               "variants": [[i, [variant_hash(twins.salts[i][j], twins.variants[i][j]) for j in range(twins.k)]]
                            for i in twins.ids]}
    return section | {"digest": commitment_digest(section)}


def drawn_index(secret: bytes, beacon: Beacon, passage_id: str, k: int) -> int:
    """The public variant of one passage (module docstring, step 2)."""
    return uniform_index(derive(secret, beacon, f"twins/draw/{passage_id}"), k)


def _publish(twins, draw: dict) -> None:
    twins.manifest["draw"] = draw | {"salts": {i: twins.salts[i][twins.public[i]].hex() for i in twins.ids}}


def beacon_draw(twins, beacon: Beacon) -> None:
    """Draw every passage's public variant from the committed secret and ``beacon`` (which must be
    the round the commitment names) and record the draw in the manifest: the beacon, the secret
    and the public versions' salts, revealed."""
    from trainspotter.errors import InputError

    committed = twins.manifest["commitment"].get("round")
    if committed != beacon.round:
        raise InputError(f"option --beacon: round {beacon.round}, but the commitment names round {committed}: the "
                         f"draw must use the round fixed before it was published")
    twins.public = {i: drawn_index(twins.secret, beacon, i, twins.k) for i in twins.ids}
    _publish(twins, {"scheme": "beacon", "rule": RULE, "beacon": beacon.to_dict(), "secret": twins.secret.hex()})


def seeded_draw(twins, public: dict[str, int], note: str) -> None:
    """Record public variants drawn by a seeded generator (a built-in testbed's, a benchmark's;
    ``note`` says which): reproducible, but nothing in the folder shows it random (``prove``:
    unproven)."""
    twins.public = dict(public)
    _publish(twins, {"scheme": "seeded", "note": note})


class DrawProof(BaseModel):
    """What a twins folder shows of its draw: ``status`` "shown" (the commitment opens and the draw
    re-derives from the revealed secret and the beacon round it names), "unproven" (nothing shows it
    random) or "failed" (it does not re-derive, or the folder is not the pinned commitment's);
    ``reason``: one sentence saying what was checked, or what failed."""

    status: Status
    reason: str
    commitment: str | None = None  # the folder's commitment digest
    pinned: str | None = None  # the digest the auditor saw published (--commitment), if given
    round: int | None = None  # the beacon round the commitment names
    beacon_source: str | None = None
    private_checked: int = 0  # private versions opened against their committed hashes

    @property
    def rests_on(self) -> str:
        """The fact a shown draw rests on, which no file can show: one line to paste."""
        return f"commitment {self.commitment} was public before beacon round {self.round}"


def _failed(reason: str, **known) -> DrawProof:
    return DrawProof(status="failed", reason=reason, **known)


def prove(manifest: dict, public: dict[str, str], private: dict[str, dict[int, tuple[str, bytes]]] | None = None,
          pinned: str | None = None) -> DrawProof:
    """What a folder's manifest and texts show of its draw (module docstring, step 3): ``public``,
    id → public text; ``private``, id → variant → (text, salt) for the private versions at hand
    (None: none, as a third party holds the release); ``pinned``: the commitment digest the
    auditor saw published."""
    section = manifest.get("commitment") or {}
    known = {"commitment": section.get("digest"), "pinned": pinned, "round": section.get("round")}
    if pinned is not None and section.get("digest") != pinned:
        return _failed(f"the folder's commitment {str(section.get('digest'))[:16]}… is not the pinned "
                       f"{pinned[:16]}…: the folder is not the one committed to", **known)
    if manifest.get("version", 1) < VERSION:
        return DrawProof(status="unproven", reason="the folder was made before twins release: its commitment "
                         "(sha256(salt ‖ draw)) shows the draw was fixed at twins make, not that nobody chose it",
                         **known)
    if commitment_digest(section) != section.get("digest"):
        return _failed("the manifest's commitment does not match its digest: it was edited", **known)
    draw = manifest.get("draw") or {}
    if draw.get("scheme") == "seeded":
        return DrawProof(status="unproven", reason=f"drawn from a seed ({draw.get('note')}): nothing in the folder "
                         f"shows that seed was not chosen", **known)
    try:
        beacon = Beacon.from_dict(draw["beacon"])
        secret = bytes.fromhex(draw["secret"])
        salts = {i: bytes.fromhex(s) for i, s in draw["salts"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        return _failed("the manifest records no complete beacon draw (beacon, secret and salts)", **known)
    known |= {"beacon_source": beacon.source}
    try:
        problem = _reopen(section, beacon, secret, salts, public, private or {})
    except (KeyError, TypeError, ValueError, IndexError):
        problem = "the commitment does not hold k hashes per passage, the secret's digest and the round"
    if problem:
        return _failed(problem, **known)
    status, detail = beacon.proof()  # the round's value checked against the network's key
    if status == "failed":
        return _failed(f"the beacon {detail}", **known)
    if status == "test":
        return DrawProof(status="unproven", **known, reason=(
            f"the draw re-derives, but from {beacon.source}, which anyone knew before the commitment: a secret "
            f"could have been tried against it until the draw suited a model"))
    if status == "unverified":
        return DrawProof(status="unproven", **known, reason=(
            f"the draw re-derives, but {detail}: values could have been tried until the draw suited a model "
            f"(release with the round as drand publishes it, JSON with its signature)"))
    n = sum(len(v) for v in (private or {}).values())
    return DrawProof(status="shown", private_checked=n, **known, reason=(
        f"the commitment opens, the draw re-derives from the revealed secret and beacon round {beacon.round}, and "
        f"every public text is the committed variant the draw names" + (f"; all {n} private texts open their "
                                                                        f"committed hashes" if n else "")))


def _reopen(section: dict, beacon: Beacon, secret: bytes, salts: dict[str, bytes], public: dict[str, str],
            private: dict[str, dict[int, tuple[str, bytes]]]) -> str | None:
    """Why the draw does not re-derive from ``section`` and the texts, or None when it does."""
    if beacon.round != section["round"]:
        return f"the draw used beacon round {beacon.round}, but the commitment names round {section['round']}"
    if not hmac.compare_digest(secret_digest(secret), str(section["secret_digest"])):
        return "the revealed secret is not the committed one"
    hashes = {i: h for i, h in section["variants"]}
    missing, extra = [i for i in hashes if i not in public], [i for i in public if i not in hashes]
    if missing or extra:
        return (f"{len(missing)} committed passages are not in the release (e.g. {missing[0]!r}): dropped after the "
                f"draw" if missing else f"passage {extra[0]!r} is released but was never committed")
    k = section["k"]
    for i, h in hashes.items():
        j = drawn_index(secret, beacon, i, k)
        opens = [v for v in range(k) if i in salts and hmac.compare_digest(variant_hash(salts[i], public[i]), h[v])]
        if opens != [j]:
            what = f"variant {opens[0]}" if opens else "none of its committed variants"
            return f"passage {i!r}: the public text is {what}, but the draw names variant {j}"
        for v, (text, salt) in private.get(i, {}).items():
            if v == j or not 0 <= v < k or not hmac.compare_digest(variant_hash(salt, text), h[v]):
                return f"passage {i!r}: private variant {v} is not the committed one"
    return None
