"""`MemoryStore`: the log's contract kept in plain Python structures.

A second, independent implementation of `agent_replay.log.store.LogStore`: no
statement, pool or connection, nothing of PostgreSQL imported. It runs the
same contract suite as `EventLog` (`tests/log/contract.py`), which is how the
suite shows that it says everything a store must do: a promise the suite
leaves out is one this store is free to break. It also serves tests that
need a log and no database, and reads as the reference of what each member
means.

One `MemoryLog` is the shared log (what the database is to `EventLog`); each
`MemoryStore` on it is one process's handle, with its own commit hooks and
listeners, as `EventLog`s on one database are. An append is applied whole
between two awaits, so appends to a run never interleave and commit order is
seq order. A `MemoryStore` made with a `standby` (another `MemoryLog`, brought
up to date only by `MemoryLog.replay`) serves catch-up reads from it as
`EventLog` serves them from a hot standby: what the standby lacks is read
from the primary.

Where a member is about PostgreSQL itself, it answers what holds without it:
no connections (pool stats of zeros), and a schema version of its own.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_replay import chain
from agent_replay.chain import fold
from agent_replay.errors import (
    Erased,
    InvalidRequest,
    RedactionConflict,
    RunClosed,
    RunConflict,
    RunNotFound,
    SeqConflict,
    ThreadNotFound,
    Unstorable,
)
from agent_replay.log.chunks import check_nesting, dumps, loads, storable, stored
from agent_replay.log.filters import EventFilter, RunFilter
from agent_replay.log.notifications import thread_key
from agent_replay.log.store import MAX_SEQ, LogStore, check_run_id
from agent_replay.log.summary import BIGINT_MAX, summarize
from agent_replay.log.values import (
    Absence,
    AppendResult,
    CommitHook,
    CommitRowsHook,
    Event,
    Held,
    LoadedRun,
    LoadReport,
    Notice,
    Page,
    PoolStats,
    PruneReport,
    Redaction,
    Row,
    Run,
    RunRecord,
    RunState,
    StoredChunk,
    ThreadRun,
    Tombstone,
    Verdict,
)

# What `schema_version` answers: this store has no migrations, only its own shape.
SCHEMA_VERSION = "memory"

# The disconnect policies that watch a run's readers (`continue` does not).
_WATCHED = frozenset({"cancel", "cancel_after"})

_NO_CONNECTIONS = PoolStats(in_use=0, size=0, max_size=0)


def _now() -> datetime:
    return datetime.now(UTC)


def _saturated(count: int) -> int:
    return max(-BIGINT_MAX, min(BIGINT_MAX, count))


@dataclass(slots=True)
class _Run:
    """A run as the log keeps it: its fields, and its events (seq = place + 1)."""

    run_id: str
    created_at: datetime
    updated_at: datetime
    thread_id: str | None = None
    agent: str | None = None
    status: str = "running"
    closed_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    input: str | None = None
    last_terminal: str | None = None
    error_message: str | None = None
    error_code: str | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    tool_names: list[str] = field(default_factory=list)
    usage: list[int | None] = field(default_factory=lambda: [None, None, None])
    on_disconnect: str | None = None
    grace_seconds: float | None = None
    reader_left_at: datetime | None = None
    redactions: dict[str, int] = field(default_factory=dict)
    # Text redaction holds back for the run's open messages (`Redaction`), never read out.
    redaction_hold: str | None = None
    events: list[tuple[StoredChunk, datetime]] = field(default_factory=list)
    # holder -> its last heartbeat (`readers_heartbeat`).
    readers: dict[str, datetime] = field(default_factory=dict)

    @property
    def last_seq(self) -> int:
        return len(self.events)

    def run(self) -> Run:
        return Run(
            run_id=self.run_id,
            thread_id=self.thread_id,
            agent=self.agent,
            status=self.status,
            last_seq=self.last_seq,
            closed=self.closed_at is not None,
            created_at=self.created_at,
            updated_at=self.updated_at,
            closed_at=self.closed_at,
            metadata=copy.deepcopy(self.metadata),
            last_terminal=self.last_terminal,
            error_message=self.error_message,
            error_code=self.error_code,
            lease_owner=self.lease_owner,
            lease_expires_at=self.lease_expires_at,
            tool_names=list(self.tool_names),
            prompt_tokens=self.usage[0],
            completion_tokens=self.usage[1],
            total_tokens=self.usage[2],
            on_disconnect=self.on_disconnect,
            grace_seconds=self.grace_seconds,
            reader_left_at=self.reader_left_at,
            redactions=dict(self.redactions) or None,
        )

    def add(self, chunks: Sequence[StoredChunk], at: datetime) -> None:
        """`chunks` as the next events, and what they add to the run's summary."""
        self.events.extend((chunk, at) for chunk in chunks)
        summary = summarize(chunks)
        if summary.terminal is not None:
            self.last_terminal = summary.terminal
            self.error_message = summary.error if summary.terminal == "RUN_ERROR" else None
            self.error_code = summary.error_code
        if summary.tools:
            self.tool_names = sorted(set(self.tool_names) | set(summary.tools))
        for i, count in enumerate(summary.usage):
            if count is not None:
                self.usage[i] = _saturated((self.usage[i] or 0) + count)
        self.updated_at = at

    def rows(self, after: int, limit: int) -> list[Row]:
        start = min(after, len(self.events))
        return [
            (seq, chunk.text)
            for seq, (chunk, _) in enumerate(self.events[start : start + limit], start=start + 1)
        ]


