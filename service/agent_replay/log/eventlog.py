"""`EventLog`: the PostgreSQL `LogStore`, the one way into and out of the log.

It owns the pool, the group committer and the LISTEN connection; every other
layer is handed it as a `LogStore` (`agent_replay.log.store`). The HTTP layer and
in-process producers share it, so there is one append path:

    async with EventLog.connect(url) as log:
        await log.append("run-1", [{"type": "RUN_STARTED", ...}])
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from itertools import starmap
from types import TracebackType
from typing import Any

import asyncpg

from agent_replay.config import asyncpg_dsn
from agent_replay.errors import (
    ErasureUnsupported,
    InvalidRequest,
    RunConflict,
    RunNotFound,
    Unavailable,
)
from agent_replay.log import (
    bulk,
    citus,
    erasure,
    leases,
    lookups,
    partitions,
    readers,
    reading,
    retention,
)
from agent_replay.log import rows as log_rows
from agent_replay.log.chunks import (
    Chunks,
    check_nesting,
    dumps,
    loads,
    storable,
    stored,
    stored_token,
    stored_values,
)
from agent_replay.log.citus import Sharded
from agent_replay.log.faults import acquire, translated
from agent_replay.log.filters import EventFilter, RunFilter
from agent_replay.log.listener import Listener
from agent_replay.log.sql import QUERIES
from agent_replay.log.store import MAX_SEQ, check_run_id
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
    Run,
    RunRecord,
    RunState,
    StoredChunk,
    ThreadRun,
    Tombstone,
    Verdict,
)
from agent_replay.log.writer import COMMIT_SETTINGS, GroupCommitter

_CREATE_RUN = QUERIES["create_run"]
_GET_RUN = QUERIES["get_run"]
_READ_HOLD = QUERIES["read_hold"]
_RUN_INPUT = QUERIES["run_input"]
_RUN_STATES = QUERIES["run_states"]
_THREAD_RUNS = QUERIES["thread_runs"]
_SCHEMA_VERSION = QUERIES["schema_version"]
_INSERT_SECRET = QUERIES["insert_secret"]
_GET_SECRET = QUERIES["get_secret"]

_READ = "the event log cannot be read"

_log = logging.getLogger("replay.log")

# The run ids an append has checked lately (`EventLog._queue`): a set lookup instead of a
# match per append, forgotten as a whole when it grows this large.
_CHECKED_RUNS_MAX = 4096


def _stored_chunks(
    chunks: Iterable[StoredChunk | Mapping[str, Any]],
) -> Sequence[StoredChunk]:
    # (A list of one object that needs no repair, the commonest append, is the
    # caller's `stored_token`.)
    if type(chunks) is Chunks:
        return chunks  # a large body's, from the ingest layer
    if type(chunks) is list:
        if len(chunks) == 1 and type(chunks[0]) is dict:
            return [stored(chunks[0], 0)]  # one that needs repair, or the error naming why
        kinds = set(map(type, chunks))  # checked in C: this runs per append
        if kinds <= {StoredChunk}:
            return chunks  # the ingest layer's
        if kinds == {dict}:
            return stored_values(chunks)  # a caller's parsed events, a column at a time
    return [c if isinstance(c, StoredChunk) else stored(c, i) for i, c in enumerate(chunks)]


class _Backends:
    """The server pids of a pool's open connections: its `init` adds each new one, and
    the connection's end removes it (a pid is reused only after its backend exits)."""

    def __init__(self) -> None:
        self._pids: set[int] = set()

    async def opened(self, conn: asyncpg.Connection) -> None:
        pid = conn.get_server_pid()
        self._pids.add(pid)
        conn.add_termination_listener(lambda _conn: self._pids.discard(pid))

    def __contains__(self, pid: object) -> bool:
        return pid in self._pids


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


# How often the answer bound's timer looks at the appends waiting (while any wait).
_DEADLINE_GRAIN_SECONDS = 0.05


