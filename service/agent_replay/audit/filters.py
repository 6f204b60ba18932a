"""A run listing's opaque keyset cursor (what it may be filtered by is the log's
`RunFilter`, agent_replay.log.filters).

Listings are ordered newest first, `(created_at, run_id)` descending, so a
cursor is just the last row's pair: stable under concurrent inserts (a new run
sorts before every cursor taken earlier, so pages never repeat or skip).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime

import orjson

from agent_replay.errors import InvalidCursor
from agent_replay.log.filters import utc


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