class _Subscription:
    """One `listen` call's callbacks, on the handle that made it."""

    def __init__(
        self,
        log: MemoryLog,
        handle: MemoryStore,
        on_notices: Callable[[list[Notice]], None],
        on_readers_left: Callable[[list[str]], None] | None,
        on_threads: Callable[[list[str]], None] | None = None,
    ) -> None:
        self._log = log
        self.handle = handle
        self.on_notices = on_notices
        self.on_readers_left = on_readers_left
        self.on_threads = on_threads

    @property
    def listening(self) -> bool:
        return self in self._log.subscriptions

    @property
    def connects(self) -> int:
        return 1

    @property
    def listener_pid(self) -> int | None:
        return None

    async def probe(self) -> None:
        """Nothing can die silently here."""

    async def stop(self) -> None:
        if self in self._log.subscriptions:
            self._log.subscriptions.remove(self)


class MemoryLog:
    """The shared log: runs, their events, leases, readers and secrets; and who listens."""

    def __init__(self) -> None:
        self.runs: dict[str, _Run] = {}
        self.secrets: dict[str, str] = {}
        # (run_id, normalize) -> (last_seq, projector version, messages).
        self.projections: dict[tuple[str, bool], tuple[int, str, str]] = {}
        self.subscriptions: list[_Subscription] = []
        self._last_created: datetime | None = None
        self.tombstones: dict[str, Tombstone] = {}

    def refuse_erased(self, run_id: str, thread_id: str | None) -> None:
        """`Erased` for a run made under an erased run's id or on an erased thread."""
        if run_id in self.tombstones or (
            thread_id is not None
            and any(t.thread_id == thread_id for t in self.tombstones.values())
        ):
            raise Erased(f"run {run_id!r} or its thread was erased")

    def created_now(self) -> datetime:
        """A new run's `created_at`: later than every earlier run's, so a thread's order
        (`created_at, run_id`) is the order its runs were made in, as in PostgreSQL."""
        now = _now()
        last = self._last_created
        if last is not None and now <= last:
            now = last + timedelta(microseconds=1)
        self._last_created = now
        return now

    def notify_thread(self, thread_id: str | None) -> None:
        """Tell every listener (the making handle's too) a run was made on `thread_id`."""
        if thread_id is None:
            return
        key = thread_key(thread_id)
        for subscription in self.subscriptions:
            if subscription.on_threads is not None:
                asyncio.get_running_loop().call_soon(subscription.on_threads, [key])

    def replay(self, primary: MemoryLog, run_id: str) -> None:
        """Bring this log (a standby of `primary`) up to `primary`'s state of `run_id`."""
        run = primary.runs.get(run_id)
        if run is None:
            self.runs.pop(run_id, None)
        else:
            self.runs[run_id] = copy.deepcopy(run)

    def notify(self, source: MemoryStore, notice: Notice) -> None:
        """Tell every listener of a commit: another handle's always, the committing handle's
        only of a close (its hooks heard of the rest), after the commit, never within it."""
        for subscription in self.subscriptions:
            if subscription.handle is not source or notice.closed:
                asyncio.get_running_loop().call_soon(subscription.on_notices, [notice])

    def notify_left(self, run_ids: list[str]) -> None:
        for subscription in self.subscriptions:
            if subscription.on_readers_left is not None and run_ids:
                asyncio.get_running_loop().call_soon(subscription.on_readers_left, list(run_ids))


