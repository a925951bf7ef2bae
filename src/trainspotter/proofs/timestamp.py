"""The order proven, not taken on the owner's word (DESIGN.md: "Proofs are checked, not trusted";
issue 63). An RFC 3161 timestamp token is a timestamp authority's signature on (sha256 of the
commitment's bytes, time T): with a verified beacon round published at t > T, the commitment, and so
the secret every key and draw derives from, was fixed before anybody could know the round's value.
Anyone checks it offline from the token and the authority's certificate chain (``rfc3161-client``:
the status, the CMS signature and the chain up to the root named, the signer's timeStamping usage,
the message imprint; as ``openssl ts -verify -data commitment.json -in commitment.tsr -CAfile
authority.pem`` does), and the order from T and the round's publication time (``proofs.drand``).

``request`` is what a release asks an authority to stamp (commitment.tsq: SHA-256 of the commitment,
the authority's certificate asked for in the reply); ``check`` reads its reply (commitment.tsr)
against the authority's certificates (authority.pem); ``order`` holds its time against the round's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from trainspotter.errors import InputError

__all__ = ["AUTHORITY", "REPLY", "REQUEST", "Stamp", "check", "order", "request"]

REQUEST, REPLY, AUTHORITY = "commitment.tsq", "commitment.tsr", "authority.pem"


@dataclass(frozen=True)
class Stamp:
    """A verified token: when the authority stamped the data, and who (its certificate's subject)."""

    time: datetime
    authority: str

    def text(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} UTC by {self.authority}"


def request(data: bytes) -> bytes:
    """The RFC 3161 request (DER) for ``data``: its SHA-256, a nonce, the authority's certificate
    asked for in the reply."""
    from rfc3161_client import HashAlgorithm, TimestampRequestBuilder

    return TimestampRequestBuilder().data(data).hash_algorithm(HashAlgorithm.SHA256).build().as_bytes()


def check(reply: bytes, data: bytes, authority_pem: bytes, where: str) -> Stamp:
    """The stamp of ``reply`` once it verifies over ``data`` up to a root certificate of
    ``authority_pem`` (the rest of its certificates serve as intermediates); one InputError naming
    ``where`` otherwise (another file's token, another authority's, an edited one)."""
    from cryptography import x509
    from rfc3161_client import VerifierBuilder, decode_timestamp_response
    from rfc3161_client.errors import VerificationError

    try:
        certificates = x509.load_pem_x509_certificates(authority_pem)
    except ValueError:
        raise InputError(f"{where}: the authority's certificates are not PEM certificates") from None
    roots = [c for c in certificates if c.subject == c.issuer]
    if not roots:
        raise InputError(f"{where}: the authority's certificates hold no root (a self-signed certificate)")
    try:
        response = decode_timestamp_response(reply)
    except ValueError as e:
        raise InputError(f"{where}: not an RFC 3161 timestamp reply ({' '.join(str(e).split())[:120]})") from None
    verifier = VerifierBuilder(roots=roots, intermediates=[c for c in certificates if c not in roots]).build()
    try:
        verifier.verify_message(response, data)
    except VerificationError as e:
        reason = "it stamps another file" if "Mismatch between messages" in str(e) else \
            "its signature and certificate chain do not verify up to the authority's root certificate"
        raise InputError(f"{where}: the timestamp token does not hold: {reason}") from None
    info = response.tst_info
    when = info.gen_time if info.gen_time.tzinfo else info.gen_time.replace(tzinfo=timezone.utc)
    signer = _signer(response)
    return Stamp(when.astimezone(timezone.utc), signer)


def _signer(response) -> str:
    """The stamping certificate's common name (its whole subject when it has none)."""
    from cryptography import x509

    for der in response.signed_data.certificates:
        cert = x509.load_der_x509_certificate(der)
        if any(e.oid == x509.oid.ExtensionOID.EXTENDED_KEY_USAGE and x509.oid.ExtendedKeyUsageOID.TIME_STAMPING
               in e.value for e in cert.extensions):
            names = cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
            return str(names[0].value) if names else cert.subject.rfc4514_string()
    return "the authority"


def order(stamp: Stamp, beacon) -> tuple[bool, str]:
    """Whether ``stamp`` precedes the publication of ``beacon``'s round (a verified drand round: its
    time is the network's, from genesis and period), and the sentence that says so."""
    from trainspotter.proofs.drand import CHAINS, published_at

    status, _ = beacon.proof()
    if status != "verified":
        return False, f"the beacon round is {status}, so its time is unknown and nothing orders the stamp before it"
    t = datetime.fromtimestamp(published_at(CHAINS[beacon.chain], beacon.round), timezone.utc)
    if stamp.time < t:
        return True, (f"order proven: commitment stamped {stamp.text()}, round {beacon.round} published "
                      f"{t:%Y-%m-%d %H:%M:%S} UTC")
    return False, (f"the commitment was stamped {stamp.text()}, after round {beacon.round} was published "
                   f"({t:%Y-%m-%d %H:%M:%S} UTC): the stamp shows nothing about the order")
