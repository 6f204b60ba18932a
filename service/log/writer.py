"""Adaptive group commit: many producers' appends, one transaction.

Producers enqueue; each of a few commit lanes takes *whatever is queued* when
it is free and commits it as one statement (no fixed waiting window: under
light load a group is one append and commits at once; under heavy load a group
is everything that arrived during the previous commit). One fsync then
acknowledges many producers.

Per-run order is kept: a lane never takes a run that another lane has in
flight, so appends for one run commit in the order they were submitted. An
append that carries `expected_seq` or `close` ends its run's share of a group,
because whether it fits depends on everything before it.

After a group commits, and before its producers are acknowledged, every
`on_commit` callback is called with `(run_id, last_seq, closed)` per run the
group changed: an in-process hint (like the NOTIFY the statement queues, it
says the log *may* be at `last_seq`; readers still read the table).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import orjson

from service import metrics
from service.errors import RunClosed, RunNotFound, SeqConflict, Unavailable
from service.log import sql
from service.log.chunks import StoredChunk, loads, storable
from service.log.faults import translate
from service.log.store import CommitHook
from service.log.summary import TOKEN_COLUMNS, Summary, summarize

log = logging.getLogger("replay.log")

_RUN_STATES = sql.QUERIES["run_states"]
_CREATE_RUN_IF_MISSING = sql.QUERIES["create_run_if_missing"]
_STORED_RANGE = sql.QUERIES["stored_range"]


@dataclass(frozen=True, slots=True)
class AppendResult:
    run_id: str
    # None when the append carried no chunks (a bare close).
    first_seq: int | None
    last_seq: int


@dataclass(slots=True)
class _Pending:
    run_id: str
    chunks: list[StoredChunk]
    expected_seq: int | None
    close: bool
    create: bool
    # With close: the status to record instead of finished/error (cancelled, interrupted).
    close_status: str | None
    future: asyncio.Future[AppendResult] = field(repr=False)

    @property
    def ends_group(self) -> bool:
        return self.expected_seq is not None or self.close


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: Python's `==` would call `true` equal to `1`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_json_equal, a, b))
    return (type(a) is type(b) and a == b) or (
        isinstance(a, int | float) and isinstance(b, int | float) and a == b
    )


def _thread_of(chunks: list[StoredChunk]) -> str | None:
    """A RUN_STARTED chunk's threadId: a run created by its first append takes it."""
    for chunk in chunks:
        if chunk.type == "RUN_STARTED":
            thread = loads(chunk.text).get("threadId")
            return storable(thread) if isinstance(thread, str) else None
    return None


# From this many events a group takes the COPY path (see service.log.sql): COPY
# has a fixed cost (asyncpg looks the table up on each call) that pays off only
# for big groups; below this, unnesting arrays in one statement is faster.
_COPY_MIN_EVENTS = 1000

# The requests as JSON (see service.log.sql) and their run ids; the events' columns.
Plan = tuple[str, list[str]]
Events = tuple[list[Any], ...]


def _request(count: int, summary: Summary) -> dict[str, Any]:
    """A run's share of a group, as the append statement reads it (see service.log.sql)."""
    request: dict[str, Any] = {"n": count}
    if summary.terminal is not None:
        request["terminal"] = summary.terminal
        if summary.error is not None:
            request["error"] = summary.error
    if summary.tools:
        request["tools"] = summary.tools
    for column, value in zip(TOKEN_COLUMNS, summary.usage, strict=True):
        if value is not None:
            request[column] = value
    return request


