"""Streams this process has seen, as much of them as an append needs.

A plain append (no producer, no `Stream-Seq`) needs only what a stream cannot
change while it lives: its run, its content type, and which life of the name
it is (the run's `created_at`). Remembering those saves the lookup round trip
before every POST. Nothing remembered is trusted past the append statement:
it appends only to the run made at that `created_at` and only while the run
is open, so a stream deleted, made again, closed or soft-deleted (which closes
its run) on any replica refuses the append, and the caller looks the stream up
and answers as if it had never remembered it. A read of a remembered stream
reads its run's row instead of the lookup (one primary-key read) and trusts
the memory only while that row is open and of the same `created_at`.

Streams with a TTL or an expiry are never remembered (their appends renew or
check expiry, which the lookup does), nor closed ones (every append to them is
refused, with what the lookup finds).
"""

from __future__ import annotations

import time
from collections import OrderedDict

from agent_replay.log.streams import StreamState


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


class KnownStreams:
    """A bounded map of stream name to the stream as looked up, least recently used first out.

    Each is looked up again after `max_age_seconds`: the statements' checks are
    what make a remembered stream safe, the age bounds how long anything they
    cannot see (a soft delete made by a replica of an older version, which left
    the run open) goes unnoticed.
    """

    def __init__(self, capacity: int = 10_000, max_age_seconds: float = 60.0) -> None:
        self._capacity = capacity
        self._max_age = max_age_seconds
        # name -> (the stream as it was looked up: open, not deleted, no TTL; the
        # time.monotonic() after which it is looked up again)
        self._known: OrderedDict[str, tuple[StreamState, float]] = OrderedDict()

    def get(self, name: str) -> StreamState | None:
        entry = self._known.get(name)
        if entry is None:
            return None
        if time.monotonic() >= entry[1]:
            del self._known[name]
            return None
        self._known.move_to_end(name)
        return entry[0]

    def remember(self, state: StreamState) -> None:
        if (
            state.ttl_seconds is not None
            or state.expires_at is not None
            or state.deleted
            or state.expired
            or state.closed
        ):
            self._known.pop(state.name, None)
            return
        self._known[state.name] = (state, time.monotonic() + self._max_age)
        self._known.move_to_end(state.name)
        while len(self._known) > self._capacity:
            self._known.popitem(last=False)

    def forget(self, name: str) -> None:
        self._known.pop(name, None)

    def __len__(self) -> int:
        return len(self._known)
