"""What a run listing may be filtered by, and its opaque keyset cursor.

Listings are ordered newest first, `(created_at, run_id)` descending, so a
cursor is just the last row's pair: stable under concurrent inserts (a new run
sorts before every cursor taken earlier, so pages never repeat or skip).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from agent_replay.errors import InvalidCursor, InvalidRequest
from agent_replay.log.chunks import MAX_ERROR_CODE_CHARS, storable

# `cancelled` and `interrupted` are set by hosted runs; listed so filters on
# them are valid before any run has them.
STATUSES = ("running", "finished", "error", "cancelled", "interrupted")


def utc(moment: datetime) -> datetime:
    """A time without an offset is read as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class RunFilter:
    thread_id: str | None = None
    statuses: tuple[str, ...] = ()
    # Half-open: created_after <= created_at < created_before.
    created_after: datetime | None = None
    created_before: datetime | None = None
    agent: str | None = None
    tool: str | None = None
    has_error: bool | None = None
    # The code of the run's last RUN_ERROR (`abandoned`, `cancelled`, ...); any of these.
    error_codes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Matched against columns stored through `storable` (NUL and lone
        # surrogates as U+FFFD), so mapped the same way; PostgreSQL would refuse them.
        for name in ("thread_id", "agent", "tool"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, storable(value))
        # Cut as the column keeps them, so the whole code a RUN_ERROR gave still finds it.
        codes = tuple(storable(c[:MAX_ERROR_CODE_CHARS]) for c in self.error_codes)
        object.__setattr__(self, "error_codes", codes)
        unknown = [s for s in self.statuses if s not in STATUSES]
        if unknown:
            raise InvalidRequest(f"unknown status {unknown[0]!r}; use one of {', '.join(STATUSES)}")
        for name in ("created_after", "created_before"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, utc(value))


@dataclass(frozen=True, slots=True)
class Cursor:
    created_at: datetime
    run_id: str

    def encode(self) -> str:
        raw = orjson.dumps([self.created_at.isoformat(), self.run_id])
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    @classmethod
    def decode(cls, token: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            created, run_id = orjson.loads(raw)
            if not isinstance(created, str) or not isinstance(run_id, str):
                raise ValueError("not a cursor")
            return cls(utc(datetime.fromisoformat(created)), run_id)
        except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError) as exc:
            raise InvalidCursor(
                "the cursor is not one this service issued; pass next_cursor back unchanged"
            ) from exc
