"""Signed, expiring tokens bound to one thread or one run (PyJWT, HS256).

A token names exactly one thread or run and its scopes (`read`, optionally
`chat`). It is verified with the secret alone, so no request pays a database
round trip for it. The header's `kid` (a digest prefix of the signing secret)
picks the secret, so a previous secret stays accepted during a rotation
without trying every key on every request.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import jwt

AUDIENCE = "agent-replay"
ALGORITHM = "HS256"
MIN_SECRET_BYTES = 32
DEFAULT_TTL_SECONDS = 900
MAX_TTL_SECONDS = 86_400


class TokenScope(StrEnum):
    READ = "read"
    CHAT = "chat"


class TokenExpired(Exception):
    """The signature is good but the token's time is up."""


class TokenInvalid(Exception):
    """Not a token this service signed (malformed, tampered, unknown key)."""


@dataclass(frozen=True, slots=True)
class Claims:
    thread_id: str | None
    run_id: str | None
    scopes: frozenset[TokenScope]
    expires_at: int  # Unix seconds


def _kid(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


def check_secret(secret: str, name: str) -> str:
    if len(secret.encode()) < MIN_SECRET_BYTES:
        raise ValueError(f"{name} must be at least {MIN_SECRET_BYTES} bytes")
    return secret


class TokenSigner:
    """Mints with the current secret; verifies with it or any previous one."""

    def __init__(self, current: str, previous: Iterable[str] = ()) -> None:
        self._current = current
        self._kid = _kid(current)
        self._by_kid = {_kid(s): s for s in (*previous, current)}

    def mint(
        self,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        scopes: Iterable[TokenScope],
        ttl_seconds: int,
        now: float | None = None,
    ) -> tuple[str, int]:
        """(token, expires_at in Unix seconds)."""
        if (thread_id is None) == (run_id is None):
            raise ValueError("a token names exactly one of thread_id and run_id")
        issued = time.time() if now is None else now
        # `exp` is whole seconds: rounded up, so a token lives at least the time asked for
        # (cut down to the second, a 1 s token could expire at once).
        expires = math.ceil(issued + ttl_seconds)
        payload: dict[str, Any] = {
            "aud": AUDIENCE,
            "iat": int(issued),
            "exp": expires,
            "scope": " ".join(sorted(TokenScope(s).value for s in scopes)),
        }
        if thread_id is not None:
            payload["thread_id"] = thread_id
        else:
            payload["run_id"] = run_id
        token = jwt.encode(payload, self._current, algorithm=ALGORITHM, headers={"kid": self._kid})
        return token, expires

    def verify(self, token: str) -> Claims:
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError as exc:
            raise TokenInvalid("malformed token") from exc
        secret = self._by_kid.get(kid) if isinstance(kid, str) else None
        if secret is None:
            raise TokenInvalid("signed with a key this service does not hold")
        try:
            payload = jwt.decode(
                token,
                secret,
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                # Replicas' clocks differ a little; `iat` is informative only.
                options={"require": ["exp", "aud", "scope"], "verify_iat": False},
            )
        except jwt.ExpiredSignatureError as exc:
            raise TokenExpired("the token has expired") from exc
        except jwt.PyJWTError as exc:
            raise TokenInvalid("the token does not verify") from exc
        return _claims(payload)


def _claims(payload: dict[str, Any]) -> Claims:
    thread_id, run_id = payload.get("thread_id"), payload.get("run_id")
    scope = payload.get("scope")
    valid = (
        isinstance(scope, str)
        and isinstance(payload.get("exp"), int)
        and (isinstance(thread_id, str)) != (isinstance(run_id, str))
        and (thread_id is None or isinstance(thread_id, str))
        and (run_id is None or isinstance(run_id, str))
    )
    if not valid:
        raise TokenInvalid("the token's claims are not ours")
    try:
        scopes = frozenset(TokenScope(s) for s in str(scope).split())
    except ValueError as exc:
        raise TokenInvalid("the token's claims are not ours") from exc
    return Claims(thread_id, run_id, scopes, int(payload["exp"]))
