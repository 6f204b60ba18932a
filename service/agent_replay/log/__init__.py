"""The durable event log: runs, events, appends (group commit), reads, leases, notifications.

This package owns PostgreSQL: every asyncpg call, every statement
(`queries.sql`), the LISTEN connection and the translation of driver errors
(`faults`). Other layers get a `LogStore` (`store`), never a pool or a
connection. Nothing here knows about HTTP, SSE or projections.
"""

from agent_replay.log.chunks import StoredChunk
from agent_replay.log.eventlog import MAX_SEQ, Event, EventLog, Run, check_run_id
from agent_replay.log.notifications import Notice
from agent_replay.log.request import AppendResult
from agent_replay.log.store import CommitHook, Listening, LogStore, Page, PoolStats, Row, RunState

__all__ = [
    "MAX_SEQ",
    "AppendResult",
    "CommitHook",
    "Event",
    "EventLog",
    "Listening",
    "LogStore",
    "Notice",
    "Page",
    "PoolStats",
    "Row",
    "Run",
    "RunState",
    "StoredChunk",
    "check_run_id",
]
