"""Signing a sealed record (Ed25519, from the ``cryptography`` package): the auditor's private
key signs the record's digest; ``verify`` checks it against the key in the record or a pinned one."""

from __future__ import annotations

from pathlib import Path

from trainspotter.errors import InputError

__all__ = ["load_private_key", "load_public_key", "public_hex", "sign"]


def load_private_key(path: str | Path):
    """An Ed25519 private key from a PEM file (``openssl genpkey -algorithm ed25519``)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    key = _load_pem(path, lambda data: load_pem_private_key(data, password=None))
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"{path}: not an Ed25519 private key")
    return key


def load_public_key(path: str | Path):
    """An Ed25519 public key from a PEM file (or the public half of a private key file)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key

    def read(data: bytes):
        return (load_pem_private_key(data, password=None).public_key() if b"PRIVATE KEY" in data
                else load_pem_public_key(data))

    key = _load_pem(path, read)
    if isinstance(key, Ed25519PrivateKey):
        key = key.public_key()
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(f"{path}: not an Ed25519 public key")
    return key


def _load_pem(path: str | Path, read):
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such key file")
    from cryptography.exceptions import UnsupportedAlgorithm

    try:
        return read(path.read_bytes())
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise InputError(f"{path}: not a PEM key ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None


def public_hex(public_key) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def sign(record: dict, private_key) -> dict:
    """Add an Ed25519 signature over the record's digest (the digest itself is unchanged)."""
    record["signature"] = {"algorithm": "ed25519", "public_key": public_hex(private_key.public_key()),
                           "signature": private_key.sign(record["digest"].encode("ascii")).hex()}
    return record