def _thread_of(chunks: Sequence[StoredChunk]) -> str | None:
    """The first RUN_STARTED chunk's threadId: a run made by its first append takes it."""
    for chunk in chunks:
        if chunk.type == "RUN_STARTED":
            thread = loads(chunk.text).get("threadId")
            return storable(thread) if isinstance(thread, str) else None
    return None


class MemoryStore:
    """One process's handle on a `MemoryLog`: a `LogStore` with no database."""

    def __init__(self, log: MemoryLog | None = None, *, standby: MemoryLog | None = None) -> None:
        self.log = MemoryLog() if log is None else log
        self.standby = standby
        # Catch-up reads the standby answered, wholly or in part.
        self.standby_reads = 0
        self._hooks: list[CommitHook] = []
        self._row_hooks: list[tuple[CommitRowsHook, Callable[[str], bool] | None]] = []

    # -- appends ----------------------------------------------------------------

    async def append(
        self,
        run_id: str,
        chunks: Sequence[StoredChunk | Mapping[str, Any]],
        *,
        expected_seq: int | None = None,
        close: bool = False,
        create: bool = True,
        close_status: str | None = None,
        redaction: Redaction | None = None,
    ) -> AppendResult:
        return self._append(run_id, chunks, expected_seq, close, create, close_status, redaction)

    def submit_append(
        self,
        run_id: str,
        chunks: Sequence[StoredChunk],
        *,
        expected_seq: int,
        create: bool = False,
        redaction: Redaction | None = None,
    ) -> asyncio.Future[AppendResult]:
        future: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        try:
            result = self._append(run_id, chunks, expected_seq, False, create, None, redaction)
            future.set_result(result)
        except Exception as exc:  # the future carries it, as `append` would raise it
            future.set_exception(exc)
        return future

    async def close_run(self, run_id: str) -> Run:
        self._append(run_id, [], None, True, False, None)
        return await self.get_run(run_id)

    async def read_hold(self, run_id: str) -> Held | None:
        run = self.log.runs.get(run_id)
        if run is None:
            return None
        return Held(run.last_seq, run.closed_at is not None, run.redaction_hold)

    def _append(
        self,
        run_id: str,
        chunks: Sequence[StoredChunk | Mapping[str, Any]],
        expected_seq: int | None,
        close: bool,
        create: bool,
        close_status: str | None,
        redaction: Redaction | None = None,
    ) -> AppendResult:
        check_run_id(run_id)
        if expected_seq is not None and not 1 <= expected_seq <= MAX_SEQ:
            raise InvalidRequest(f"expected_seq must be from 1 to {MAX_SEQ}")
        to_store = [c if isinstance(c, StoredChunk) else stored(c, i) for i, c in enumerate(chunks)]
        check_nesting(to_store)
        run = self.log.runs.get(run_id)
        if run is None:
            if run_id in self.log.tombstones:
                raise Erased(f"run {run_id!r} was erased")
            if not create:
                raise RunNotFound(run_id)
            thread = _thread_of(to_store)
            self.log.refuse_erased(run_id, thread)
            now = self.log.created_now()
            run = _Run(run_id, now, now, thread_id=thread)
            self.log.runs[run_id] = run
            self.log.notify_thread(run.thread_id)
        count, last, closed = len(to_store), run.last_seq, run.closed_at is not None
        read = redaction.read if redaction is not None else None
        moved = read is not None and (read.last_seq, read.hold) != (last, run.redaction_hold)
        if expected_seq is not None and (closed or expected_seq != last + 1 or moved):
            if count and self._stored_at(run, expected_seq, to_store):
                return AppendResult(run_id, expected_seq, expected_seq + count - 1)
            if closed:
                raise RunClosed(run_id, last)
            if moved and expected_seq == last + 1:
                raise RedactionConflict(run_id, last)
            raise SeqConflict(run_id, expected_seq, last)
        if closed:
            if close and not count:
                return AppendResult(run_id, None, last)  # closing a closed run: a no-op
            raise RunClosed(run_id, last)
        if moved:
            raise RedactionConflict(run_id, last)
        if redaction is not None:
            for rule, n in redaction.counts.items():
                run.redactions[rule] = run.redactions.get(rule, 0) + n
            if read is not None:
                run.redaction_hold = redaction.hold
        now = _now()
        run.add(to_store, now)
        if close:
            run.closed_at = now
            run.status = close_status or (
                "error" if run.last_terminal == "RUN_ERROR" else "finished"
            )
        self._committed(run, last, close)
        return AppendResult(run_id, last + 1 if count else None, run.last_seq)

    @staticmethod
    def _stored_at(run: _Run, first: int, chunks: Sequence[StoredChunk]) -> bool:
        """Whether `chunks` are stored at `first...` already (a retry), as JSON values."""
        held = run.events[first - 1 : first - 1 + len(chunks)]
        return len(held) == len(chunks) and all(
            loads(mine.text) == loads(sent.text)
            for (mine, _), sent in zip(held, chunks, strict=True)
        )

    def _committed(self, run: _Run, before: int, closed: bool) -> None:
        """Tell this handle's hooks, then every listener, of a commit."""
        run_id, last = run.run_id, run.last_seq
        for hook in list(self._hooks):
            hook(run_id, last, closed)
        if self._row_hooks:
            rows = run.rows(before, last - before)
            for row_hook, wants in list(self._row_hooks):
                if wants is None or wants(run_id):
                    row_hook(run_id, list(rows), last, closed)
        self.log.notify(self, Notice(run_id, last, closed))

    # -- reads ------------------------------------------------------------------

    async def read_events(
        self, run_id: str, after: int = 0, limit: int = 1000, *, through: int | None = None
    ) -> list[Event]:
        if through is None or self.standby is None:
            return _events(self.log, run_id, after, limit)
        want = min(after + limit, through)
        events = _events(self.standby, run_id, after, limit)
        self.standby_reads += 1
        end = events[-1].seq if events else after
        if end >= want or len(events) == limit:
            return events
        return events + _events(self.log, run_id, end, limit - len(events))

    async def read_page(
        self, run_id: str, after: int, limit: int, *, catch_up: bool = False
    ) -> Page | None:
        if not catch_up or self.standby is None:
            return _page(self.log, run_id, after, limit)
        page = _page(self.standby, run_id, after, limit)
        if page is None:
            return _page(self.log, run_id, after, limit)  # not on the standby yet
        self.standby_reads += 1
        if len(page.rows) == limit or page.complete:
            return page
        end = page.rows[-1][0] if page.rows else after
        rest = _page(self.log, run_id, end, limit - len(page.rows))
        return None if rest is None else Page(rest.state, page.rows + rest.rows)

    def on_commit(self, hook: CommitHook) -> Callable[[], None]:
        self._hooks.append(hook)
        return lambda: self._hooks.remove(hook) if hook in self._hooks else None

    def on_commit_rows(
        self, hook: CommitRowsHook, wants: Callable[[str], bool] | None = None
    ) -> Callable[[], None]:
        entry = (hook, wants)
        self._row_hooks.append(entry)
        return lambda: self._row_hooks.remove(entry) if entry in self._row_hooks else None

    async def settled(self, run_id: str) -> None:
        """An append is told to the hooks before it returns: none is ever under way."""

    async def listen(
        self,
        on_notices: Callable[[list[Notice]], None],
        on_connect: Callable[[], None],
        *,
        wait_seconds: float = 5.0,
        on_readers_left: Callable[[list[str]], None] | None = None,
        on_threads: Callable[[list[str]], None] | None = None,
    ) -> _Subscription:
        subscription = _Subscription(self.log, self, on_notices, on_readers_left, on_threads)
        self.log.subscriptions.append(subscription)
        on_connect()
        return subscription

    # -- run states -------------------------------------------------------------

    async def create_run(
        self,
        run_id: str,
        *,
        thread_id: str | None = None,
        agent: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        input: Any = None,
        on_disconnect: str | None = None,
        grace_seconds: float | None = None,
    ) -> tuple[Run, bool]:
        check_run_id(run_id)
        thread_id = None if thread_id is None else storable(thread_id)
        agent = None if agent is None else storable(agent)
        meta = dict(metadata or {})
        meta_text = dumps(meta)
        if "\\u0000" in meta_text:
            # As PostgreSQL's jsonb refuses it: a store keeps what every store can.
            raise Unstorable("metadata cannot be stored: it holds \\u0000")
        run = self.log.runs.get(run_id)
        if run is not None:
            if (
                (thread_id is not None and run.thread_id != thread_id)
                or (metadata is not None and run.metadata != loads(meta_text))
                or (agent is not None and run.agent != agent)
                or (input is not None and (run.input is None or loads(run.input) != input))
            ):
                raise RunConflict(
                    f"run {run_id!r} exists with another thread, agent, metadata or input"
                )
            return run.run(), False
        self.log.refuse_erased(run_id, thread_id)
        now = self.log.created_now()
        run = _Run(
            run_id,
            now,
            now,
            thread_id=thread_id,
            agent=agent,
            metadata=loads(meta_text),
            input=None if input is None else dumps(input),
            on_disconnect=on_disconnect,
            grace_seconds=grace_seconds,
        )
        self.log.runs[run_id] = run
        self.log.notify_thread(thread_id)
        return run.run(), True

    async def thread_runs(
        self, thread_id: str, after: tuple[datetime, str] | None = None, limit: int = 100
    ) -> list[ThreadRun]:
        thread_id = storable(thread_id)
        held = sorted(
            (run for run in self.log.runs.values() if run.thread_id == thread_id),
            key=lambda run: (run.created_at, run.run_id),
        )
        if after is not None:
            held = [run for run in held if (run.created_at, run.run_id) > after]
        return [
            ThreadRun(run.run_id, run.last_seq, run.closed_at is not None, run.created_at)
            for run in held[:limit]
        ]

    async def find_run(self, run_id: str) -> Run | None:
        run = self.log.runs.get(run_id)
        return None if run is None else run.run()

    async def get_run(self, run_id: str) -> Run:
        check_run_id(run_id)
        run = self.log.runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run.run()

    async def read_states(self, run_ids: Sequence[str]) -> dict[str, RunState]:
        runs = self.log.runs
        return {
            run_id: RunState(run.last_seq, run.closed_at is not None, run.created_at)
            for run_id in run_ids
            if (run := runs.get(run_id)) is not None
        }

    # -- leases -----------------------------------------------------------------

    def _lease(self, run_id: str, owner: str, seconds: float, may: Callable[[_Run], bool]) -> bool:
        run = self.log.runs.get(run_id)
        if run is None or run.closed_at is not None or not may(run):
            return False
        now = _now()
        run.lease_owner, run.lease_expires_at = owner, now + timedelta(seconds=seconds)
        run.updated_at = now
        return True

    @staticmethod
    def _expired(run: _Run) -> bool:
        return run.lease_expires_at is not None and run.lease_expires_at < _now()

    async def claim_lease(self, run_id: str, owner: str, seconds: float) -> bool:
        return self._lease(
            run_id,
            owner,
            seconds,
            lambda run: run.lease_owner in (None, owner) or self._expired(run),
        )

    async def claim_expired_lease(self, run_id: str, owner: str, seconds: float) -> bool:
        return self._lease(run_id, owner, seconds, self._expired)

    async def renew_lease(self, run_id: str, owner: str, seconds: float) -> bool:
        return self._lease(run_id, owner, seconds, lambda run: run.lease_owner == owner)

    async def renew_leases(self, run_ids: list[str], owner: str, seconds: float) -> set[str]:
        return {run_id for run_id in run_ids if await self.renew_lease(run_id, owner, seconds)}

    async def expired_leases(self, limit: int = 100) -> list[str]:
        expired = [
            run
            for run in self.log.runs.values()
            if run.closed_at is None and run.lease_owner is not None and self._expired(run)
        ]
        expired.sort(key=lambda run: run.lease_expires_at or run.created_at)
        return [run.run_id for run in expired[:limit]]

    async def orphaned_leases(self, instance: str, owner: str) -> list[str]:
        return [
            run.run_id
            for run in self.log.runs.values()
            if run.closed_at is None
            and run.lease_owner is not None
            and run.lease_owner.startswith(instance)
            and run.lease_owner != owner
        ]

    async def take_over_lease(self, run_id: str, owner: str, seconds: float, instance: str) -> bool:
        return self._lease(
            run_id,
            owner,
            seconds,
            lambda run: run.lease_owner is not None and run.lease_owner.startswith(instance),
        )

    # -- reader presence --------------------------------------------------------

    async def readers_heartbeat(self, holder: str, run_ids: Sequence[str]) -> list[str]:
        now, beaten = _now(), []
        for run_id in dict.fromkeys(run_ids):
            run = self.log.runs.get(run_id)
            if run is not None and run.closed_at is None and run.on_disconnect in _WATCHED:
                run.readers[holder] = now
                beaten.append(run_id)
        return beaten

    async def readers_left(
        self, holder: str, run_ids: Sequence[str], fresh_seconds: float
    ) -> list[str]:
        now, unread = _now(), []
        fresh_since = now - timedelta(seconds=fresh_seconds)
        for run_id in dict.fromkeys(run_ids):
            run = self.log.runs.get(run_id)
            if run is None or run.readers.pop(holder, None) is None:
                continue
            if run.closed_at is None and not any(
                seen > fresh_since for seen in run.readers.values()
            ):
                run.reader_left_at = now
                unread.append(run_id)
        self.log.notify_left(unread)
        return unread

    async def reader_absence(self, run_id: str, fresh_seconds: float) -> Absence | None:
        run = self.log.runs.get(run_id)
        if run is None:
            return None
        now = _now()
        fresh_since = now - timedelta(seconds=fresh_seconds)
        stale = [seen for seen in run.readers.values() if seen <= fresh_since]
        run.readers = {h: seen for h, seen in run.readers.items() if seen > fresh_since}
        if stale and not run.readers:
            # A dead holder's last beat is when its reader left.
            last = max(stale)
            if run.reader_left_at is None or run.reader_left_at < last:
                run.reader_left_at = last
        since = run.reader_left_at or run.created_at
        return Absence(
            len(run.readers),
            run.closed_at is not None,
            run.reader_left_at,
            (now - since).total_seconds(),
        )

    # -- audit and archive reads --------------------------------------------------

    async def list_runs(
        self, f: RunFilter, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Run]:
        """From the standby when there is one, as `EventLog` lists (a listing may lag)."""
        log = self.log if self.standby is None else self.standby
        found = sorted(
            (run for run in log.runs.values() if f.matches(run.run())),
            key=lambda run: (run.created_at, run.run_id),
            reverse=True,
        )
        if after is not None:
            found = [run for run in found if (run.created_at, run.run_id) < after]
        return [run.run() for run in found[:limit]]

    async def read_filtered(
        self, run_id: str, f: EventFilter, after: int = 0, limit: int = 1000
    ) -> list[Event]:
        run = self.log.runs.get(run_id)
        if run is None:
            return []
        passing = [
            Event(seq, chunk.type, chunk.text, at)
            for seq, (chunk, at) in enumerate(run.events[after:], start=after + 1)
            if f.passes(chunk.type, at)
        ]
        return passing[:limit]

    async def run_record(self, run_id: str) -> RunRecord | None:
        run = self.log.runs.get(run_id)
        return None if run is None else _record(run)

    async def thread_records(self, thread_id: str) -> list[RunRecord]:
        thread_id = storable(thread_id)
        held = [run for run in self.log.runs.values() if run.thread_id == thread_id]
        return [_record(run) for run in sorted(held, key=lambda r: (r.created_at, r.run_id))]

    async def verify_run(self, run_id: str) -> Verdict | None:
        """Nothing but this process changes what it holds: every chain it keeps is intact."""
        run = self.log.runs.get(run_id)
        if run is None:
            return None
        head = fold((seq, chunk.text) for seq, (chunk, _) in enumerate(run.events, start=1))
        return Verdict(run_id, True, run.last_seq, head.hex(), None, None)

    async def cached_projections(
        self, last_seqs: Mapping[str, int], normalize: bool, version: str
    ) -> dict[str, str]:
        found = {}
        for run_id, last_seq in last_seqs.items():
            cached = self.log.projections.get((run_id, normalize))
            if cached is not None and cached[:2] == (last_seq, version):
                found[run_id] = cached[2]
        return found

    async def store_projections(
        self, made: Sequence[tuple[str, int, str]], normalize: bool, version: str
    ) -> None:
        for run_id, last_seq, messages in made:
            if run_id not in self.log.tombstones:  # erased since its events were read
                self.log.projections[run_id, normalize] = (last_seq, version, messages)

    # -- administration ---------------------------------------------------------

    async def load_runs(self, runs: Sequence[LoadedRun]) -> LoadReport:
        report = LoadReport()
        by_id = {run.record.run_id: run for run in runs}
        for run_id in sorted(by_id):  # all checked before any is stored: all or nothing
            held = self.log.runs.get(run_id)
            if held is not None:
                _check_same(held, by_id[run_id])
                report.unchanged.append(run_id)
            else:
                self.log.refuse_erased(run_id, by_id[run_id].record.thread_id)
                report.created.append(run_id)
        for run_id in report.created:
            self.log.runs[run_id] = _loaded(by_id[run_id])
        return report

    def _prunable(self, closed_before: datetime) -> list[_Run]:
        return [
            run
            for run in self.log.runs.values()
            if run.closed_at is not None and run.closed_at < closed_before
        ]

    async def count_prunable(self, closed_before: datetime) -> PruneReport:
        return _report(self._prunable(closed_before))

    async def prune(
        self,
        closed_before: datetime,
        *,
        batch_events: int = 10_000,
        max_rate: float | None = None,
        whole_months: bool = True,
    ) -> PruneReport:
        """All at once: no partitions, and nothing to pace (`max_rate`) or batch."""
        gone = self._prunable(closed_before)
        for run in gone:
            del self.log.runs[run.run_id]
            for normalize in (False, True):
                self.log.projections.pop((run.run_id, normalize), None)
        report = _report(gone)
        report.batches = 1 if gone else 0
        return report

    # -- erasure ----------------------------------------------------------------

    async def erase_thread(
        self, thread_id: str, *, erased_by: str, reason: str | None = None
    ) -> list[Tombstone]:
        thread_id = storable(thread_id)
        now = _now()
        for run in sorted(
            (r for r in self.log.runs.values() if r.thread_id == thread_id),
            key=lambda r: r.run_id,
        ):
            head = chain.fold((seq, c.text) for seq, (c, _) in enumerate(run.events, start=1))
            self.log.tombstones[run.run_id] = Tombstone(
                run.run_id, thread_id, run.last_seq, head.hex(), now, erased_by, reason
            )
            del self.log.runs[run.run_id]
            for normalize in (False, True):
                self.log.projections.pop((run.run_id, normalize), None)
            self.log.notify(self, Notice(run.run_id, run.last_seq, True))
            self.log.notify_thread(thread_id)
        found = await self.tombstones(thread_id=thread_id)
        if not found:
            raise ThreadNotFound(thread_id)
        return found

    async def tombstones(
        self, *, run_ids: Sequence[str] = (), thread_id: str | None = None
    ) -> list[Tombstone]:
        held = self.log.tombstones
        if thread_id is not None:
            thread = storable(thread_id)
            return sorted(
                (t for t in held.values() if t.thread_id == thread), key=lambda t: t.run_id
            )
        return [held[run_id] for run_id in sorted(set(run_ids)) if run_id in held]

    async def schema_version(self) -> str | None:
        return SCHEMA_VERSION

    def pool_stats(self) -> PoolStats:
        return _NO_CONNECTIONS

    def replica_pool_stats(self) -> PoolStats | None:
        return None if self.standby is None else _NO_CONNECTIONS

    def commit_pool_stats(self) -> PoolStats | None:
        return None

    async def shared_secret(self, name: str, candidate: str) -> str:
        return self.log.secrets.setdefault(name, candidate)


