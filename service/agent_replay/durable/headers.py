"""The protocol's request headers, parsed and validated (400 invalid_header)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from agent_replay.errors import InvalidForkOffset, InvalidHeader
from agent_replay.log.streams import Producer

_WHOLE = re.compile(r"0|[1-9][0-9]*")
_DIGITS = re.compile(r"[0-9]+")
_MEDIA = re.compile(r"[\w.+-]+/[\w.+-]+")
_FORK_OFFSET = re.compile(r"[0-9]{1,16}_[0-9]{1,16}")
MAX_SAFE = 2**53 - 1
DEFAULT_TYPE = "application/octet-stream"


# The headers whose text is stored (PostgreSQL text holds no NUL).
_STORED = ("content-type", "stream-seq", "producer-id", "stream-forked-from")


def check_storable(headers: Mapping[str, str]) -> None:
    """Refuse, before anything is written, a stored header the database cannot hold."""
    for name in _STORED:
        if "\x00" in headers.get(name, ""):
            raise InvalidHeader(f"{name} holds a NUL character")


def closed_flag(headers: Mapping[str, str]) -> bool:
    """`Stream-Closed` counts only as exactly `true` (any case); anything else is absent."""
    return headers.get("stream-closed", "").strip().lower() == "true"


def content_type(headers: Mapping[str, str]) -> str | None:
    """The request's content type when it names one (`type/subtype`), else None."""
    value = headers.get("content-type", "").strip()
    return value if _MEDIA.match(value) else None


@dataclass(frozen=True, slots=True)
class Expiry:
    ttl_seconds: int | None
    expires_at: datetime | None


def expiry(headers: Mapping[str, str]) -> Expiry:
    ttl = headers.get("stream-ttl")
    at = headers.get("stream-expires-at")
    if ttl is not None and at is not None:
        raise InvalidHeader("send Stream-TTL or Stream-Expires-At, not both")
    ttl_seconds = None
    if ttl is not None:
        if not _WHOLE.fullmatch(ttl) or len(ttl) > 15:
            raise InvalidHeader(
                f"Stream-TTL {ttl[:40]!r} must be whole seconds in plain decimal (e.g. 3600)"
            )
        ttl_seconds = int(ttl)
    expires_at = None
    if at is not None:
        expires_at = parse_time(at)
    return Expiry(ttl_seconds, expires_at)


def parse_time(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidHeader(
            f"Stream-Expires-At {text[:60]!r} is not an RFC 3339 timestamp"
        ) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with milliseconds, as JavaScript's toISOString writes it."""
    utc = value.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def producer(headers: Mapping[str, str]) -> Producer | None:
    pid = headers.get("producer-id")
    epoch = headers.get("producer-epoch")
    seq = headers.get("producer-seq")
    if pid is None and epoch is None and seq is None:
        return None
    if pid is None or epoch is None or seq is None:
        raise InvalidHeader("Producer-Id, Producer-Epoch and Producer-Seq go together")
    if not pid:
        raise InvalidHeader("Producer-Id must not be empty")
    return Producer(pid, _safe_int("Producer-Epoch", epoch), _safe_int("Producer-Seq", seq))


def _safe_int(name: str, text: str) -> int:
    if not _DIGITS.fullmatch(text) or len(text) > 16 or int(text) > MAX_SAFE:
        raise InvalidHeader(f"{name} {text[:40]!r} must be an integer from 0 to 2^53-1")
    return int(text)


def stream_seq(headers: Mapping[str, str]) -> str | None:
    value = headers.get("stream-seq")
    if value is None:
        return None
    if not value:
        raise InvalidHeader("Stream-Seq must not be empty")
    return value


@dataclass(frozen=True, slots=True)
class ForkRequest:
    source: str  # the source's path as sent
    offset: str | None
    sub_offset: int


def fork(headers: Mapping[str, str]) -> ForkRequest | None:
    source = headers.get("stream-forked-from")
    offset = headers.get("stream-fork-offset")
    sub = headers.get("stream-fork-sub-offset")
    if source is None:
        if sub is not None or offset is not None:
            raise InvalidHeader("Stream-Fork-Offset and -Sub-Offset need Stream-Forked-From")
        return None
    if offset is not None and not _FORK_OFFSET.fullmatch(offset):
        raise InvalidForkOffset(f"Stream-Fork-Offset {offset[:60]!r} is not an offset")
    sub_offset = 0
    if sub is not None:
        if not _WHOLE.fullmatch(sub) or len(sub) > 15:
            raise InvalidForkOffset(f"Stream-Fork-Sub-Offset {sub[:40]!r} is not a whole number")
        sub_offset = int(sub)
    return ForkRequest(source, offset, sub_offset)
