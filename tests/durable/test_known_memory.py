"""What a process remembers of streams (agent_replay.durable.known): pure, no PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from agent_replay.durable.bodies import is_json
from agent_replay.durable.known import KnownStreams, media_type
from agent_replay.log.streams import StreamState

BORN = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)


def _state(name: str, **changes: object) -> StreamState:
    state = StreamState(
        name=name, run_id=name, last_seq=3, closed=False, stored=True,
        content_type="application/json; charset=utf-8", ttl_seconds=None, expires_at=None,
        stream_seq=None, closed_by=None, fork_spec=None, deleted=False, expired=False,
        forked=False, fork_seq=None, created_at=BORN,
    )  # fmt: skip
    return replace(state, **changes)


def test_remember_when_stream_open_without_ttl_then_known_by_media_type_and_life() -> None:
    known = KnownStreams()
    known.remember(_state("s"))
    got = known.get("s")
    assert got is not None
    media, json_mode = media_type(got.content_type), is_json(got.content_type)
    assert (got.run_id, media, json_mode, got.created_at) == (
        "s",
        "application/json",
        True,
        BORN,
    )


def test_remember_when_ttl_expiry_closed_deleted_or_expired_then_forgotten() -> None:
    known = KnownStreams()
    refused = {
        "ttl": {"ttl_seconds": 60},
        "expiry": {"expires_at": BORN},
        "closed": {"closed": True},
        "deleted": {"deleted": True},
        "expired": {"expired": True},
    }
    for name, changes in refused.items():
        known.remember(_state(name))
        known.remember(_state(name, **changes))  # the newer look replaces the memory
        assert known.get(name) is None, name


def test_get_when_over_capacity_then_least_recently_used_goes_first() -> None:
    known = KnownStreams(capacity=2)
    known.remember(_state("a"))
    known.remember(_state("b"))
    assert known.get("a") is not None  # "a" used: "b" is now the oldest
    known.remember(_state("c"))
    assert [n for n in ("a", "b", "c") if known.get(n) is not None] == ["a", "c"]


def test_get_when_older_than_max_age_then_looked_up_again() -> None:
    known = KnownStreams(max_age_seconds=0.0)
    known.remember(_state("s"))
    assert known.get("s") is None
    assert len(known) == 0
