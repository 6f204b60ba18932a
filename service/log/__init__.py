"""The durable event log: runs, events, appends (group commit) and reads.

Nothing here knows about HTTP, SSE or projections.
"""

from service.log import leases
from service.log.chunks import StoredChunk
from service.log.eventlog import MAX_SEQ, Event, EventLog, Run, check_run_id
from service.log.writer import AppendResult

__all__ = [
    "MAX_SEQ",
    "AppendResult",
    "Event",
    "EventLog",
    "Run",
    "StoredChunk",
    "check_run_id",
    "leases",
]