def _events(log: MemoryLog, run_id: str, after: int, limit: int) -> list[Event]:
    run = log.runs.get(run_id)
    if run is None or after >= run.last_seq:
        return []
    held = run.events[after : after + limit]
    return [
        Event(seq, chunk.type, chunk.text, at)
        for seq, (chunk, at) in enumerate(held, start=after + 1)
    ]


def _page(log: MemoryLog, run_id: str, after: int, limit: int) -> Page | None:
    run = log.runs.get(run_id)
    if run is None:
        return None
    return Page(RunState(run.last_seq, run.closed_at is not None), run.rows(after, limit))


def _report(runs: list[_Run]) -> PruneReport:
    closed = [run.closed_at for run in runs if run.closed_at is not None]
    return PruneReport(
        runs=len(runs),
        events=sum(run.last_seq for run in runs),
        oldest=min(closed, default=None),
        newest=max(closed, default=None),
    )


def _check_same(held: _Run, loaded: LoadedRun) -> None:
    """Raise `RunConflict` unless `held` is `loaded` (an import of a run stored already)."""
    record, run_id = loaded.record, loaded.record.run_id
    mine = held.run()
    ours = {
        "thread_id": mine.thread_id,
        "agent": mine.agent,
        "status": mine.status,
        "created_at": mine.created_at,
        "closed_at": mine.closed_at,
        "last_seq": mine.last_seq,
        "error_message": mine.error_message,
        "error_code": mine.error_code,
        "metadata": mine.metadata,
        "input": held.input,
    }
    for name, value in ours.items():
        if getattr(record, name) != value:
            raise RunConflict(
                f"run {run_id!r} is already stored with a different {name}; nothing was imported"
            )
    same = len(held.events) == len(loaded.events) and all(
        chunk.text == event.chunk.text and at == event.received_at
        for (chunk, at), event in zip(held.events, loaded.events, strict=True)
    )
    if not same:
        raise RunConflict(f"run {run_id!r} is already stored with different events")


