"""A draw nobody chose (DESIGN.md: "A draw is only as good as the proof that nobody chose it").

A commitment shows that a draw was fixed before the release, not that it was random: an owner can
look at the target model (it already exists) and pick the versions it favours. So the owner
commits first, to a secret ``s`` (``secret_digest``) and to every variant, and only then does a
public random value ``R`` appear that nobody controls: a round of a randomness beacon such as
drand, supplied by the user (nothing is fetched at run time). Every draw and every key derives
from both, by HMAC-SHA256 keyed with the secret (``derive``):

    seed(label) = HMAC-SHA256(s, "trainspotter" ‖ 0 ‖ label ‖ 0 ‖ round (8 bytes, big-endian) ‖ R)

Before ``R`` exists nobody, the owner included, can know the draw; once it exists the owner can no
longer choose ``s``, which the published commitment binds. What no offline check can show is the
order: an owner who learns ``R`` first could try secrets until the draw favours the target
(commit-then-reveal, as in lotteries and certificate transparency). A verdict that rests on such a
draw therefore says what it rests on: the commitment was public before the beacon round.

Nor is ``R`` taken on the user's word: a drand round carries the network's BLS signature, and a
beacon read from one is checked against the network's public key (``trainspotter.proofs.drand``) when
it is read and whenever a folder or record is checked (``Beacon.proof``). A value given as
``ROUND:HEX`` has no signature: it derives the same draws and keys, but nothing shows it is the
network's, so no verdict rests on it (an owner free to make up "randomness" for a round could try
values until the key suits a model).

An index among ``k`` (``uniform_index``) is drawn without modulo bias by rejection: the seed, read
as a 256-bit integer, is accepted below the largest multiple of ``k`` and re-hashed otherwise, so
every index has probability exactly 1/k when the seed is uniform.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from trainspotter.errors import InputError
from trainspotter.proofs.drand import CHAINS, chain_of, check_round, published_at

__all__ = ["SECRET_BYTES", "TEST_BEACON", "Beacon", "derive", "parse_beacon", "secret_digest", "uniform_index",
           "verify_round"]

SECRET_BYTES = 32  # the owner's secret: 256 bits from the operating system's generator
RANDOMNESS_BYTES = 32  # a drand round's randomness (sha256 of its signature)


@dataclass(frozen=True)
class Beacon:
    """One public random value: the beacon's round number and its 32 random bytes, where it was
    published (for the reader; the derivation reads round and randomness only) and, read from a
    drand round, the network's signature that shows it (``chain``: which network; the chained one
    also signs the previous round's signature)."""

    round: int
    randomness: bytes
    source: str = "drand"
    signature: str | None = None
    chain: str | None = None
    previous_signature: str | None = None

    def __post_init__(self):
        if self.round < 0 or len(self.randomness) != RANDOMNESS_BYTES:
            raise ValueError(f"a beacon needs a round ≥ 0 and {RANDOMNESS_BYTES} random bytes")

    @property
    def known_in_advance(self) -> bool:
        """The fixed test value (``TEST_BEACON``): anyone knew it before any commitment, so a secret
        could have been tried against it until the draw or key suited a model."""
        return self.randomness == TEST_BEACON.randomness

    @property
    def text(self) -> str:
        """``ROUND:HEX``, as ``parse_beacon`` reads it."""
        return f"{self.round}:{self.randomness.hex()}"

    def to_dict(self) -> dict:
        return {"round": self.round, "randomness": self.randomness.hex(), "source": self.source} | {
            k: v for k in ("signature", "chain", "previous_signature") if (v := getattr(self, k)) is not None}

    @classmethod
    def from_dict(cls, data: dict) -> Beacon:
        return cls(int(data["round"]), bytes.fromhex(data["randomness"]), str(data.get("source", "drand")),
                   *(data.get(k) for k in ("signature", "chain", "previous_signature")))

    def proof(self) -> tuple[str, str]:
        """What shows this is the network's value for its round: ("verified", ...) when its signature
        checks against the shipped network key and its randomness is sha256 of it; ("test", ...) for
        the fixed test value; ("unverified", ...) without a signature; ("failed", ...) when the
        signature or randomness does not hold (a folder or record edited after the round was read)."""
        if self.known_in_advance:
            return "test", "the fixed test value, which everyone knew in advance: not a beacon round"
        if self.signature is None or self.chain is None:
            return "unverified", (f"round {self.round} was given as ROUND:HEX, without the network's signature: "
                                  "nothing shows it is the beacon's value rather than one made up")
        chain = CHAINS.get(self.chain)
        try:
            if chain is None:
                raise ValueError(f"drand network {self.chain!r} is not one this trainspotter ships")
            if check_round(self.round, self.signature, chain, self.previous_signature) != self.randomness:
                raise ValueError("its randomness is not sha256 of its signature")
        except ValueError as e:
            return "failed", f"round {self.round} of drand {self.chain} does not verify: {e}"
        when = datetime.fromtimestamp(published_at(chain, self.round), timezone.utc)
        return "verified", (f"round {self.round} of drand {chain.name} (chain {chain.hash[:16]}…), published "
                            f"{when:%Y-%m-%d %H:%M:%S} UTC: its signature verifies against the network's key")


