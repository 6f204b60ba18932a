"""What the audit's reads may be filtered by: a run listing (`RunFilter`) and a run's
events (`EventFilter`), values of the log's contract (`AuditReads` in
`agent_replay.log.store`).

Each says what it matches in plain Python too (`RunFilter.matches`,
`EventFilter.passes`): the in-memory store filters with them, and PostgreSQL's
statements (`agent_replay.log.lookups`) must agree with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from agent_replay.errors import InvalidRequest
from agent_replay.log.chunks import MAX_ERROR_CODE_CHARS, storable
from agent_replay.log.typefilter import TypeFilter
from agent_replay.log.values import Run

# `cancelled` and `interrupted` are set by hosted runs; listed so filters on
# them are valid before any run has them.
STATUSES = ("running", "finished", "error", "cancelled", "interrupted")


def utc(moment: datetime) -> datetime:
    """A time without an offset is read as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class RunFilter:
    """What a run listing may be filtered by (every field given: runs that match all)."""

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
    # Whether any match was redacted in the run.
    redacted: bool | None = None

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

    def matches(self, run: Run) -> bool:
        return (
            (self.thread_id is None or run.thread_id == self.thread_id)
            and (not self.statuses or run.status in self.statuses)
            and (self.created_after is None or run.created_at >= self.created_after)
            and (self.created_before is None or run.created_at < self.created_before)
            and (self.agent is None or run.agent == self.agent)
            and (self.tool is None or self.tool in run.tool_names)
            and (self.has_error is None or self.has_error == (run.error_message is not None))
            and (not self.error_codes or run.error_code in self.error_codes)
            and (self.redacted is None or self.redacted == bool(run.redactions))
        )


@dataclass(frozen=True, slots=True)
class EventFilter:
    """What a read of one run's events may be filtered by (every field given: all)."""

    # `?type=`: exact types.
    types: tuple[str, ...] = ()
    # `?types=` (exact types and `PREFIX*`), on top of `types`.
    patterns: TypeFilter | None = None
    # Half-open, like run listings: received_after <= received_at < received_before.
    received_after: datetime | None = None
    received_before: datetime | None = None

    def __post_init__(self) -> None:
        # Stored types went through `storable`; so do the ones asked for.
        object.__setattr__(self, "types", tuple(storable(t) for t in self.types))
        for name in ("received_after", "received_before"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, utc(value))

    @property
    def empty(self) -> bool:
        return (
            not self.types
            and (self.patterns is None or self.patterns.everything)
            and self.received_after is None
            and self.received_before is None
        )

    def passes_type(self, kind: str) -> bool:
        return (not self.types or kind in self.types) and (
            self.patterns is None or self.patterns.matches(kind)
        )

    def passes(self, kind: str, received_at: datetime) -> bool:
        return (
            self.passes_type(kind)
            and (self.received_after is None or received_at >= self.received_after)
            and (self.received_before is None or received_at < self.received_before)
        )