class _Deadlines:
    """Fails an append's future once its answer bound has passed, with one timer for all.

    Appends share one bound, so their deadlines come in the order they were made. The
    timer, every grain while any wait, takes the appends made since it last looked,
    keeps those still unanswered (a grain later, nearly none) under one deadline (its
    own time plus the bound: never before any of theirs, at most a grain after), and
    fails the unanswered of every deadline that has passed. An append then costs a list
    append: a timer each would cost a heap push and a cancel, and a deadline each a
    clock read and an entry the timer pops one by one.
    """

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._grain = min(seconds, _DEADLINE_GRAIN_SECONDS)
        # Made since the timer last looked.
        self._fresh: list[asyncio.Future[AppendResult]] = []
        # (deadline, the appends it bounds), in order.
        self._waiting: deque[tuple[float, list[asyncio.Future[AppendResult]]]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, future: asyncio.Future[AppendResult]) -> None:
        self._fresh.append(future)
        if self._timer is None:
            loop = future.get_loop()
            self._timer = loop.call_later(self._grain, self._look, loop)

    def _look(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time()
        fresh, self._fresh = self._fresh, []
        unanswered = [future for future in fresh if not future.done()]
        waiting = self._waiting
        if unanswered:
            waiting.append((now + self._seconds, unanswered))
        while waiting and waiting[0][0] <= now:
            for future in waiting.popleft()[1]:
                if not future.done():
                    message = f"the database did not answer within {self._seconds:g}s"
                    future.set_exception(
                        Unavailable(f"{message}; retry with the same expected_seq")
                    )
        if waiting:
            wait = min(waiting[0][0] - now, self._grain)
            self._timer = loop.call_later(max(wait, 0.0), self._look, loop)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class EventLog:
    """A pool, a group committer, the log's reads, leases and the LISTEN connection."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        dsn: str | None = None,
        commit_lanes: int = 4,
        commit_overlap_seconds: float = 0.05,
        commit_pace_seconds: float = 0.002,
        group_max_events: int = 1000,
        answer_seconds: float = 4.5,
        statement_seconds: float = 30.0,
        read_pool: asyncpg.Pool | None = None,
        commit_pool: asyncpg.Pool | None = None,
        batch_min: int | None = log_rows.BATCH_MIN,
        citus: bool = False,
    ):
        # Kept for tests and benchmarks that inspect the database directly;
        # no other layer of the service touches it.
        self.pool = pool
        self._dsn = dsn
        # The commit lanes' own connections (see `open`), or None: they share `pool`.
        self.commit_pool = commit_pool
        # This handle's key among the processes that listen (`log_listeners`): its
        # listener registers under it, and its plain commits notify only when a
        # listener under another key is there (its own hooks hear of them in-process).
        self.process = uuid.uuid4().hex
        # On Citus: each run's shard (agent_replay.log.citus), for what runs a shard at a time.
        self._sharded = Sharded() if citus else None
        self._committer = GroupCommitter(
            pool if commit_pool is None else commit_pool,
            lanes=commit_lanes,
            overlap_seconds=commit_overlap_seconds,
            pace_seconds=commit_pace_seconds,
            max_events=group_max_events,
            statement_seconds=statement_seconds,
            batch_min=batch_min,
            process=self.process,
            sharded=self._sharded,
        )
        # Whether the database is a Citus coordinator (agent_replay.log.citus).
        self.citus = citus
        # A run's share of an append of at least this many chunks is stored in batch
        # rows (agent_replay.log.rows); None: a row per event (the layout before 0007).
        self.batch_min = batch_min
        self._deadlines = _Deadlines(answer_seconds)
        self._checked_runs: set[str] = set()
        # A hot standby for catch-up reads (see `read_page`), or None.
        self.read_pool = read_pool
        # Every read of a run's events, on the primary or the standby.
        self._reader = reading.Reader(pool, read_pool, citus=citus)
        # Creates `events`' partitions ahead while the log is open (see `open`).
        self._ahead = partitions.Ahead(pool)
        # The server pids of `pool`'s connections, when `open` made the pool (see
        # `listen`); a pool handed in is not tracked, and all its notifications count.
        self._backends: _Backends | None = None

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        pool_size: int = 10,
        commit_lanes: int = 4,
        commit_overlap_seconds: float = 0.05,
        commit_pace_seconds: float = 0.002,
        group_max_events: int = 1000,
        answer_seconds: float = 4.5,
        connect_seconds: float = 3.0,
        statement_seconds: float = 30.0,
        read_url: str | None = None,
        read_pool_size: int | None = None,
        batch_min: int | None = log_rows.BATCH_MIN,
    ) -> EventLog:
        """`answer_seconds`: the longest an append waits for its commit before it is
        `Unavailable` (the database stopped answering); `connect_seconds` bounds each new
        connection (a server that accepts TCP but never answers), `statement_seconds`
        every statement (a connection that hangs without a FIN), so the pool heals.
        `read_url`: a hot standby of `url` for catch-up reads (see `read_page`)."""
        dsn = asyncpg_dsn(url)
        backends = _Backends()

        async def primary_pool(
            min_size: int, max_size: int, settings: Mapping[str, str] | None = None
        ) -> asyncpg.Pool:
            with translated("cannot connect to the database"):
                return await asyncpg.create_pool(
                    dsn,
                    init=backends.opened,
                    min_size=min_size,
                    max_size=max_size,
                    connection_class=PooledConnection,
                    timeout=connect_seconds,
                    command_timeout=statement_seconds,
                    server_settings=None if settings is None else dict(settings),
                )

        pool = await primary_pool(min(2, pool_size), pool_size)
        try:
            # A Citus coordinator (agent_replay.log.citus): its lanes commit a shard at a
            # time, and plan each statement for its parameters, which is how Citus finds
            # the shard (a generic plan leaves it unable to plan the statement at all).
            sharded = await citus.installed(pool)
            settings = (
                {k: v for k, v in COMMIT_SETTINGS.items() if k != "plan_cache_mode"}
                if sharded
                else COMMIT_SETTINGS
            )
            # The lanes' own, planned as `writer.COMMIT_SETTINGS` says (a session's settings,
            # sent with the connection's startup: no round trip of their own), with one more
            # for a lane's fallback that makes a missing partition (agent_replay.log.partitions)
            # while every lane holds one.
            commit_pool = await primary_pool(1, commit_lanes + 1, settings)
        except BaseException:
            await pool.close()
            raise
        read_pool = None
        if read_url:
            # Connects lazily: a standby that is down only sends its reads to the primary.
            read_pool = await asyncpg.create_pool(
                asyncpg_dsn(read_url),
                min_size=0,
                max_size=read_pool_size or pool_size,
                connection_class=PooledConnection,
            )
        event_log = cls(
            pool,
            dsn=dsn,
            commit_lanes=commit_lanes,
            commit_overlap_seconds=commit_overlap_seconds,
            commit_pace_seconds=commit_pace_seconds,
            group_max_events=group_max_events,
            answer_seconds=answer_seconds,
            statement_seconds=statement_seconds,
            read_pool=read_pool,
            commit_pool=commit_pool,
            batch_min=batch_min,
            citus=sharded,
        )
        event_log._backends = backends
        try:
            await partitions.ensure_ahead(pool)
        except (asyncpg.PostgresError, OSError) as error:
            # Not migrated yet, or the database went away: the periodic check and an
            # append's own fallback (agent_replay.log.writer) create them later.
            _log.warning("events partitions not created ahead: %s", error)
        event_log._ahead.start()
        return event_log

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

    def on_commit_rows(
        self, hook: CommitRowsHook, wants: Callable[[str], bool] | None = None
    ) -> Callable[[], None]:
        """Call `hook(run_id, rows, last_seq, closed)` after each group this process commits,
        with the rows it added to the run: not a hint but the committed events, exactly
        as stored, in commit order per run (the committer never has two groups of a run
        in flight). On the committer's task, before the appends are acknowledged: it must
        be quick. A commit made outside the committer (`announce`) gives `rows=None`.
        With `wants`, only for the runs `wants(run_id)` holds true of. Returns a function
        that removes the hook.
        """
        return self._committer.on_commit_rows(hook, wants)

    async def settled(self, run_id: str) -> None:
        """Returns once this process has no commit of `run_id` under way: any it had
        has been told to the `on_commit_rows` hooks (or failed)."""
        await self._committer.settled(run_id)

    def announce(self, run_id: str, last_seq: int, closed: bool) -> None:
        """Tell the `on_commit` hooks about a commit made outside the group committer
        (a transaction of `agent_replay.log.streams`); its NOTIFY covers other processes."""
        self._committer.announce(run_id, last_seq, closed)

    async def close(self) -> None:
        await self._ahead.stop()
        self._deadlines.close()
        await self._committer.close()
        if self.commit_pool is not None:
            await self.commit_pool.close()
        await self.pool.close()
        if self.read_pool is not None:
            await self.read_pool.close()

    async def append(
        self,
        run_id: str,
        chunks: Sequence[StoredChunk | Mapping[str, Any]],
        *,
        expected_seq: int | None = None,
        close: bool = False,
        create: bool = True,
        close_status: str | None = None,
        created_at: datetime | None = None,
        producer: tuple[str, int, int] | None = None,
        redaction: Redaction | None = None,
    ) -> AppendResult:
        """Append chunks durably; returns once committed.

        `expected_seq` makes a retry safe: the batch must start at that seq,
        or be already stored there with equal content (then nothing is added).
        `create` makes a missing run (taking a RUN_STARTED chunk's threadId).
        `close_status` (with `close`) records cancelled / interrupted instead of
        the status the last terminal chunk implies. `created_at` appends only
        to the run made at that time: one deleted and made again since is
        `RunNotFound`, checked by the append statement itself. `producer`
        (id, epoch, seq) appends only what that idempotent producer's stored
        state admits next and records it in the same statement; anything else
        is `ProducerRefused`, with nothing written. `redaction` is written in the
        same statement (`Redaction`).
        """
        # Positional: this runs per append, and a call by keywords costs more.
        return await self._queue(
            run_id,
            chunks,
            expected_seq,
            close,
            create,
            close_status,
            created_at,
            producer,
            redaction,
        )

    def submit_append(
        self,
        run_id: str,
        chunks: Sequence[StoredChunk],
        *,
        expected_seq: int,
        create: bool = False,
        redaction: Redaction | None = None,
    ) -> asyncio.Future[AppendResult]:
        return self._queue(
            run_id, chunks, expected_seq=expected_seq, create=create, redaction=redaction
        )

    def _queue(
        self,
        run_id: str,
        chunks: Sequence[StoredChunk | Mapping[str, Any]],
        expected_seq: int | None = None,
        close: bool = False,
        create: bool = True,
        close_status: str | None = None,
        created_at: datetime | None = None,
        producer: tuple[str, int, int] | None = None,
        redaction: Redaction | None = None,
    ) -> asyncio.Future[AppendResult]:
        """An append checked and queued: its commit's outcome, or `Unavailable` once
        `answer_seconds` have passed.

        A timed-out append still queued is withdrawn (the committer skips a done
        future), so it is never stored; one already committing may yet commit,
        which is why a producer retries with the same `expected_seq`.
        """
        checked = self._checked_runs
        if run_id not in checked:
            check_run_id(run_id)  # raises, naming what is wrong
            if len(checked) >= _CHECKED_RUNS_MAX:
                checked.clear()
            checked.add(run_id)
        if expected_seq is not None and not 1 <= expected_seq <= MAX_SEQ:
            raise InvalidRequest(f"expected_seq must be from 1 to {MAX_SEQ}")
        to_store = stored_token(chunks) or _stored_chunks(chunks)
        check_nesting(to_store)
        future = self._committer.submit(
            run_id,
            to_store,
            expected_seq,
            close,
            create,
            close_status,
            created_at,
            producer,
            redaction,
        )
        self._deadlines.add(future)
        return future

    async def close_run(self, run_id: str) -> Run:
        """Close a run's log (idempotent). Goes through the committer, after pending appends."""
        await self._queue(run_id, [], close=True, create=False)
        return await self.get_run(run_id)

    async def read_hold(self, run_id: str) -> Held | None:
        with translated("the run's redaction hold cannot be read"):
            row = await self.pool.fetchrow(_READ_HOLD, run_id)
        if row is None:
            return None
        return Held(row["last_seq"], row["closed"], row["redaction_hold"])

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
        """Create a run; idempotent. Returns (run, created). An existing run
        with a different thread, agent, metadata or input is a conflict."""
        check_run_id(run_id)
        # As a RUN_STARTED chunk's threadId is stored: lookups sanitize alike.
        thread_id = None if thread_id is None else storable(thread_id)
        agent = None if agent is None else storable(agent)
        meta = dict(metadata or {})
        meta_text = dumps(meta)
        input_text = None if input is None else dumps(input)
        with translated("the run cannot be created", refused="metadata cannot be stored"):
            async with self.pool.acquire() as conn:
                created = await conn.fetchval(
                    _CREATE_RUN, run_id, thread_id, agent, meta_text, input_text,
                    on_disconnect, grace_seconds,
                )  # fmt: skip
                row = await conn.fetchrow(_GET_RUN, run_id)
                stored_input = (
                    await conn.fetchval(_RUN_INPUT, run_id)
                    if created is None and input is not None
                    else None
                )
        assert row is not None  # just inserted or already there; runs are only pruned when closed
        run = _run_of(row)
        if created is None and (
            (thread_id is not None and run.thread_id != thread_id)
            or (metadata is not None and run.metadata != meta)
            or (agent is not None and run.agent != agent)
            or (input is not None and (stored_input is None or loads(stored_input) != input))
        ):
            # Nothing of the stored run: the caller may not be allowed to read it.
            raise RunConflict(
                f"run {run_id!r} exists with another thread, agent, metadata or input"
            )
        return run, created is not None

    async def find_run(self, run_id: str) -> Run | None:
        with translated(_READ):
            row = await self.pool.fetchrow(_GET_RUN, run_id)
        return None if row is None else _run_of(row)

    async def get_run(self, run_id: str) -> Run:
        check_run_id(run_id)
        run = await self.find_run(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    async def shared_secret(self, name: str, candidate: str) -> str:
        """The deployment's secret `name`: `candidate` if this call is the first
        to store one, else the value stored before."""
        with translated("the service's secrets cannot be read"):
            async with self.pool.acquire() as conn:
                value: str | None = await conn.fetchval(_INSERT_SECRET, name, candidate)
                if value is None:
                    value = await conn.fetchval(_GET_SECRET, name)
        assert value is not None  # secrets are never deleted
        return value

    async def read_events(
        self, run_id: str, after: int = 0, limit: int = 1000, *, through: int | None = None
    ) -> list[Event]:
        """Events with seq > `after`, at most `limit`, in seq order (see `Reader.events`:
        with `through`, a standby may serve it)."""
        return list(
            starmap(Event, await self._reader.events(run_id, after, limit, through=through))
        )

    async def read_page(
        self, run_id: str, after: int, limit: int, *, catch_up: bool = False
    ) -> Page | None:
        """Events with seq > `after` (at most `limit`) and the run's state; None if no such
        run (see `Reader.page`: with `catch_up`, a standby may serve it)."""
        return await self._reader.page(run_id, after, limit, catch_up=catch_up)

    async def read_states(self, run_ids: Sequence[str]) -> dict[str, RunState]:
        with translated(_READ):
            async with acquire(self.pool) as conn:
                records = await conn.fetch(_RUN_STATES, list(run_ids))
        return {r[0]: RunState(r[1], r[2], r[3]) for r in records}

    async def erase_thread(
        self, thread_id: str, *, erased_by: str, reason: str | None = None
    ) -> list[Tombstone]:
        if self.citus:
            # Refused before anything is read or written (errors.ErasureUnsupported).
            raise ErasureUnsupported()
        # Looked up as a run's thread is stored (`create_run`).
        return await erasure.erase_thread(self.pool, storable(thread_id), erased_by, reason)

    async def tombstones(
        self, *, run_ids: Sequence[str] = (), thread_id: str | None = None
    ) -> list[Tombstone]:
        thread = None if thread_id is None else storable(thread_id)
        return await erasure.tombstones(self.pool, run_ids=list(run_ids), thread_id=thread)

    async def thread_runs(
        self, thread_id: str, after: tuple[datetime, str] | None = None, limit: int = 100
    ) -> list[ThreadRun]:
        # Looked up as a run's thread is stored (`create_run`).
        thread_id = storable(thread_id)
        at, run_id = after if after is not None else (None, None)
        with translated(_READ):
            async with acquire(self.pool) as conn:
                records = await conn.fetch(_THREAD_RUNS, thread_id, at, run_id, limit)
        return [ThreadRun(r[0], r[1], r[2], r[3]) for r in records]

    async def listen(
        self,
        on_notices: Callable[[list[Notice]], None],
        on_connect: Callable[[], None],
        *,
        wait_seconds: float = 5.0,
        on_readers_left: Callable[[list[str]], None] | None = None,
        on_threads: Callable[[list[str]], None] | None = None,
    ) -> Listener:
        """Decoded notifications of every process's commits, on a connection of their own.

        Returns once listening, or after `wait_seconds` (it keeps trying; the
        caller's re-check covers the gap). `on_connect` runs at every (re)connect, and
        whenever a group commit of this store's failed (it may have committed unheard).
        `on_readers_left`, if given, hears the runs whose last reader just left.
        """
        if self._dsn is None:
            raise Unavailable("this event log was made from a pool: it has no URL to LISTEN on")
        own = None if self._backends is None else self._backends.__contains__
        listener = Listener(
            self._dsn, on_notices, on_connect, on_readers_left, own, self.process, on_threads
        )
        # The listener drops this pool's own notifications (the hooks told of those
        # commits), so a group whose answer was lost, committed or not, is the caller's
        # to re-check, as after a reconnect.
        listener.on_stop(self._committer.on_unsure(on_connect))
        return await listener.start(wait_seconds)

    # -- leases ---------------------------------------------------------------

    async def claim_lease(self, run_id: str, owner: str, seconds: float) -> bool:
        return await leases.claim(self.pool, run_id, owner, seconds)

    async def claim_expired_lease(self, run_id: str, owner: str, seconds: float) -> bool:
        return await leases.claim_expired(self.pool, run_id, owner, seconds)

    async def renew_lease(self, run_id: str, owner: str, seconds: float) -> bool:
        return await leases.renew(self.pool, run_id, owner, seconds)

    async def renew_leases(self, run_ids: list[str], owner: str, seconds: float) -> set[str]:
        return await leases.renew_many(self.pool, run_ids, owner, seconds, sharded=self._sharded)

    async def expired_leases(self, limit: int = 100) -> list[str]:
        return await leases.expired(self.pool, limit)

    async def orphaned_leases(self, instance: str, owner: str) -> list[str]:
        return await leases.orphans(self.pool, instance, owner)

    async def take_over_lease(self, run_id: str, owner: str, seconds: float, instance: str) -> bool:
        return await leases.take_over(self.pool, run_id, owner, seconds, instance)

    # -- readers (hosted runs' disconnect policies) ---------------------------

    async def readers_heartbeat(self, holder: str, run_ids: Sequence[str]) -> list[str]:
        return await readers.heartbeat(self.pool, holder, run_ids)

    async def readers_left(
        self, holder: str, run_ids: Sequence[str], fresh_seconds: float
    ) -> list[str]:
        return await readers.left(self.pool, holder, run_ids, fresh_seconds, citus=self.citus)

    async def reader_absence(self, run_id: str, fresh_seconds: float) -> Absence | None:
        return await readers.absence(self.pool, run_id, fresh_seconds)

    # -- audit and archive reads (agent_replay.log.lookups) -------------------

    async def list_runs(
        self, f: RunFilter, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Run]:
        """Runs matching `f`, newest first (`created_at, run_id` descending), only those
        before `after` (a page's last pair), at most `limit`. From the standby when there
        is one (a listing may lag the primary by its replay), else, or if it does not
        answer, from the primary."""
        records = await self._reader.from_standby(lookups.list_runs, f, limit, after)
        assert records is not None
        return [_run_of(r) for r in records]

    async def read_filtered(
        self, run_id: str, f: EventFilter, after: int = 0, limit: int = 1000
    ) -> list[Event]:
        """`read_events` of the events that pass `f` (a filter that lets all through reads
        as `read_events`)."""
        if f.empty:
            return await self.read_events(run_id, after, limit)
        return list(
            starmap(
                Event,
                await lookups.read_filtered(self.pool, run_id, f, after, limit, citus=self.citus),
            )
        )

    async def run_record(self, run_id: str) -> RunRecord | None:
        return await lookups.run_record(self.pool, run_id)

    async def thread_records(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs, oldest first (`created_at, run_id`)."""
        return await lookups.thread_records(self.pool, thread_id)

    async def verify_run(self, run_id: str) -> Verdict | None:
        """The run's hash chain checked against its stored events (agent_replay.log.integrity)."""
        return await reading.verify(self.pool, run_id, citus=self.citus)

    async def cached_projections(
        self, last_seqs: Mapping[str, int], normalize: bool, version: str
    ) -> dict[str, str]:
        """{run_id: messages} cached for these runs at exactly these last_seqs."""
        return await lookups.cached_projections(self.pool, last_seqs, normalize, version)

    async def store_projections(
        self, made: Sequence[tuple[str, int, str]], normalize: bool, version: str
    ) -> None:
        """Cache each `(run_id, last_seq, messages)`, all in one transaction."""
        await lookups.store_projections(self.pool, made, normalize, version)

    # -- whole runs and readiness ---------------------------------------------

    async def load_runs(self, runs: Sequence[LoadedRun]) -> LoadReport:
        return await bulk.load_runs(self.pool, runs, sharded=self._sharded)

    async def count_prunable(self, closed_before: datetime) -> PruneReport:
        return await retention.count_prunable(self.pool, closed_before, citus=self.citus)

    async def prune(
        self,
        closed_before: datetime,
        *,
        batch_events: int = 10_000,
        max_rate: float | None = None,
        whole_months: bool = True,
    ) -> PruneReport:
        return await retention.prune(
            self.pool,
            closed_before,
            batch_events=batch_events,
            max_rate=max_rate,
            whole_months=whole_months,
            citus=self.citus,
        )

    def pool_stats(self) -> PoolStats:
        return _stats(self.pool)

    def replica_pool_stats(self) -> PoolStats | None:
        return None if self.read_pool is None else _stats(self.read_pool)

    def commit_pool_stats(self) -> PoolStats | None:
        return None if self.commit_pool is None else _stats(self.commit_pool)

    async def schema_version(self) -> str | None:
        """The migration the schema is at; raises Unavailable if the database does not answer."""
        with translated("the database does not answer"):
            async with self.pool.acquire(timeout=2) as conn:
                version: str | None = await conn.fetchval(_SCHEMA_VERSION, timeout=2)
        return version


def _run_of(row: asyncpg.Record) -> Run:
    fields = dict(row)
    fields["metadata"] = loads(fields["metadata"])
    if fields.get("redactions") is not None:
        fields["redactions"] = loads(fields["redactions"])
    return Run(**fields)


def _stats(pool: asyncpg.Pool) -> PoolStats:
    return PoolStats(pool.get_size() - pool.get_idle_size(), pool.get_size(), pool.get_max_size())


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