class GroupCommitter:
    def __init__(self, pool: asyncpg.Pool, *, lanes: int = 4, max_events: int = 1000) -> None:
        self._pool = pool
        self._queue: deque[_Pending] = deque()
        self._inflight: set[str] = set()
        self._wake = asyncio.Event()
        self._max_events = max_events
        self._hooks: list[CommitHook] = []
        self._lanes = [
            asyncio.create_task(self._lane(), name=f"commit-lane-{i}") for i in range(lanes)
        ]

    async def close(self) -> None:
        for task in self._lanes:
            task.cancel()
        for task in self._lanes:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for item in self._queue:
            if not item.future.done():
                item.future.set_exception(Unavailable("the event log is shutting down"))
        self._queue.clear()

    def on_commit(self, hook: CommitHook) -> Callable[[], None]:
        """Call `hook(run_id, last_seq, closed)` after each commit; returns the remover."""
        self._hooks.append(hook)
        return lambda: self._hooks.remove(hook)

    def _announce(self, run_id: str, last_seq: int, closed: bool) -> None:
        for hook in self._hooks:
            try:
                hook(run_id, last_seq, closed)
            except Exception:  # a hint's failure must not fail a committed append
                log.exception("on_commit hook failed for run %s", run_id)

    def submit(
        self,
        run_id: str,
        chunks: list[StoredChunk],
        *,
        expected_seq: int | None,
        close: bool,
        create: bool,
        close_status: str | None = None,
    ) -> asyncio.Future[AppendResult]:
        future: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        self._queue.append(
            _Pending(run_id, chunks, expected_seq, close, create, close_status, future)
        )
        self._wake.set()
        return future

    def _take(self) -> dict[str, list[_Pending]]:
        group: dict[str, list[_Pending]] = {}
        blocked = set(self._inflight)
        kept: deque[_Pending] = deque()
        size = 0
        for item in self._queue:
            run = item.run_id
            taken = group.get(run)
            if (
                run in blocked
                or (size and size + len(item.chunks) > self._max_events)
                or (taken is not None and item.expected_seq is not None)
            ):
                kept.append(item)
                blocked.add(run)
                continue
            group.setdefault(run, []).append(item)
            size += len(item.chunks)
            if item.ends_group:
                blocked.add(run)
        self._queue = kept
        return group

    async def _lane(self) -> None:
        while True:
            group = self._take()
            if not group:
                self._wake.clear()
                await self._wake.wait()
                continue
            self._inflight.update(group)
            try:
                await self._commit(group)
            except Exception as exc:  # a lane must outlive any one group
                error = translate("the event log could not commit", exc)
                for items in group.values():
                    for item in items:
                        if not item.future.done():
                            item.future.set_exception(error)
            finally:
                self._inflight.difference_update(group)
                # Whatever waited on these runs may go now.
                self._wake.set()

    async def _commit(self, group: dict[str, list[_Pending]]) -> None:
        runs = list(group)
        requests: dict[str, dict[str, Any]] = {}
        ev_run: list[str] = []
        ev_ord: list[int] = []
        ev_type: list[str] = []
        ev_text: list[str] = []
        ev_msg: list[str | None] = []
        ev_tool: list[str | None] = []
        for run in runs:
            items = group[run]
            n = 0
            for item in items:
                chunks = item.chunks
                if not chunks:
                    continue
                # Columns by transposition: C speed, the hot loop of big batches.
                types, texts, message_ids, tool_call_ids = zip(*chunks, strict=True)
                ev_type.extend(types)
                ev_text.extend(texts)
                ev_msg.extend(message_ids)
                ev_tool.extend(tool_call_ids)
                ev_ord.extend(range(n + 1, n + len(chunks) + 1))
                n += len(chunks)
            ev_run.extend([run] * n)
            request = _request(n, summarize(chunk for item in items for chunk in item.chunks))
            if items[0].expected_seq is not None:
                request["expected"] = items[0].expected_seq
            if items[-1].close:
                request["close"] = True
                if items[-1].close_status is not None:
                    request["status"] = items[-1].close_status
            requests[run] = request

        plan = (orjson.dumps(requests).decode(), runs)
        events = (ev_run, ev_ord, ev_type, ev_text, ev_msg, ev_tool)
        if len(ev_text) >= _COPY_MIN_EVENTS:
            rows = await self._retrying(self._bump_and_copy, plan, events)
        else:
            rows = await self._retrying(self._append_statement, plan, events)
        bases = {row["run_id"]: row["base"] for row in rows}
        refused: dict[str, list[_Pending]] = {}
        committed = 0
        for run, items in group.items():
            base = bases.get(run)
            if base is None:
                refused[run] = items
                continue
            added = sum(len(item.chunks) for item in items)
            committed += added
            if self._hooks:
                # Before the acknowledgements: a local follower is woken by the
                # commit itself, not by the NOTIFY's round trip through the server.
                self._announce(run, base + added, items[-1].close)
            for item in items:
                first = base + 1
                base += len(item.chunks)
                item.future.set_result(AppendResult(run, first if item.chunks else None, base))
        if committed:
            metrics.EVENTS_APPENDED.inc(committed)
            metrics.GROUP_COMMIT_EVENTS.observe(committed)
        if refused:
            await self._explain(refused)

    async def _retrying(
        self,
        attempt: Callable[[Plan, Events], Awaitable[list[asyncpg.Record]]],
        plan: Plan,
        events: Events,
    ) -> list[asyncpg.Record]:
        for tries in range(5):
            try:
                return await attempt(plan, events)
            except asyncpg.DeadlockDetectedError:
                # Another process's group locked our runs in another order.
                if tries == 4:
                    raise
        raise AssertionError("unreachable")

    async def _append_statement(self, plan: Plan, events: Events) -> list[asyncpg.Record]:
        async with self._pool.acquire() as conn:
            return list(await conn.fetch(sql.APPEND, *events, *plan))

    async def _bump_and_copy(self, plan: Plan, events: Events) -> list[asyncpg.Record]:
        async with self._pool.acquire() as conn, conn.transaction():
            rows = list(await conn.fetch(sql.BUMP, *plan))
            bases = {row["run_id"]: row["base"] for row in rows}
            records = [
                (run, bases[run] + ord_, kind, text, message_id, tool_call_id)
                for run, ord_, kind, text, message_id, tool_call_id in zip(*events, strict=True)
                if run in bases
            ]
            await conn.copy_records_to_table(
                "events", records=records, columns=list(sql.EVENT_COLUMNS)
            )
        return rows

    async def _explain(self, refused: dict[str, list[_Pending]]) -> None:
        """Settle appends the statement did not apply: missing, closed, or misfit runs."""
        async with self._pool.acquire() as conn:
            states = {r["run_id"]: r for r in await conn.fetch(_RUN_STATES, list(refused))}
            requeue: list[_Pending] = []
            for run, items in refused.items():
                state = states.get(run)
                if state is None:
                    if all(item.create for item in items):
                        thread = _thread_of(items[0].chunks)
                        await conn.execute(_CREATE_RUN_IF_MISSING, run, thread)
                        requeue.extend(items)
                    else:
                        for item in items:
                            item.future.set_exception(RunNotFound(run))
                    continue
                head = items[0]
                if head.expected_seq is not None:
                    # Only one append per group carries expected_seq for a run.
                    if await self._already_stored(conn, head):
                        count = len(head.chunks)
                        head.future.set_result(
                            AppendResult(
                                run,
                                head.expected_seq if count else None,
                                head.expected_seq + count - 1,
                            )
                        )
                    elif state["closed"]:
                        head.future.set_exception(RunClosed(run, state["last_seq"]))
                    else:
                        head.future.set_exception(
                            SeqConflict(run, head.expected_seq, state["last_seq"])
                        )
                    continue
                if state["closed"]:
                    for item in items:
                        if item.close and not item.chunks:
                            # Closing a closed run is a no-op, not an error.
                            item.future.set_result(AppendResult(run, None, state["last_seq"]))
                        else:
                            item.future.set_exception(RunClosed(run, state["last_seq"]))
                    continue
                # Open, no expectation, yet not applied: it was closed or
                # created between our read and the statement. Try again.
                requeue.extend(items)
        if requeue:
            # Back to the front, in submission order, ahead of later appends.
            self._queue.extendleft(reversed(requeue))

    @staticmethod
    async def _already_stored(conn: asyncpg.pool.PoolConnectionProxy, item: _Pending) -> bool:
        assert item.expected_seq is not None
        count = len(item.chunks)
        if count == 0:
            return False
        stored = await conn.fetch(
            _STORED_RANGE, item.run_id, item.expected_seq, item.expected_seq + count - 1
        )
        return len(stored) == count and all(
            _json_equal(loads(row["chunk"]), loads(chunk.text))
            for row, chunk in zip(stored, item.chunks, strict=True)
        )
