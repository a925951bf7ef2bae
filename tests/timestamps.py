"""A real RFC 3161 timestamp authority for the tests (imported by name, as tests/beacons.py):
`openssl ts -reply` with a root CA and a TSA certificate made here (valid from 2020, so a token may
carry an earlier time than today's), and ``backdated``: a reply of that authority with another time,
signed again with its key (what an authority's clock says is the authority's word: the tests need a
stamp before the real drand round they use, published 2023-09-15)."""

import datetime as dt
import hashlib
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

FROM, UNTIL = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2040, 1, 1, tzinfo=dt.timezone.utc)
CONFIG = """[ tsa ]
default_tsa = tsa_config
[ tsa_config ]
serial = {dir}/serial
signer_cert = {dir}/tsa.crt
signer_key = {dir}/tsa.key
signer_digest = sha256
default_policy = 1.2.3.4.1
other_policies = 1.2.3.4.5
certs = {dir}/tsa.crt
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = no
tsa_name = yes
ess_cert_id_chain = no
ess_cert_id_alg = sha256
"""


def _cert(subject: str, key, issuer: str, issuer_key, ca: bool) -> x509.Certificate:
    builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(FROM).not_valid_after(UNTIL)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                        critical=True)
    else:
        builder = (builder.add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False),
                                         critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True))
    return builder.sign(issuer_key, hashes.SHA256())


class Authority:
    """A root CA and a timestamp authority it certified, in ``folder``; ``root_pem`` is what a user
    names with --authority, ``stamp`` what the authority answers to a request."""

    def __init__(self, folder: Path, name: str = "Test TSA"):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        root_key, self.key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
        root = _cert(f"{name} Root CA", root_key, f"{name} Root CA", root_key, ca=True)
        tsa = _cert(name, self.key, f"{name} Root CA", root_key, ca=False)
        self.root_pem = root.public_bytes(serialization.Encoding.PEM)
        (self.folder / "root.pem").write_bytes(self.root_pem)
        (self.folder / "tsa.crt").write_bytes(tsa.public_bytes(serialization.Encoding.PEM))
        (self.folder / "tsa.key").write_bytes(self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        (self.folder / "serial").write_text("01\n")
        (self.folder / "tsa.cnf").write_text(CONFIG.format(dir=self.folder))

    def stamp(self, request: bytes) -> bytes:
        """The authority's reply to ``request`` (DER), stamped now by `openssl ts -reply`."""
        query = self.folder / "query.tsq"
        query.write_bytes(request)
        out = self.folder / "reply.tsr"
        subprocess.run(["openssl", "ts", "-reply", "-config", str(self.folder / "tsa.cnf"), "-queryfile", str(query),
                        "-out", str(out)], check=True, capture_output=True)
        return out.read_bytes()

    def stamp_at(self, request: bytes, when: dt.datetime) -> bytes:
        return backdated(self.stamp(request), self.key, when)


def backdated(reply: bytes, key, when: dt.datetime) -> bytes:
    """``reply`` with its token's time set to ``when``: the TSTInfo re-encoded, its digest in the signed
    attributes replaced, and those signed again with the authority's ``key``."""
    from pyasn1.codec.der import decoder, encoder
    from pyasn1.type import useful
    from pyasn1_modules import rfc3161, rfc5652

    resp, _ = decoder.decode(reply, asn1Spec=rfc3161.TimeStampResp())
    token = resp["timeStampToken"]
    signed, _ = decoder.decode(token["content"], asn1Spec=rfc5652.SignedData())
    info, _ = decoder.decode(bytes(signed["encapContentInfo"]["eContent"]), asn1Spec=rfc3161.TSTInfo())
    info["genTime"] = useful.GeneralizedTime(when.astimezone(dt.timezone.utc).strftime("%Y%m%d%H%M%SZ"))
    content = encoder.encode(info)
    signed["encapContentInfo"]["eContent"] = content
    signer = signed["signerInfos"][0]
    attributes = rfc5652.SignedAttributes()
    for n, attribute in enumerate(signer["signedAttrs"]):
        if attribute["attrType"] == rfc5652.id_messageDigest:
            attribute["attrValues"][0] = encoder.encode(rfc5652.MessageDigest(hashlib.sha256(content).digest()))
        attributes.setComponentByPosition(n, attribute)
    signer["signature"] = key.sign(encoder.encode(attributes), ec.ECDSA(hashes.SHA256()))
    token["content"] = signed
    return encoder.encode(resp)
