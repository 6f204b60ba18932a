"""API keys and their scopes (`REPLAY_API_KEYS`).

Only SHA-256 digests of the secrets are kept. A presented secret's digest is
compared with every known one by `hmac.compare_digest`, without stopping at a
match, so the time taken says nothing about which key (if any) it was.
"""

from __future__ import annotations

import hashlib
import hmac
from enum import StrEnum


class Scope(StrEnum):
    READ = "read"
    APPEND = "append"
    RUN = "run"
    ADMIN = "admin"


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


class KeyRing:
    """The configured keys; empty means the service is open."""

    def __init__(self, spec: str) -> None:
        keys: dict[bytes, frozenset[Scope]] = {}
        for entry in spec.split(","):
            entry = entry.strip()
            if not entry:
                continue
            secret, sep, scopes = entry.rpartition(":")
            if not sep or not scopes.replace("+", "").isalpha():
                # A bare secret (which may itself contain ':') is today's all-powerful key.
                secret, granted = entry, frozenset({Scope.ADMIN})
            else:
                try:
                    granted = frozenset(Scope(s.strip().lower()) for s in scopes.split("+"))
                except ValueError as exc:
                    raise ValueError(
                        f"REPLAY_API_KEYS: unknown scope in {scopes!r}; "
                        f"use {'+'.join(s.value for s in Scope)}"
                    ) from exc
            if not secret:
                raise ValueError("REPLAY_API_KEYS: an entry has an empty secret")
            keys[_digest(secret)] = granted
        self._keys = tuple(keys.items())

    @property
    def open(self) -> bool:
        return not self._keys

    @staticmethod
    def key_id(secret: str) -> str:
        """What names a key where a record must say which one acted (an erasure's
        tombstones): a prefix of its digest, never the secret."""
        return "key:" + _digest(secret).hex()[:16]

    def scopes(self, secret: str) -> frozenset[Scope] | None:
        """The key's scopes, or None for an unknown secret."""
        digest = _digest(secret)
        found = None
        for known, granted in self._keys:
            if hmac.compare_digest(known, digest):
                found = granted
        return found
