"""Ed25519 signatures of export files.

The signature line, the file's last, is

    {"signature":{"algorithm":"ed25519","sha256":"<hex>","public_key_sha256":"<hex>","value":"<base64>"}}

`sha256` is the SHA-256 of every byte of the file before the line, `value` the Ed25519
signature of those 32 bytes (the digest, not its hex), `public_key_sha256` the SHA-256 of the
signing key's public half as DER SubjectPublicKeyInfo (what
`openssl pkey -pubin -outform DER | openssl dgst -sha256` prints). Signing the digest lets
an export be written as it is read, whatever its size, and `openssl pkeyutl -verify -rawin`
checks it (docs/guides/signed-exports.md). Keys are PEM, as `openssl genpkey -algorithm
ed25519` and `openssl pkey -pubout` write them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agent_replay.archive.chained import Signature
from agent_replay.errors import InvalidKey
from agent_replay.log.chunks import dumps


def private_key(pem: bytes, name: str = "the signing key") -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError as exc:  # a key that needs a password
        raise InvalidKey(f"{name} is encrypted; give it unencrypted") from exc
    except ValueError as exc:
        raise InvalidKey(f"{name} is not a private key in PEM") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidKey(f"{name} is not an Ed25519 key (openssl genpkey -algorithm ed25519)")
    return key


def public_key(pem: bytes, name: str = "the public key") -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(pem)
    except ValueError as exc:
        raise InvalidKey(f"{name} is not a public key in PEM (openssl pkey -pubout)") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidKey(f"{name} is not an Ed25519 public key")
    return key


def fingerprint(key: Ed25519PublicKey) -> str:
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


class Signer:
    """Digests an export's lines as they are written, then gives its signature line."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self._digest = hashlib.sha256()

    def update(self, data: bytes) -> bytes:
        self._digest.update(data)
        return data

    def line(self) -> bytes:
        digest = self._digest.digest()
        fields = {
            "algorithm": "ed25519",
            "sha256": digest.hex(),
            "public_key_sha256": fingerprint(self._key.public_key()),
            "value": base64.b64encode(self._key.sign(digest)).decode("ascii"),
        }
        return dumps({"signature": fields}).encode() + b"\n"


def signature_problem(signature: Signature, key: Ed25519PublicKey) -> str | None:
    """Why `signature` (its digest already checked against the file) is not `key`'s, if not."""
    expected = fingerprint(key)
    if signature.public_key_sha256 != expected:
        return (
            f"signed by another key (public key sha256 {signature.public_key_sha256}, "
            f"not the given key's {expected})"
        )
    try:
        value = base64.b64decode(signature.value, validate=True)
        key.verify(value, bytes.fromhex(signature.sha256))
    except (InvalidSignature, binascii.Error):
        return "signature invalid: it does not verify with the given key"
    return None
