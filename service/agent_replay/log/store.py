"""`LogStore`: the log's contract, as every other layer sees it.

The stream, the hosted-run drivers, the HTTP edge and the offline commands
are handed a `LogStore`, never a pool or a connection: what they may ask of
the log is this list, and nothing here says PostgreSQL. `EventLog` is the one
implementation today; a sharded or replica-reading store implements the same
Protocol and runs the same contract suite (`tests/log/contract.py`).

The guarantees every implementation keeps (the suite checks each):

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agent_replay.log.bulk import LoadedRun, LoadReport, RunRecord
    from agent_replay.log.chunks import StoredChunk
    from agent_replay.log.eventlog import Event, Run
    from agent_replay.log.lookups import EventFilter, RunFilter
    from agent_replay.log.notifications import Notice
    from agent_replay.log.readers import Absence
    from agent_replay.log.request import AppendResult
    from agent_replay.log.retention import PruneReport

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


class LogStore(Protocol):
    """What the rest of the service may ask of the log."""

    # -- appends ------------------------------------------------------------

    async def append(
        self,
        run_id: str,
        chunks: Sequence[StoredChunk | Mapping[str, Any]],
        *,
        expected_seq: int | None = None,
        close: bool = False,
        create: bool = True,
        close_status: str | None = None,
    ) -> AppendResult: ...

    def submit_append(
        self, run_id: str, chunks: Sequence[StoredChunk], *, expected_seq: int, create: bool = False
    ) -> asyncio.Future[AppendResult]:
        """`append` without waiting: the append is queued now (in submission order
        with every other) and the future settles as `append` would return or raise.
        For a caller that pipelines its appends with callbacks (a hosted run's driver)
        rather than a task awaiting each."""
        ...

    async def close_run(self, run_id: str) -> Run: ...

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

    # -- reads --------------------------------------------------------------

    async def find_run(self, run_id: str) -> Run | None: ...

    async def get_run(self, run_id: str) -> Run: ...

    async def read_events(
        self, run_id: str, after: int = 0, limit: int = 1000, *, through: int | None = None
    ) -> list[Event]:
        """`through` (the primary's last_seq for the run) lets a read replica serve it."""

    async def read_page(
        self, run_id: str, after: int, limit: int, *, catch_up: bool = False
    ) -> Page | None:
        """`catch_up=True`: a read replica may serve it, the primary completing what it lacks."""

    async def read_states(self, run_ids: Sequence[str]) -> dict[str, RunState]: ...

    # -- hints --------------------------------------------------------------

    async def listen(
        self,
        on_notices: Callable[[list[Notice]], None],
        on_connect: Callable[[], None],
        *,
        wait_seconds: float = 5.0,
        on_readers_left: Callable[[list[str]], None] | None = None,
    ) -> Listening:
        """Decoded notifications of other processes' commits (this store's own were told
        to its hooks). `on_connect` is the caller's cue to re-check what it follows: at
        every (re)connect, and when a commit of this store's may have gone unheard."""
        ...

    # -- leases (hosted runs) -------------------------------------------------

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

    # -- readers (hosted runs' disconnect policies) ----------------------------

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

    # -- audit and archive reads ---------------------------------------------

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

    async def cached_projections(
        self, last_seqs: Mapping[str, int], normalize: bool, version: str
    ) -> dict[str, str]:
        """{run_id: messages} of the projections cached for these runs at these last_seqs."""
        ...

    async def store_projections(
        self, made: Sequence[tuple[str, int, str]], normalize: bool, version: str
    ) -> None:
        """Cache each closed run's `(run_id, last_seq, messages)`."""

    # -- whole runs (import, retention) and readiness -------------------------

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

    async def schema_version(self) -> str | None: ...

    def pool_stats(self) -> PoolStats: ...

    def replica_pool_stats(self) -> PoolStats | None:
        """The read replica's connections; None without one."""

    def commit_pool_stats(self) -> PoolStats | None:
        """The commit lanes' own connections; None when they share `pool_stats`'."""

    # -- deployment-wide secrets (the token signing secret) -------------------

    async def shared_secret(self, name: str, candidate: str) -> str:
        """Secret `name`: `candidate` if this call stored it first, else the stored one."""
        ...
