"""Erasure: a thread's runs deleted in one transaction, a tombstone left for each.

    lock the thread (its advisory lock, as every statement that puts a run on a
      thread takes it: no run joins it meanwhile)
    lock its runs' rows (and their forks'), in run id order
    read each run's events through the log's one reader and fold its chain head
    delete each run and everything of it, write its tombstone, notify

All in one transaction: an erasure either happened whole or not at all. An append
racing it either holds a run's row first (it commits, and its events are erased
with the rest, counted in the tombstone) or waits for the row and then finds no
run; a run made on the thread, or under an erased run's id, after the erasure is
refused by `runs`' trigger (revision 0012_erasure): both answer `410 erased`.

Each run's followers, on every process, hear a close notice for it (the events
channel): they read, find no run, and end as a closed run's stream does. The
thread's followers hear the threads channel and end too (`agent_replay.stream.thread`).

The tombstone's head is folded here, inside the erasing transaction, over the
events as the reader returns them (`agent_replay.chain.fold`): what an export of the
run would have carried. Erasing a thread already erased changes nothing and
answers the same tombstones.
"""

from __future__ import annotations

import asyncpg

from agent_replay import chain
from agent_replay.errors import ThreadNotFound
from agent_replay.log import reading
from agent_replay.log.faults import acquire, translated
from agent_replay.log.sql import QUERIES
from agent_replay.log.values import Tombstone

_LOCK_THREAD = QUERIES["erase_lock_thread"]
_PICK = QUERIES["erase_pick"]
_ERASE_RUN = QUERIES["erase_run"]
_OF_THREAD = QUERIES["tombstones_of_thread"]
_OF_RUNS = QUERIES["tombstones_of_runs"]

Connection = asyncpg.pool.PoolConnectionProxy

_ACTION = "the thread cannot be erased"
_READ = "the tombstones cannot be read"

# Rows read at a time while folding a run's chain.
_PAGE = 10_000


def _tombstone(row: asyncpg.Record) -> Tombstone:
    return Tombstone(
        row["run_id"], row["thread_id"], int(row["events"]), row["head"], row["erased_at"],
        row["erased_by"], row["reason"],
    )  # fmt: skip


async def erase_thread(
    pool: asyncpg.Pool, thread_id: str, erased_by: str, reason: str | None
) -> list[Tombstone]:
    """Erase every run of `thread_id` (and the forks reading from them); the thread's
    tombstones, in run id order. `ThreadNotFound` when the thread has neither runs nor
    tombstones."""
    with translated(_ACTION):
        for tries in range(5):
            try:
                async with acquire(pool) as conn, conn.transaction():
                    await _erase(conn, thread_id, erased_by, reason)
                    rows = await conn.fetch(_OF_THREAD, thread_id)
                break
            except asyncpg.DeadlockDetectedError:
                # An append group held one of the runs and wanted another we held.
                if tries == 4:
                    raise
    if not rows:
        raise ThreadNotFound(thread_id)
    return [_tombstone(r) for r in rows]


async def _erase(conn: Connection, thread_id: str, erased_by: str, reason: str | None) -> None:
    await conn.execute(_LOCK_THREAD, thread_id)
    picked = await conn.fetch(_PICK, thread_id)
    # Every head before any delete: a fork's prefix is read from its source.
    heads = [(r["run_id"], *await _chain(conn, r["run_id"], r["last_seq"])) for r in picked]
    for run_id, events, head in heads:
        await conn.execute(_ERASE_RUN, run_id, events, head, erased_by, reason)


async def _chain(conn: Connection, run_id: str, last_seq: int) -> tuple[int, str]:
    """The run's event count and chain head (hex), read through the log's reader."""
    head, count, after = chain.GENESIS, 0, 0
    while after < last_seq:
        rows = await reading.chunks_on(conn, run_id, after, last_seq, _PAGE)
        if not rows:
            break
        head = chain.fold(rows, head)
        count += len(rows)
        after = rows[-1][0]
    return count, head.hex()


async def tombstones(
    pool: asyncpg.Pool, *, run_ids: list[str] | None = None, thread_id: str | None = None
) -> list[Tombstone]:
    """The tombstones of `run_ids` (those erased) or of `thread_id`'s erased runs."""
    with translated(_READ):
        if thread_id is not None:
            rows = await pool.fetch(_OF_THREAD, thread_id)
        else:
            rows = await pool.fetch(_OF_RUNS, run_ids or [])
    return [_tombstone(r) for r in rows]
