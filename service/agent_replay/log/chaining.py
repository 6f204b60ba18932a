"""The backfill: chains for the runs stored before the hash chain (revision 0011_hash_chain).

That revision leaves every existing run's head NULL, and an append to such a run
stores its rows without hashes (agent_replay.log.queries.sql `append`): the chain
of a run is computed here, all of it at once, under the run row's lock, which
every append to the run waits for. So an append either committed before (its
rows are read and chained here) or goes after (it finds the head set and chains
its rows from it): no run is ever chained from a head that was not its last.

Batched: a few runs per transaction (locked in run id order, as appends and
imports lock theirs, so none waits on another in a cycle; an append waits at most
for one batch), each run's rows updated in pages. Resumable: every
batch takes runs whose head is still NULL, so an interrupted backfill is
finished by running it again (`agent-replay migrate` does, after alembic).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import asyncpg

from agent_replay.chain import GENESIS, step
from agent_replay.log.faults import translated
from agent_replay.log.reading import chained_rows
from agent_replay.log.rows import SEP
from agent_replay.log.sql import QUERIES

_UNCHAINED = QUERIES["unchained_runs"]
_COUNT = QUERIES["count_unchained"]
_SET_HASHES = QUERIES["set_row_hashes"]
_SET_HEAD = QUERIES["set_chain_head"]

# Rows read (and their hashes written) per statement.
_PAGE = 500

_log = logging.getLogger("replay.log")


@dataclass(slots=True)
class BackfillReport:
    runs: int = 0
    rows: int = 0
    left: int = 0


async def backfill(
    pool: asyncpg.Pool, *, runs_per_batch: int = 20, max_batches: int | None = None
) -> BackfillReport:
    """Chain every run whose head is NULL, `runs_per_batch` per transaction; stops after
    `max_batches` (None: when none is left). `left` counts the runs still unchained."""
    report = BackfillReport()
    batches = 0
    with translated("the chain backfill failed"):
        while max_batches is None or batches < max_batches:
            async with pool.acquire() as conn, conn.transaction():
                runs = await conn.fetch(_UNCHAINED, runs_per_batch)
                for run in runs:
                    report.rows += await _chain(conn, run["run_id"])
            report.runs += len(runs)
            batches += 1
            if not runs:
                break
            _log.info("chained %d runs so far", report.runs)
        report.left = int(await pool.fetchval(_COUNT))
    return report


async def _chain(conn: asyncpg.pool.PoolConnectionProxy, run_id: str) -> int:
    """Chain run `run_id` (its row locked by the caller): every row it owns gets its
    hashes, the run its head. A fork's inherited prefix is read to chain from, not
    written: its rows are its source's. Returns the rows written."""
    head = GENESIS
    after = 0
    written = 0
    while True:
        rows = await chained_rows(conn, run_id, after, _PAGE)
        seqs: list[int] = []
        hashes: list[bytes] = []
        for row in rows:
            seq, n, chunk, lo, hi, owner = (row["seq"], row["n"], row["chunk"],
                                            row["lo"], row["hi"], row["owner"])  # fmt: skip
            texts = [chunk] if n == 1 else chunk.split(SEP)
            first = seq - n + 1
            if owner == run_id:
                mine = b""
                for i, text in enumerate(texts):
                    head = step(head, first + i, text)
                    mine += head
                seqs.append(seq)
                hashes.append(mine)
            else:
                for i, text in enumerate(texts):
                    if lo < first + i <= hi:
                        head = step(head, first + i, text)
            after = min(seq, hi)
        if seqs:
            await conn.execute(_SET_HASHES, run_id, seqs, hashes)
            written += len(seqs)
        if len(rows) < _PAGE:
            break
    await conn.execute(_SET_HEAD, run_id, head)
    return written