def _record(run: _Run) -> RunRecord:
    return RunRecord(
        run_id=run.run_id,
        thread_id=run.thread_id,
        agent=run.agent,
        status=run.status,
        created_at=run.created_at,
        updated_at=run.updated_at,
        closed_at=run.closed_at,
        last_seq=run.last_seq,
        error_message=run.error_message,
        metadata=copy.deepcopy(run.metadata),
        input=run.input,
        error_code=run.error_code,
    )


def _loaded(loaded: LoadedRun) -> _Run:
    r = loaded.record
    summary = summarize(event.chunk for event in loaded.events)
    return _Run(
        r.run_id,
        r.created_at,
        r.updated_at,
        thread_id=r.thread_id,
        agent=r.agent,
        status=r.status,
        closed_at=r.closed_at,
        metadata=copy.deepcopy(r.metadata),
        input=r.input,
        last_terminal=summary.terminal,
        error_message=r.error_message,
        error_code=r.error_code,
        tool_names=summary.tools,
        usage=list(summary.usage),
        events=[(event.chunk, event.received_at) for event in loaded.events],
        redactions=dict(loaded.redactions or {}),
    )


def _conforms(store: MemoryStore) -> LogStore:
    """Never called: the type checker proves here that a `MemoryStore` is a whole `LogStore`."""
    return store