# A fixed value for tests and the built-in testbeds: not a real beacon round, and said so.
TEST_BEACON = Beacon(1, hashlib.sha256(b"trainspotter fixed test beacon").digest(),
                     "fixed test value (tests and built-in testbeds; not a real beacon round)")


def parse_beacon(value: str, where: str = "option --beacon") -> Beacon:
    """A beacon from a JSON file of a drand round as drand publishes it (``{"round": N, "randomness":
    "HEX", "signature": "HEX", ...}``: verified, ``trainspotter.proofs.drand.verify_round``) or from
    ``ROUND:HEX`` (the round number and its 64 hex digits of randomness: unverified, for tests);
    anything else, or a round that does not verify, is one InputError naming ``where``."""
    path = Path(value)
    if ":" not in value and path.suffix == ".json":
        if not path.is_file():
            raise InputError(f"{where}: {value}: no such file (a drand round as JSON, or ROUND:HEX)")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            signed = isinstance(data, dict) and "signature" in data
            if not signed:
                return Beacon(int(data["round"]), bytes.fromhex(data["randomness"]), str(data.get("source", "drand")))
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
            raise InputError(f"{path}: not a beacon round ({{\"round\": N, \"randomness\": \"64 hex digits\", "
                             f"\"signature\": ...}}): {type(e).__name__}") from None
        return verify_round(data, f"{where}: {path}")
    round_, _, hex_ = value.partition(":")
    try:
        return Beacon(int(round_), bytes.fromhex(hex_))
    except ValueError:
        raise InputError(f"{where}: {value!r} is not ROUND:HEX (a beacon round number, a colon and its "
                         f"{2 * RANDOMNESS_BYTES} hex digits of randomness) nor a .json file of a drand round") from None


def derive(secret: bytes, beacon: Beacon, label: str) -> bytes:
    """32 bytes derived from the owner's secret and the beacon for one purpose (``label``: which
    draw or key; different labels give independent values): the module docstring's seed(label)."""
    if len(secret) < 16:
        raise ValueError("a secret of at least 128 bits")
    message = b"trainspotter\0" + label.encode("utf-8") + b"\0" + beacon.round.to_bytes(8, "big") + beacon.randomness
    return hmac.new(secret, message, hashlib.sha256).digest()


def uniform_index(seed: bytes, k: int) -> int:
    """An index in 0..k-1 from a 32-byte seed, each with probability exactly 1/k when the seed is
    uniform: rejection below the largest multiple of k under 2^256 (re-hashing the seed otherwise)."""
    if k < 1:
        raise ValueError("k ≥ 1")
    limit = (1 << 256) - (1 << 256) % k
    while (x := int.from_bytes(seed, "big")) >= limit:
        seed = hashlib.sha256(seed).digest()
    return x % k


def secret_digest(secret: bytes) -> str:
    """What a commitment publishes of the secret: sha256("trainspotter-secret" ‖ 0 ‖ s), hex."""
    return hashlib.sha256(b"trainspotter-secret\0" + secret).hexdigest()


def verify_round(data: dict, where: str) -> Beacon:
    """A ``Beacon`` from a drand round as drand publishes it (``round``, ``randomness``,
    ``signature``, and ``previous_signature`` on the chained network), verified (``proofs.drand``): its
    signature against the shipped network key for that round, its randomness = sha256(signature).
    Anything else is one InputError naming ``where``."""
    chain = chain_of(data, where)
    try:
        round_, signature = int(data["round"]), str(data["signature"]).lower()
        previous = None if data.get("previous_signature") is None else str(data["previous_signature"]).lower()
        randomness = check_round(round_, signature, chain, previous)
    except (KeyError, TypeError) as e:
        raise InputError(f"{where}: not a drand round (round, randomness, signature): {type(e).__name__} "
                         f"{e}") from None
    except ValueError:
        raise InputError(f"{where}: round {data.get('round')} does not verify against drand {chain.name}'s key "
                         f"(chain {chain.hash[:16]}…): the signature is not the network's for that round") from None
    if "randomness" in data and str(data["randomness"]).lower() != randomness.hex():
        raise InputError(f"{where}: round {round_}: its randomness is not sha256 of its signature "
                         f"({randomness.hex()[:16]}…): the value was changed after the network signed it")
    when = datetime.fromtimestamp(published_at(chain, round_), timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Beacon(round_, randomness, f"drand {chain.name}, published {when}", signature=signature,
                  chain=chain.name, previous_signature=previous)
