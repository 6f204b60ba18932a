"""The durable event log: runs, events, appends (group commit), reads, leases, notifications.

This package owns PostgreSQL: every asyncpg call, every statement
(`queries.sql`), the LISTEN connection and the translation of driver errors
(`faults`). Other layers get a `LogStore` (`store`), or the roles of it they
use, never a pool or a connection; the values it takes and answers are in
`values`. Nothing here knows about HTTP, SSE or projections.
"""

from agent_replay.log.eventlog import EventLog
from agent_replay.log.store import (
    MAX_SEQ,
    Administration,
    Appends,
    AuditReads,
    Erasure,
    Leases,
    Listening,
    LogStore,
    ReaderPresence,
    Reads,
    RunStates,
    check_run_id,
)
from agent_replay.log.values import (
    AppendResult,
    CommitHook,
    Event,
    Held,
    Notice,
    Page,
    PoolStats,
    Redaction,
    Row,
    Run,
    RunState,
    StoredChunk,
    ThreadRun,
    Tombstone,
)

__all__ = [
    "MAX_SEQ",
    "Administration",
    "AppendResult",
    "Appends",
    "AuditReads",
    "CommitHook",
    "Erasure",
    "Event",
    "EventLog",
    "Held",
    "Leases",
    "Listening",
    "LogStore",
    "Notice",
    "Page",
    "PoolStats",
    "ReaderPresence",
    "Reads",
    "Redaction",
    "Row",
    "Run",
    "RunState",
    "RunStates",
    "StoredChunk",
    "ThreadRun",
    "Tombstone",
    "check_run_id",
]
