"""The log's values: what its contract (`agent_replay.log.store`) takes and answers.

Plain data, nothing more: no module of the log is imported here, so the
contract and every implementation of it (`agent_replay.log.eventlog`, the
in-memory `agent_replay.log.memory`) import their values from one place and
from nothing of each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, NamedTuple

# (seq, stored chunk JSON text): what replay sends, as the log keeps it.
Row = tuple[int, str]

# (run_id, last_seq, closed), called on the committer's task: must not block.
CommitHook = Callable[[str, int, bool], None]

# (run_id, rows, last_seq, closed): the rows one commit added to the run (seqs up
# to last_seq, as stored; empty for a bare close), called after that commit, in
# commit order per run, on the committer's task: must not block. rows is None
# for a commit whose rows are not at hand (one made outside the group
# committer): that call is only a hint, as `on_commit`'s.
CommitRowsHook = Callable[[str, list[Row] | None, int, bool], None]


class StoredChunk(NamedTuple):
    """One event as an append stores it. A tuple, not a dataclass: the hot path builds
    one per chunk. Make it with `agent_replay.log.chunks.stored`."""

    type: str
    text: str
    message_id: str | None
    tool_call_id: str | None


class AppendResult(NamedTuple):
    """Where an append's chunks went. A named tuple, not a frozen dataclass: one is made
    per append, and a frozen dataclass sets each field through `object.__setattr__`."""

    run_id: str
    # None when the append carried no chunks (a bare close).
    first_seq: int | None
    last_seq: int


class Notice(NamedTuple):
    """Another process's commit, as a notification tells it: a hint, never the truth."""

    run_id: str
    last_seq: int
    closed: bool


class ThreadRun(NamedTuple):
    """A run of a thread, in the thread's order (`LogStore.thread_runs`), and its state."""

    run_id: str
    last_seq: int
    closed: bool
    created_at: datetime

    @property
    def position(self) -> tuple[datetime, str]:
        """Its place in the thread's order (`LogStore.thread_runs(after=...)`)."""
        return self.created_at, self.run_id


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    thread_id: str | None
    agent: str | None
    status: str
    last_seq: int
    closed: bool
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    metadata: dict[str, Any]
    last_terminal: str | None
    error_message: str | None
    error_code: str | None  # the code of that RUN_ERROR (`cancelled`, `abandoned`, ...)
    lease_owner: str | None
    lease_expires_at: datetime | None
    tool_names: list[str]
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    # A hosted run's disconnect policy (None: not hosted) and its readers' last leave.
    on_disconnect: str | None = None
    grace_seconds: float | None = None
    reader_left_at: datetime | None = None
    # Matches replaced per redaction rule (None: none), never the text.
    redactions: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "agent": self.agent,
            "status": self.status,
            "last_seq": self.last_seq,
            "closed": self.closed,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "closed_at": self.closed_at.isoformat() if self.closed_at else None,
            "metadata": self.metadata,
            "error": self.error_message,
            "error_code": self.error_code,
            "tool_names": self.tool_names,
            "usage": None
            if self.total_tokens is None and self.prompt_tokens is None
            else {
                "promptTokens": self.prompt_tokens,
                "completionTokens": self.completion_tokens,
                "totalTokens": self.total_tokens,
            },
            "on_disconnect": None
            if self.on_disconnect is None
            else {
                "policy": self.on_disconnect,
                **({"grace_seconds": self.grace_seconds} if self.grace_seconds is not None else {}),
                "reader_left_at": self.reader_left_at.isoformat() if self.reader_left_at else None,
            },
            "redactions": self.redactions or {},
        }


@dataclass(frozen=True, slots=True)
class Held:
    """A run's redaction hold as the primary has it (`Appends.read_hold`): the text
    redaction holds back for the run's open messages, as ingest wrote it (opaque to the
    log; None: nothing held), with the run's last seq and whether it is closed."""

    last_seq: int
    closed: bool
    hold: str | None


@dataclass(frozen=True, slots=True)
class Redaction:
    """What redaction writes with an append, in the append's own statement.

    `counts`: matches replaced per rule, added to the run's. `read`: the run as the hold
    was read; given, the append is stored only if the run's last seq and hold are still
    exactly those (else `RedactionConflict`, or what `expected_seq` answers), and `hold`
    becomes the run's hold (None: nothing held)."""

    counts: Mapping[str, int]
    read: Held | None = None
    hold: str | None = None


@dataclass(frozen=True, slots=True)
class Event:
    seq: int
    type: str
    chunk: str  # the stored JSON text
    received_at: datetime


@dataclass(frozen=True, slots=True)
class RunState:
    last_seq: int
    closed: bool
    # Where a caller compares it (the writer settling a refused append).
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Page:
    """Events after a cursor and the run's state, from one snapshot."""

    state: RunState
    rows: list[Row]

    @property
    def complete(self) -> bool:
        """Nothing after this page will ever exist."""
        end = self.rows[-1][0] if self.rows else None
        return self.state.closed and (end is None or end >= self.state.last_seq)


@dataclass(frozen=True, slots=True)
class PoolStats:
    """The store's database connections, for the metrics gauges."""

    in_use: int
    size: int
    max_size: int


@dataclass(frozen=True, slots=True)
class Absence:
    """A run's readers as the log knows them."""

    readers: int  # processes with a follower of the run right now
    closed: bool
    left_at: datetime | None  # when its last reader left (None: never read)
    absent_seconds: float  # how long nobody has read it (since its start, if never)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run's stored fields, as an export describes it."""

    run_id: str
    thread_id: str | None
    agent: str | None
    status: str
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    last_seq: int
    error_message: str | None
    metadata: dict[str, Any]
    input: str | None  # RunAgentInput JSON text
    # The code of its last terminal RUN_ERROR (derived from the events, as appends keep it).
    error_code: str | None = None


class LoggedEvent(NamedTuple):
    chunk: StoredChunk
    received_at: datetime


@dataclass(frozen=True, slots=True)
class LoadedRun:
    record: RunRecord
    events: Sequence[LoggedEvent]  # seq 1..n in order
    # Matches the import's redaction replaced, per rule (agent_replay.ingest.imported).
    redactions: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True)
class LoadReport:
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PruneReport:
    runs: int = 0
    events: int = 0
    oldest: datetime | None = None
    newest: datetime | None = None
    batches: int = 0
    # Monthly partitions of `events` dropped whole (or, counting, that would be).
    partitions: list[date] = field(default_factory=list)
    # Past months kept, with why (open runs, runs closed since the date, forks).
    held: dict[date, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A run's hash chain, checked against its stored events (agent_replay.log.integrity).

    `events` the events read, `head` the run's stored head (hex; None while the run is
    not chained yet), `first_bad_seq` the first event found altered or missing and
    `reason` why (one of agent_replay.log.integrity.REASONS): both None when intact.
    """

    run_id: str
    ok: bool
    events: int
    head: str | None
    first_bad_seq: int | None
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "events": self.events,
            "head": self.head,
            "first_bad_seq": self.first_bad_seq,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What remains of an erased run (`LogStore.erase_thread`): no event, input or
    metadata, only how many events it held and their chain head (hex,
    `agent_replay.chain`) when it was erased, when, by whom and why."""

    run_id: str
    thread_id: str | None
    events: int
    head: str
    erased_at: datetime
    # The API key's id (`key:<digest prefix>`), `open` (no keys configured) or the
    # CLI's `cli:<user>`: never a secret.
    erased_by: str
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "events": self.events,
            "head": self.head,
            "erased_at": self.erased_at.isoformat(),
            "erased_by": self.erased_by,
            "reason": self.reason,
        }
