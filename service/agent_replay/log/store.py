"""`LogStore`: the log's contract, as every other layer sees it.

The stream, the hosted-run drivers, the HTTP edge and the offline commands
are handed a `LogStore`, never a pool or a connection: what they may ask of
the log is this list, and nothing here says PostgreSQL. It is the union of
one small Protocol per role (`Appends`, `Reads`, `RunStates`, `Leases`,
`ReaderPresence`, `AuditReads`, `Administration`, `Erasure`), and a consumer is typed
on the roles it uses. What it takes and answers is in `agent_replay.log.values`; this module
imports no implementation. `EventLog` (PostgreSQL) and `MemoryStore` (plain
Python, `agent_replay.log.memory`) implement it, and both run the contract
suite (`tests/log/contract.py`), as any other store would.

The guarantees every implementation keeps (the contract suite checks each, the
standby's through a standby that lags; `tests/ops/test_read_replica.py` checks it
against a real hot standby):

* A run's seqs are 1, 2, 3 ... without gaps; an append is durable before it
  returns, and its events are numbered contiguously in submission order.
* `read_page` answers events and the run's state from one snapshot: every
  event up to the `last_seq` it reports is visible in the same read.
* Commit order equals seq order within a run: a reader that saw `last_seq = N`
  never later finds a new event at a seq <= N (no interleaving).
* A hint (`on_commit`, a notification) may be late, lost or repeated; only
  reads are the truth. `on_commit_rows` is not a hint: it hands over the
  events this process committed, exactly as stored, once they are committed
  and in commit order per run (so a follower here can be served without a read).
* A read a replica may serve (`catch_up`, `through`) answers exactly what the
  primary would: what the replica has not replayed is read from the primary.
* Failures are `agent_replay.errors.ReplayError`s (the driver's are translated
  inside the store).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from agent_replay.errors import InvalidRunId
from agent_replay.log.filters import EventFilter, RunFilter
from agent_replay.log.summary import BIGINT_MAX
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

RUN_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

# Seqs are bigint: a position past this can be neither stored nor asked for.
MAX_SEQ = BIGINT_MAX


def check_run_id(run_id: str) -> str:
    """`run_id` if every store can keep it (and a notification line carry it), else
    `InvalidRunId` naming why."""
    if not RUN_ID.fullmatch(run_id):
        raise InvalidRunId(
            f"run id {run_id[:140]!r} must be 1-128 characters of A-Z a-z 0-9 . _ : -"
        )
    return run_id


class Listening(Protocol):
    """A running subscription to the store's notifications (see `LogStore.listen`)."""

    @property
    def listening(self) -> bool: ...

    @property
    def connects(self) -> int: ...

    @property
    def listener_pid(self) -> int | None: ...

    async def probe(self) -> None:
        """Make sure a connection that died silently is not taken for a live one."""

    async def stop(self) -> None: ...


class Appends(Protocol):
    """Adding events to runs, and closing them: every write goes through the one committer."""

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
        """`redaction`: counts added to the run's, and a hold guarded and replaced, in
        the append's own statement (see `Redaction`); the matches count only if the
        append stores something or moves the hold."""
        ...

    def submit_append(
        self,
        run_id: str,
        chunks: Sequence[StoredChunk],
        *,
        expected_seq: int,
        create: bool = False,
        redaction: Redaction | None = None,
    ) -> asyncio.Future[AppendResult]:
        """`append` without waiting: the append is queued now (in submission order
        with every other) and the future settles as `append` would return or raise.
        For a caller that pipelines its appends with callbacks (a hosted run's driver)
        rather than a task awaiting each."""
        ...

    async def close_run(self, run_id: str) -> Run:
        """Close a run (idempotent), after the appends queued before it."""
        ...

    async def read_hold(self, run_id: str) -> Held | None:
        """The run's redaction hold and position, from the primary (None: no such run).
        Never served to a reader: it is possibly secret text (`Redaction`)."""
        ...


