"""Adaptive group commit: many producers' appends, one transaction.

Producers enqueue; each of a few commit lanes takes *whatever is queued* when
it is free and commits it as one statement (no fixed waiting window: under
light load a group is one append and commits at once; under heavy load a group
is everything that arrived during the previous commit). One fsync then
acknowledges many producers.

While a group is in flight, another lane joins only once that group has been
committing for `overlap_seconds` (a slow statement, a run lock waited on: the
others must not queue behind it) or a whole group's worth of events is queued.
Otherwise what arrives meanwhile waits for the group in flight and goes in the
next one: a trickle of appends from many runs (hosted runs streaming tokens)
then commits in fewer, larger groups, which costs the database and this process
less per event than lanes committing side by side in groups of one or two.

After a group that held several runs' appends (many producers at once), the
next group starts no sooner than `pace_seconds` after that one started, unless
a whole group's worth is queued: at a steady stream from many producers (hosted
runs' tokens) the groups then come at that pace, each a pace's worth, instead of
back to back as small as one commit's time gathers; a transaction's fixed cost
(here and in PostgreSQL, where a commit is a WAL flush) is then paid per pace, not
per few events. A lone producer's groups hold one run each and are never paced,
and neither is a group whose runs have all queued their next append since it
began: producers that wait on each append (a closed loop) are all back once it
commits, so waiting the pace would gather nobody more.

Per-run order is kept: a lane never takes a run that another lane has in
flight, so appends for one run commit in the order they were submitted. An
append that carries `expected_seq` or `close` ends its run's share of a group,
because whether it fits depends on everything before it.

After a group commits, and before its producers are acknowledged, every
`on_commit` callback is called with `(run_id, last_seq, closed)` per run the
group changed: an in-process hint (like the NOTIFY the statement queues, it
says the log *may* be at `last_seq`; readers still read the table), and every
`on_commit_rows` callback with the rows themselves: the events as stored,
numbered, committed (what the stream's hub serves this process's followers
from without reading them back).

What a group sends and what each append gets back are `agent_replay.log.request`'s
(typed, and settled by pure functions); this module runs the statements, on
connections the lanes keep between groups (`_Connections`), from a pool of their
own whose sessions plan for what the lanes run (`COMMIT_SETTINGS`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from itertools import chain
from operator import itemgetter
from types import MappingProxyType
from typing import Any

import asyncpg

from agent_replay import metrics
from agent_replay.errors import Erased, RunNotFound, Unavailable
from agent_replay.log import partitions, sql
from agent_replay.log import rows as log_rows
from agent_replay.log.chunks import loads, text_at, texts_of
from agent_replay.log.citus import Sharded
from agent_replay.log.faults import ERASED_SQLSTATE, translate
from agent_replay.log.request import Group, Outcomes, Pending, explain, settle, take
from agent_replay.log.values import (
    AppendResult,
    CommitHook,
    CommitRowsHook,
    Redaction,
    Row,
    RunState,
    StoredChunk,
)
from agent_replay.loopevent import LoopEvent
from agent_replay.tasks import stopped

log = logging.getLogger("replay.log")

# A lane's connection, as its pool hands it out.
Connection = asyncpg.pool.PoolConnectionProxy

_RUN_STATES = sql.QUERIES["run_states"]
_CREATE_RUN_IF_MISSING = sql.QUERIES["create_run_if_missing"]
_STORED_RANGE = sql.QUERIES["stored_range"]
_TOMBSTONES = sql.QUERIES["tombstones_of_runs"]

# An append statement's answer row: (run_id, base, ...), read in C.
_RUN_BASE = itemgetter(0, 1)

# The session settings of the commit lanes' connections (`EventLog.open` gives the lanes
# a pool of their own). Every statement a lane runs reaches `runs` (and a producer's
# row) by its key, a group's few rows, so these take from the planner the choices a
# table's statistics (missing before autovacuum's first ANALYZE, stale after a burst
# of new runs) would otherwise turn into a scan: of every run row, or of every open
# one through the (month, closed_at) index, testing each against the group's run ids.
# Its cost then grew with the table, not the group. And a lane's statements are
# planned once per connection (a generic plan), not again for each group: planning
# the append statement costs the database about what running it for a small group does.
COMMIT_SETTINGS: Mapping[str, str] = MappingProxyType(
    {
        "plan_cache_mode": "force_generic_plan",
        "enable_seqscan": "off",
        "enable_bitmapscan": "off",
        # Nor may a plan that slipped past these (priced by them far above any real
        # cost) be compiled: JIT costs more than any group's statement takes.
        "jit": "off",
    }
)

__all__ = ["COMMIT_SETTINGS", "AppendResult", "GroupCommitter"]

# A connection the lanes have not used this long is closed, not used again: as long as
# asyncpg's pool keeps an idle one (its `max_inactive_connection_lifetime`), so one a
# middlebox may have dropped meanwhile is never where a group's statement is sent.
_KEEP_IDLE_SECONDS = 300.0


class _Connections:
    """The lanes' connections, kept between groups, the last one used taken first.

    A pool's checkout and return cost this process more than a small group's statement
    does (the pool's own tasks and shields around each), so a lane takes one of these
    and puts it back; the pool is asked only when none is free. Taking the one used
    last keeps one database backend (its caches warm) doing the work of a steady load,
    as the pool's own last-in-first-out order did. A connection a group failed on goes
    back to the pool instead (terminated first where the driver lost track of it, as
    `faults.acquire` does), and so does, at `close`, every kept one.
    """

    __slots__ = ("_free", "_loop", "_pool", "_wait")

    def __init__(self, pool: asyncpg.Pool, wait: float, loop: asyncio.AbstractEventLoop) -> None:
        self._pool = pool
        self._wait = wait
        self._loop = loop
        # (connection, when it was put back)
        self._free: list[tuple[Connection, float]] = []

    async def take(self) -> Connection:
        free = self._free
        while free:
            conn, used = free.pop()
            if not conn.is_closed() and self._loop.time() - used <= _KEEP_IDLE_SECONDS:
                return conn
            conn.terminate()
            await self.give_back(conn)
        fresh: Connection = await self._pool.acquire(timeout=self._wait)
        return fresh

    def put(self, conn: Connection) -> None:
        self._free.append((conn, self._loop.time()))

    async def give_back(self, conn: Connection, error: BaseException | None = None) -> None:
        """Return `conn` to the pool (never raises: a lane outlives it)."""
        if isinstance(error, asyncpg.InternalClientError):
            conn.terminate()
        try:
            await self._pool.release(conn, timeout=self._wait)
        except Exception:  # its reset failed: the pool opens a fresh one instead
            log.warning("a commit lane's connection could not be returned", exc_info=True)
            conn.terminate()

    async def close(self) -> None:
        free, self._free = self._free, []
        for conn, _ in free:
            await self.give_back(conn)


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


class GroupCommitter:
    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        lanes: int = 4,
        max_events: int = 1000,
        batch_min: int | None = log_rows.BATCH_MIN,
        statement_seconds: float = 30.0,
        overlap_seconds: float = 0.05,
        pace_seconds: float = 0.002,
        process: str = "",
        sharded: Sharded | None = None,
    ) -> None:
        self._pool = pool
        # On Citus (agent_replay.log.citus): groups split by shard, committed its way.
        self._sharded = sharded
        # This process's key, as its listener registers it (`log_listeners`): the plain
        # statements notify only when another process listens ("": every one counts).
        self._process = process
        self._overlap_seconds = overlap_seconds
        self._pace_seconds = pace_seconds
        # When each group in flight began (the loop's clock), and the timer that ends
        # the hold of what arrived meanwhile (see the module's doc), and when it fires.
        self._starts: list[float] = []
        self._hold: asyncio.TimerHandle | None = None
        self._hold_at = 0.0
        # When the last group began, if it held several runs (the next one is paced),
        # and those of its runs that have not queued an append since it began.
        self._paced_from: float | None = None
        self._awaited: set[str] = set()
        # A lane waits this long for a connection or a statement, then fails its group
        # (a 503) and takes the next: a database that stopped answering holds no lane.
        self._statement_seconds = statement_seconds
        self._queue: deque[Pending] = deque()
        # The chunks `_queue` holds, kept as it changes: the hold's test runs on every
        # wake-up of every idle lane, so it must not walk the queue.
        self._queued = 0
        self._inflight: set[str] = set()
        # Set (and replaced) each time a lane finishes a group: what `settled` waits on.
        # Made in the loop the lanes run on (they are its tasks), which it keeps.
        self._loop = asyncio.get_running_loop()
        self._group_done = LoopEvent(self._loop)
        # The lanes waiting for work, and whether one has been woken and not yet looked
        # (see `_call`).
        self._idle: deque[asyncio.Future[None]] = deque()
        self._calling = False
        self._max_events = max_events
        self._batch_min = batch_min
        self._hooks: list[CommitHook] = []
        self._row_hooks: list[tuple[CommitRowsHook, Callable[[str], bool] | None]] = []
        self._unsure_hooks: list[Callable[[], None]] = []
        self._connections = _Connections(pool, statement_seconds, self._loop)
        self._lanes = [
            asyncio.create_task(self._lane(), name=f"commit-lane-{i}") for i in range(lanes)
        ]

    async def close(self) -> None:
        await stopped(*self._lanes)
        await self._connections.close()
        if self._hold is not None:
            self._hold.cancel()
        for item in self._queue:
            if not item.future.done():
                item.future.set_exception(Unavailable("the event log is shutting down"))
        self._queue.clear()
        self._queued = 0

    def on_commit(self, hook: CommitHook) -> Callable[[], None]:
        """Call `hook(run_id, last_seq, closed)` after each commit; returns the remover."""
        self._hooks.append(hook)
        return lambda: self._hooks.remove(hook)

    def on_commit_rows(
        self, hook: CommitRowsHook, wants: Callable[[str], bool] | None = None
    ) -> Callable[[], None]:
        """Call `hook(run_id, rows, last_seq, closed)` after each commit (with `wants`: of
        the runs it holds true of); returns the remover."""
        entry = (hook, wants)
        self._row_hooks.append(entry)
        return lambda: self._row_hooks.remove(entry)

    def on_unsure(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Call `hook()` when a group fails: its statement may have committed without
        the other hooks hearing of it (the answer was lost). Returns the remover."""
        self._unsure_hooks.append(hook)
        return lambda: self._unsure_hooks.remove(hook)

    async def settled(self, run_id: str) -> None:
        """Returns once no lane holds `run_id`: whatever of it was committing here has
        been told to the hooks (or failed). A notification of this process's own commit
        can arrive before its lane hands the hooks the rows; this waits for them."""
        while run_id in self._inflight:
            await self._group_done.wait()

    def announce(self, run_id: str, last_seq: int, closed: bool) -> None:
        """A commit made outside the committer: a hint to every hook (no rows at hand)."""
        self._announce(run_id, last_seq, closed)
        self._tell_rows(run_id, None, last_seq, closed)

    def _announce(self, run_id: str, last_seq: int, closed: bool) -> None:
        for hook in self._hooks:
            try:
                hook(run_id, last_seq, closed)
            except Exception:  # a hint's failure must not fail a committed append
                log.exception("on_commit hook failed for run %s", run_id)

    def _wanting(self, run_id: str) -> list[CommitRowsHook]:
        """The row hooks that want `run_id`'s rows."""
        return [hook for hook, wants in self._row_hooks if wants is None or wants(run_id)]

    def _tell_rows(
        self,
        run_id: str,
        rows: list[Row] | None,
        last_seq: int,
        closed: bool,
        hooks: list[CommitRowsHook] | None = None,
    ) -> None:
        for hook in self._wanting(run_id) if hooks is None else hooks:
            try:
                hook(run_id, rows, last_seq, closed)
            except Exception:  # nor may a follower's
                log.exception("on_commit_rows hook failed for run %s", run_id)

    def _tell_unsure(self) -> None:
        for hook in self._unsure_hooks:
            try:
                hook()
            except Exception:  # nor may a reader's
                log.exception("on_unsure hook failed")

    def _committed_rows(self, appends: dict[str, list[Pending]], outcomes: Outcomes) -> None:
        """The rows each applied run's share added, numbered back from its new last_seq:
        gathered only for a run some hook wants (a big batch nobody follows costs none)."""
        for run, last_seq, closed in outcomes.hints:
            hooks = self._wanting(run)
            if hooks:
                items = appends[run]
                chunks = items[0].chunks
                if len(items) == 1 and len(chunks) == 1:
                    # A run's one token (a hosted run's every commit): its row made
                    # directly, not through the chain and the zip, per follower per event.
                    rows = [(last_seq, text_at(chunks, 0))]
                else:
                    texts = list(chain.from_iterable(texts_of(item.chunks) for item in items))
                    rows = list(
                        zip(range(last_seq - len(texts) + 1, last_seq + 1), texts, strict=True)
                    )
                self._tell_rows(run, rows, last_seq, closed, hooks)

    def submit(
        self,
        run_id: str,
        chunks: Sequence[StoredChunk],
        expected_seq: int | None,
        close: bool,
        create: bool,
        close_status: str | None = None,
        created_at: datetime | None = None,
        producer: tuple[str, int, int] | None = None,
        redaction: Redaction | None = None,
    ) -> asyncio.Future[AppendResult]:
        future: asyncio.Future[AppendResult] = self._loop.create_future()
        item = Pending(
            run_id,
            chunks,
            expected_seq,
            close,
            create,
            close_status,
            future,
            created_at,
            producer,
            redaction,
        )
        self._queue.append(item)
        self._queued += len(chunks)
        self._awaited.discard(run_id)
        # `_call` tests this too; here it spares a call to the submits of a group that
        # find a lane already woken (all but the first).
        if not self._calling:
            self._call()
        return future

    def _call(self) -> None:
        """Wake one idle lane to look at the queue, unless one is on its way already.

        One at a time: a group's producers submit one after another, and waking every
        idle lane for each (as an event would) had all but one find nothing, several
        times per group. A lane that takes a group and leaves work queued calls the
        next; a lane that ends a group looks again by itself; a hold's end calls one.
        """
        if self._calling or not self._queue:
            return
        idle = self._idle
        while idle:
            waiter = idle.pop()
            if not waiter.done():
                waiter.set_result(None)
                self._calling = True
                return

    def _held(self) -> bool:
        """Whether what is queued waits: for the group in flight, or for the pace
        after a group of several runs (see the module's doc)."""
        if not self._queue or self._queued >= self._max_events:
            return False
        loop = self._loop
        now = loop.time()
        if self._starts:
            left = self._overlap_seconds - (now - min(self._starts))
        elif self._paced_from is not None and self._awaited:
            left = self._pace_seconds - (now - self._paced_from)
        else:
            return False
        if left <= 0:
            return False
        if self._hold is None or self._hold_at > now + left:
            if self._hold is not None:
                self._hold.cancel()
            self._hold_at = now + left
            self._hold = loop.call_later(left, self._end_hold)
        return True

    def _end_hold(self) -> None:
        self._hold = None
        self._call()

    def _take(self) -> dict[str, list[Pending]]:
        if self._held():
            return {}
        group, kept, self._queued = take(self._queue, set(self._inflight), self._max_events)
        self._queue = deque(kept)
        return group

    async def _lane(self) -> None:
        while True:
            group = self._take()
            if not group:
                waiter = self._loop.create_future()
                self._idle.append(waiter)
                try:
                    await waiter
                finally:
                    self._calling = False
                continue
            if self._queue:
                self._call()  # what is left may be another lane's (or held)
            self._inflight.update(group)
            start = self._loop.time()
            self._starts.append(start)
            if self._pace_seconds > 0:
                several = len(group) > 1
                self._paced_from = start if several else None
                self._awaited = set(group) if several else set()
            conn: Connection | None = None
            try:
                conn = await self._connections.take()
                await self._commit(conn, group)
            except Exception as exc:  # a lane must outlive any one group
                if conn is not None:
                    await self._connections.give_back(conn, exc)
                    conn = None
                error = translate("the event log could not commit", exc)
                for items in group.values():
                    for item in items:
                        if not item.future.done():
                            item.future.set_exception(error)
                self._tell_unsure()
            finally:
                if conn is not None:
                    # Cancelled (the log closing) midway: the pool's release resets it.
                    self._connections.put(conn)
                self._starts.remove(start)
                self._inflight.difference_update(group)
                # Whatever waited on these runs may go now: this lane looks next.
                done, self._group_done = self._group_done, LoopEvent(self._loop)
                done.set()

    async def _commit(self, conn: Connection, appends: dict[str, list[Pending]]) -> None:
        if self._sharded is None:
            await self._commit_part(conn, appends)
            return
        # A transaction per shard: each writes on one worker, none is a two-phase commit.
        for part in await self._sharded.split(conn, appends):
            await self._commit_part(conn, part)

    async def _commit_part(self, conn: Connection, appends: dict[str, list[Pending]]) -> None:
        group = Group.of(appends, self._batch_min)
        rows = await self._retrying(conn, group)
        outcomes, refused = settle(appends, dict(map(_RUN_BASE, rows)))
        if self._row_hooks:
            self._committed_rows(appends, outcomes)
        self._apply(outcomes)
        if outcomes.committed:
            metrics.EVENTS_APPENDED.inc(outcomes.committed)
            metrics.GROUP_COMMIT_EVENTS.observe(outcomes.committed)
        if refused:
            await self._explain(conn, refused)

    def _apply(self, outcomes: Outcomes) -> None:
        if self._hooks:
            # Before the acknowledgements: a local follower is woken by the
            # commit itself, not by the NOTIFY's round trip through the server.
            for hint in outcomes.hints:
                self._announce(*hint)
        # A future already done is an append whose producer timed out (EventLog's
        # answer bound): it retries with expected_seq and learns the outcome then.
        for item, result in outcomes.results:
            if not item.future.done():
                item.future.set_result(result)
        for item, error in outcomes.errors:
            if not item.future.done():
                item.future.set_exception(error)
        if outcomes.retry:
            # Back to the front, in submission order, ahead of later appends.
            self._queue.extendleft(reversed(outcomes.retry))
            self._queued += sum(len(item.chunks) for item in outcomes.retry)
            # Queued again, as a producer's next append would be: not awaited.
            self._awaited.difference_update(item.run_id for item in outcomes.retry)

    async def _retrying(self, conn: Connection, group: Group) -> Sequence[Any]:
        """The group's append statement, run again after a deadlock or once its runs'
        months have their partitions."""
        statement, params = group.statement(self._process)
        made_partitions = False
        for tries in range(5):
            try:
                if self._sharded is not None:
                    return await self._sharded.commit(conn, group, self._statement_seconds)
                return list(await conn.fetch(statement, *params, timeout=self._statement_seconds))
            except asyncpg.DeadlockDetectedError:
                # Another process's group locked our runs in another order.
                if tries == 4:
                    raise
            except asyncpg.CheckViolationError as error:
                # A run's month has no partition of `events` yet (agent_replay.log.partitions):
                # made now, then the group once more.
                if made_partitions or not partitions.no_partition(error):
                    raise
                # On a connection of its own: the lanes' pool has one more than lanes.
                await partitions.ensure_for_runs(self._pool, list(group.shares))
                made_partitions = True
        raise AssertionError("unreachable")

    async def _explain(self, conn: Connection, refused: dict[str, list[Pending]]) -> None:
        """Settle appends the statement did not apply: missing, closed, or misfit runs."""
        states = {
            r["run_id"]: RunState(r["last_seq"], r["closed"], r["created_at"])
            for r in await conn.fetch(_RUN_STATES, list(refused))
        }
        stored = [
            run
            for run, items in refused.items()
            if run in states
            and items[0].expected_seq is not None
            and await _already_stored(conn, items[0])
        ]
        outcomes = explain(refused, states, stored)
        # Runs that are not there: erased ones answer so (and are never made again).
        missing = [run for run in refused if run not in states]
        erased = {r[0] for r in await conn.fetch(_TOMBSTONES, missing)} if missing else set()
        for run, thread in outcomes.create.items():
            if run in erased:
                continue
            try:
                await conn.execute(_CREATE_RUN_IF_MISSING, run, thread)
            except asyncpg.PostgresError as exc:
                # Its thread was erased (`runs`' trigger): this run's appends alone fail.
                if exc.sqlstate != ERASED_SQLSTATE:
                    raise
                erased.add(run)
        if erased:
            _refuse_erased(outcomes, erased)
        # A retry found stored already: its first try committed, perhaps unheard (its
        # answer lost). The run's state as read is the hint.
        for run in stored:
            state = states[run]
            self._tell_rows(run, None, state.last_seq, state.closed)
        self._apply(outcomes)


def _refuse_erased(outcomes: Outcomes, erased: set[str]) -> None:
    """The appends to erased runs (or runs an erased thread refused) answer `Erased`,
    not `RunNotFound`, nor are they tried again."""
    outcomes.errors = [
        (item, Erased(f"run {item.run_id!r} was erased"))
        if item.run_id in erased and isinstance(error, RunNotFound)
        else (item, error)
        for item, error in outcomes.errors
    ]
    outcomes.errors += [
        (item, Erased(f"run {item.run_id!r} or its thread was erased"))
        for item in outcomes.retry
        if item.run_id in erased
    ]
    outcomes.retry = [item for item in outcomes.retry if item.run_id not in erased]


async def _already_stored(conn: Connection, item: Pending) -> bool:
    """Whether `item` is stored exactly at its `expected_seq` already (a retry)."""
    assert item.expected_seq is not None
    count = len(item.chunks)
    if count == 0:
        return False
    first, last = item.expected_seq, item.expected_seq + count - 1
    rows = await conn.fetch(_STORED_RANGE, item.run_id, first, last)
    found = log_rows.chunks_of(rows, first - 1, last)
    return len(found) == count and all(
        _json_equal(loads(text), loads(sent))
        for (_, text), sent in zip(found, texts_of(item.chunks), strict=True)
    )
