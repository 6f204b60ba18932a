"""`EventLog`: the one way into and out of the log.

The HTTP layer and in-process producers share it, so there is one append
path:

    async with EventLog.connect(url) as log:
        await log.append("run-1", [{"type": "RUN_STARTED", ...}])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

import asyncpg

from service.config import asyncpg_dsn
from service.errors import InvalidRequest, InvalidRunId, RunConflict, RunNotFound, Unavailable
from service.log import sql
from service.log.chunks import StoredChunk, dumps, loads, storable, stored
from service.log.summary import BIGINT_MAX
from service.log.writer import AppendResult, CommitHook, GroupCommitter

RUN_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def check_run_id(run_id: str) -> str:
    if not RUN_ID.fullmatch(run_id):
        raise InvalidRunId(
            f"run id {run_id[:140]!r} must be 1-128 characters of A-Z a-z 0-9 . _ : -"
        )
    return run_id


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
    lease_owner: str | None
    lease_expires_at: datetime | None
    tool_names: list[str]
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None

    @classmethod
    def from_record(cls, row: asyncpg.Record | Mapping[str, Any]) -> Run:
        fields = dict(row)
        fields["metadata"] = loads(fields["metadata"])
        return cls(**fields)

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
            "tool_names": self.tool_names,
            "usage": None
            if self.total_tokens is None and self.prompt_tokens is None
            else {
                "promptTokens": self.prompt_tokens,
                "completionTokens": self.completion_tokens,
                "totalTokens": self.total_tokens,
            },
        }


@dataclass(frozen=True, slots=True)
class Event:
    seq: int
    type: str
    chunk: str  # the stored JSON text
    received_at: datetime


def _stored_chunks(chunks: Iterable[StoredChunk | Mapping[str, Any]]) -> list[StoredChunk]:
    return [c if isinstance(c, StoredChunk) else stored(c, i) for i, c in enumerate(chunks)]


# Seqs are bigint: a position past this can be neither stored nor asked for.
MAX_SEQ = BIGINT_MAX


class PooledConnection(asyncpg.Connection):
    """A pool connection released without asyncpg's reset query.

    The reset (unlock advisory locks, close cursors, UNLISTEN, RESET ALL) is a
    round trip on every release: one more per group commit and per stream
    read. Nothing here leaves session state on a pooled connection (no SET,
    LISTEN or advisory lock; cursors live inside transactions), and asyncpg
    still rolls back a transaction left open, so there is nothing to reset.
    """

    def get_reset_query(self) -> str:
        return ""


class EventLog:
    """A pool, a group committer and the log's reads."""

    def __init__(self, pool: asyncpg.Pool, *, commit_lanes: int = 4, group_max_events: int = 1000):
        self.pool = pool
        self._committer = GroupCommitter(pool, lanes=commit_lanes, max_events=group_max_events)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        pool_size: int = 10,
        commit_lanes: int = 4,
        group_max_events: int = 1000,
    ) -> EventLog:
        try:
            pool = await asyncpg.create_pool(
                asyncpg_dsn(url),
                min_size=min(2, pool_size),
                max_size=pool_size,
                connection_class=PooledConnection,
            )
        except (OSError, asyncpg.PostgresError) as exc:
            raise Unavailable(f"cannot connect to the database: {exc}") from exc
        return cls(pool, commit_lanes=commit_lanes, group_max_events=group_max_events)

    @classmethod
    def connect(cls, url: str, **options: Any) -> _Opening:
        return _Opening(url, options)

    def on_commit(self, hook: CommitHook) -> Callable[[], None]:
        """Call `hook(run_id, last_seq, closed)` after each group this process commits.

        A hint for in-process followers (the stream's hub), called before the
        appends are acknowledged and on the committer's task, so it must be
        quick and must not block. Like a notification it says the log *may*
        be at `last_seq`; it never replaces reading the table. Returns a
        function that removes the hook.
        """
        return self._committer.on_commit(hook)

    async def close(self) -> None:
        await self._committer.close()
        await self.pool.close()

    async def append(
        self,
        run_id: str,
        chunks: Sequence[StoredChunk | Mapping[str, Any]],
        *,
        expected_seq: int | None = None,
        close: bool = False,
        create: bool = True,
        close_status: str | None = None,
    ) -> AppendResult:
        """Append chunks durably; returns once committed.

        `expected_seq` makes a retry safe: the batch must start at that seq,
        or be already stored there with equal content (then nothing is added).
        `create` makes a missing run (taking a RUN_STARTED chunk's threadId).
        `close_status` (with `close`) records cancelled / interrupted instead of
        the status the last terminal chunk implies.
        """
        check_run_id(run_id)
        if expected_seq is not None and not 1 <= expected_seq <= MAX_SEQ:
            raise InvalidRequest(f"expected_seq must be from 1 to {MAX_SEQ}")
        return await self._committer.submit(
            run_id,
            _stored_chunks(chunks),
            expected_seq=expected_seq,
            close=close,
            create=create,
            close_status=close_status,
        )

    async def close_run(self, run_id: str) -> Run:
        """Close a run's log (idempotent). Goes through the committer, after pending appends."""
        check_run_id(run_id)
        await self._committer.submit(run_id, [], expected_seq=None, close=True, create=False)
        return await self.get_run(run_id)

    async def create_run(
        self,
        run_id: str,
        *,
        thread_id: str | None = None,
        agent: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        input: Any = None,
    ) -> tuple[Run, bool]:
        """Create a run; idempotent. Returns (run, created). An existing run
        with different thread or metadata is a conflict."""
        check_run_id(run_id)
        # As a RUN_STARTED chunk's threadId is stored: lookups sanitize alike.
        thread_id = None if thread_id is None else storable(thread_id)
        agent = None if agent is None else storable(agent)
        meta = dict(metadata or {})
        meta_text = dumps(meta)
        input_text = None if input is None else dumps(input)
        async with self.pool.acquire() as conn:
            try:
                created = await conn.fetchval(
                    sql.CREATE_RUN, run_id, thread_id, agent, meta_text, input_text
                )
            except asyncpg.DataError as exc:
                raise InvalidRequest(f"metadata cannot be stored: {exc}") from exc
            except asyncpg.UntranslatableCharacterError as exc:
                raise InvalidRequest(f"metadata cannot be stored: {exc}") from exc
            row = await conn.fetchrow(sql.GET_RUN, run_id)
        assert row is not None  # just inserted or already there; runs are only pruned when closed
        run = Run.from_record(row)
        if not created and (
            (thread_id is not None and run.thread_id != thread_id)
            or (metadata is not None and run.metadata != meta)
        ):
            raise RunConflict(
                f"run {run_id!r} exists with another thread_id or metadata",
                thread_id=run.thread_id,
            )
        return run, created is not None

    async def find_run(self, run_id: str) -> Run | None:
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(sql.GET_RUN, run_id)
        return None if row is None else Run.from_record(row)

    async def get_run(self, run_id: str) -> Run:
        check_run_id(run_id)
        run = await self.find_run(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    async def read_events(self, run_id: str, after: int = 0, limit: int = 1000) -> list[Event]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(sql.READ_EVENTS, run_id, after, limit)
        return [Event(r["seq"], r["type"], r["chunk"], r["received_at"]) for r in rows]


class _Opening:
    """`async with EventLog.connect(url) as log:` opens and closes the log."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self._url = url
        self._options = options
        self._log: EventLog | None = None

    async def __aenter__(self) -> EventLog:
        self._log = await EventLog.open(self._url, **self._options)
        return self._log

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._log is not None:
            await self._log.close()

    def __await__(self) -> Any:
        return EventLog.open(self._url, **self._options).__await__()