class Reads(Protocol):
    """A run's events, and the hints that say when to read them again."""

    async def read_events(
        self, run_id: str, after: int = 0, limit: int = 1000, *, through: int | None = None
    ) -> list[Event]:
        """`through` (the primary's last_seq for the run) lets a read replica serve it."""

    async def read_page(
        self, run_id: str, after: int, limit: int, *, catch_up: bool = False
    ) -> Page | None:
        """`catch_up=True`: a read replica may serve it, the primary completing what it lacks."""

    def on_commit(self, hook: CommitHook) -> Callable[[], None]: ...

    def on_commit_rows(
        self, hook: CommitRowsHook, wants: Callable[[str], bool] | None = None
    ) -> Callable[[], None]:
        """Call `hook` with the rows of every commit this store makes for this process;
        with `wants`, only for the runs it holds true of when the commit lands (the rows
        of a run nobody wants are never gathered)."""
        ...

    async def settled(self, run_id: str) -> None:
        """Returns once no commit of `run_id` by this store is under way: each has been
        told to the `on_commit_rows` hooks, or failed. (A notification of a commit can
        come before its hook is called.)"""

    async def listen(
        self,
        on_notices: Callable[[list[Notice]], None],
        on_connect: Callable[[], None],
        *,
        wait_seconds: float = 5.0,
        on_readers_left: Callable[[list[str]], None] | None = None,
        on_threads: Callable[[list[str]], None] | None = None,
    ) -> Listening:
        """Decoded notifications of other processes' commits (this store's own were told
        to its hooks). `on_connect` is the caller's cue to re-check what it follows: at
        every (re)connect, and when a commit of this store's may have gone unheard.
        `on_threads` hears the keys (`notifications.thread_key`) of the threads a run
        was just made on, by any process, this one included."""
        ...


class RunStates(Protocol):
    """Runs as records: made, found, and the state of many at once."""

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
    ) -> tuple[Run, bool]: ...

    async def find_run(self, run_id: str) -> Run | None: ...

    async def get_run(self, run_id: str) -> Run: ...

    async def read_states(self, run_ids: Sequence[str]) -> dict[str, RunState]: ...

    async def thread_runs(
        self, thread_id: str, after: tuple[datetime, str] | None = None, limit: int = 100
    ) -> list[ThreadRun]:
        """The thread's runs in its order, `(created_at, run_id)`, those after `after`
        (a run's `position`; from the first when None), at most `limit`: from the primary.
        A run made on the thread later never sorts before one an earlier call answered (a
        store makes a thread's runs one at a time, each stamped after the one before was
        visible). A position stays valid when its run is gone (retention)."""
        ...


class Leases(Protocol):
    """Which process drives a hosted run, for how long."""

    async def claim_lease(self, run_id: str, owner: str, seconds: float) -> bool: ...

    async def claim_expired_lease(self, run_id: str, owner: str, seconds: float) -> bool: ...

    async def renew_lease(self, run_id: str, owner: str, seconds: float) -> bool: ...

    async def renew_leases(self, run_ids: list[str], owner: str, seconds: float) -> set[str]:
        """`renew_lease` for many runs in one round trip; returns those still ours."""
        ...

    async def expired_leases(self, limit: int = 100) -> list[str]: ...

    async def orphaned_leases(self, instance: str, owner: str) -> list[str]: ...

    async def take_over_lease(
        self, run_id: str, owner: str, seconds: float, instance: str
    ) -> bool: ...


class ReaderPresence(Protocol):
    """Who follows a hosted run, across processes (its disconnect policy's input)."""

    async def readers_heartbeat(self, holder: str, run_ids: Sequence[str]) -> list[str]:
        """`holder` has followers of `run_ids`; returns those whose policy watches readers."""
        ...

    async def readers_left(
        self, holder: str, run_ids: Sequence[str], fresh_seconds: float
    ) -> list[str]:
        """`holder`'s last follower of `run_ids` left; returns the runs nobody reads now
        (and tells every process's `listen(on_readers_left=...)` of them)."""
        ...

    async def reader_absence(self, run_id: str, fresh_seconds: float) -> Absence | None: ...


class AuditReads(Protocol):
    """The audit's and the archive's reads: run listings, export records, a run's events
    filtered, and the cache of closed runs' projections."""

    async def list_runs(
        self, f: RunFilter, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Run]:
        """Runs matching `f`, newest first (`created_at, run_id` descending), only those
        before `after`, at most `limit`; a replica may serve it (it may lag)."""
        ...

    async def read_filtered(
        self, run_id: str, f: EventFilter, after: int = 0, limit: int = 1000
    ) -> list[Event]:
        """`read_events` of only the events that pass `f`."""
        ...

    async def run_record(self, run_id: str) -> RunRecord | None: ...

    async def thread_records(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs, oldest first (`created_at, run_id`)."""
        ...

    async def verify_run(self, run_id: str) -> Verdict | None:
        """The run's hash chain checked against its stored events (agent_replay.chain),
        read from one snapshot of the primary; None if there is no such run."""
        ...

    async def cached_projections(
        self, last_seqs: Mapping[str, int], normalize: bool, version: str
    ) -> dict[str, str]:
        """{run_id: messages} of the projections cached for these runs at these last_seqs."""
        ...

    async def store_projections(
        self, made: Sequence[tuple[str, int, str]], normalize: bool, version: str
    ) -> None:
        """Cache each closed run's `(run_id, last_seq, messages)`."""


class Administration(Protocol):
    """Whole runs (import, retention), readiness, connections and deployment secrets."""

    async def load_runs(self, runs: Sequence[LoadedRun]) -> LoadReport: ...

    async def count_prunable(self, closed_before: datetime) -> PruneReport: ...

    async def prune(
        self,
        closed_before: datetime,
        *,
        batch_events: int = 10_000,
        max_rate: float | None = None,
        whole_months: bool = True,
    ) -> PruneReport:
        """`max_rate`: at most this many events deleted per second (None: as fast as it goes).
        `whole_months`: drop the partitions of past months whose runs all go (False: every
        run row by row, for comparison)."""

    async def schema_version(self) -> str | None:
        """The migration the schema is at (None: not migrated); raises `Unavailable` when
        the store cannot answer."""

    def pool_stats(self) -> PoolStats: ...

    def replica_pool_stats(self) -> PoolStats | None:
        """The read replica's connections; None without one."""

    def commit_pool_stats(self) -> PoolStats | None:
        """The commit lanes' own connections; None when they share `pool_stats`'."""

    async def shared_secret(self, name: str, candidate: str) -> str:
        """Secret `name`: `candidate` if this call stored it first, else the stored one."""
        ...


class Erasure(Protocol):
    """Erasing a thread's runs, and what remains of them (`agent_replay.log.erasure`)."""

    async def erase_thread(
        self, thread_id: str, *, erased_by: str, reason: str | None = None
    ) -> list[Tombstone]:
        """Delete every run of the thread (and the forks reading from them) with all
        that is stored of them, in one transaction, leaving a tombstone each; the
        thread's tombstones in run id order (the same ones again for a thread already
        erased). Each run's followers, on every process, are told it closed. Afterwards
        no run can be made on the thread or under an erased run's id (`Erased`).
        `ThreadNotFound` when the thread has neither runs nor tombstones."""
        ...

    async def tombstones(
        self, *, run_ids: Sequence[str] = (), thread_id: str | None = None
    ) -> list[Tombstone]:
        """The tombstones of `run_ids` (those erased), or of the thread's erased runs,
        in run id order: from the primary."""
        ...


class LogStore(
    Appends,
    Reads,
    RunStates,
    Leases,
    ReaderPresence,
    AuditReads,
    Administration,
    Erasure,
    Protocol,
):
    """Everything the service may ask of the log: what its composition root holds and
    hands on, each consumer typed on the roles it uses."""
