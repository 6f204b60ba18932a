"""Projections of stored runs, with the projection cache.

A closed run's log never changes, so its final projection is built once,
stored in `run_projections`, and served from there (a thread of a hundred
closed runs is a hundred cached texts, not a hundred replays). Open runs,
and views "as of" an earlier seq, are projected from the log on each read
and never cached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent_replay.audit.projection import (
    PROJECTOR_VERSION,
    messages_json,
    parse_messages,
    project_run,
)
from agent_replay.audit.threads import ThreadRun, assemble_thread
from agent_replay.errors import OffsetOutOfRange, ThreadNotFound
from agent_replay.log.chunks import storable
from agent_replay.log.rows import BATCH_MAX, chunks_of
from agent_replay.log.schema import events, run_forks, run_projections, runs


@dataclass(frozen=True, slots=True)
class StoredRun:
    run_id: str
    last_seq: int
    closed: bool
    input: str | None = None


@dataclass(frozen=True, slots=True)
class Projection:
    upto: int  # the last seq projected
    finalized: bool
    messages: str  # UIMessage[] as JSON text


async def _cached(
    conn: AsyncConnection, wanted: Sequence[StoredRun], normalize: bool
) -> dict[str, str]:
    if not wanted:
        return {}
    last_seqs = {run.run_id: run.last_seq for run in wanted}
    rows = await conn.execute(
        select(run_projections.c.run_id, run_projections.c.last_seq, run_projections.c.messages)
        .where(run_projections.c.run_id.in_(list(last_seqs)))
        .where(run_projections.c.normalize == normalize)
        .where(run_projections.c.projector_version == PROJECTOR_VERSION)
    )
    # A last_seq mismatch means the run was pruned and imported again.
    return {r.run_id: r.messages for r in rows if last_seqs.get(r.run_id) == r.last_seq}


async def _chunk_texts(
    conn: AsyncConnection, run_ids: Sequence[str], upto: int | None = None
) -> dict[str, list[str]]:
    # The runs' months, as values: the events' read then touches only their partitions.
    months = (
        await conn.execute(
            select(runs.c.run_month).where(runs.c.run_id.in_(list(run_ids))).distinct()
        )
    ).scalars()
    query = select(events.c.run_id, events.c.seq, events.c.n, events.c.chunk).where(
        events.c.run_id.in_(list(run_ids)), events.c.run_month.in_(list(months))
    )
    if upto is not None:
        # A batch row may hold seqs past `upto` (agent_replay.log.rows).
        query = query.where(events.c.seq < upto + BATCH_MAX, events.c.seq - events.c.n < upto)
    rows: dict[str, list[tuple[int, int, str]]] = {run_id: [] for run_id in run_ids}
    for row in await conn.execute(query.order_by(events.c.run_id, events.c.seq)):
        rows[row.run_id].append((row.seq, row.n, row.chunk))
    texts = {run: [text for _, text in chunks_of(own, 0, upto)] for run, own in rows.items()}
    # A fork's first events are its source's up to the fork point (shared, not copied).
    forks = await conn.execute(
        select(run_forks.c.run_id, run_forks.c.source_run_id, run_forks.c.fork_seq).where(
            run_forks.c.run_id.in_(list(run_ids))
        )
    )
    for fork in list(forks):
        bound = fork.fork_seq if upto is None else min(upto, fork.fork_seq)
        prefix = await _chunk_texts(conn, [fork.source_run_id], bound)
        texts[fork.run_id] = prefix[fork.source_run_id] + texts[fork.run_id]
    return texts


async def _store(conn: AsyncConnection, run: StoredRun, normalize: bool, text: str) -> None:
    statement = insert(run_projections).values(
        run_id=run.run_id,
        normalize=normalize,
        last_seq=run.last_seq,
        projector_version=PROJECTOR_VERSION,
        messages=text,
    )
    await conn.execute(
        statement.on_conflict_do_update(
            index_elements=["run_id", "normalize"],
            set_={
                "last_seq": statement.excluded.last_seq,
                "projector_version": statement.excluded.projector_version,
                "messages": statement.excluded.messages,
                "created_at": statement.excluded.created_at,
            },
        )
    )


async def _project(run_id: str, texts: list[str], normalize: bool, finalize: bool) -> str:
    # CPU-bound for long logs: off the event loop.
    def work() -> str:
        return messages_json(project_run(run_id, texts, normalize=normalize, finalize=finalize))

    return await asyncio.to_thread(work)


async def final_projections(
    engine: AsyncEngine, closed: Sequence[StoredRun], normalize: bool
) -> dict[str, str]:
    """Closed runs' final projections: from the cache, building what is missing."""
    async with engine.connect() as conn:
        found = await _cached(conn, closed, normalize)
        missing = [run for run in closed if run.run_id not in found]
        texts = await _chunk_texts(conn, [run.run_id for run in missing]) if missing else {}
    if missing:
        built = {
            run.run_id: await _project(run.run_id, texts[run.run_id], normalize, True)
            for run in missing
        }
        async with engine.begin() as conn:
            for run in missing:
                await _store(conn, run, normalize, built[run.run_id])
        found.update(built)
    return found


async def run_projection(
    engine: AsyncEngine, run: StoredRun, *, at: int | None = None, normalize: bool = False
) -> Projection:
    """The run's messages as of `at` (default: everything); finalized only
    when the run is closed and the view reaches its end."""
    upto = run.last_seq if at is None else at
    if upto > run.last_seq:
        raise OffsetOutOfRange(
            f"run {run.run_id!r} is at seq {run.last_seq}; there is no seq {upto} yet",
            last_seq=run.last_seq,
        )
    if run.closed and upto == run.last_seq:
        texts = await final_projections(engine, [run], normalize)
        return Projection(upto, True, texts[run.run_id])
    async with engine.connect() as conn:
        chunks = (await _chunk_texts(conn, [run.run_id], upto))[run.run_id]
    return Projection(upto, False, await _project(run.run_id, chunks, normalize, False))


async def thread_runs(
    engine: AsyncEngine, thread_id: str, *, hosted_only: bool = False
) -> list[StoredRun]:
    """The thread's runs, oldest first; `hosted_only`: those an agent of the service ran."""
    query = (
        select(runs.c.run_id, runs.c.last_seq, runs.c.closed_at, runs.c.input)
        .where(runs.c.thread_id == storable(thread_id))
        .order_by(runs.c.created_at, runs.c.run_id)
    )
    if hosted_only:
        query = query.where(runs.c.agent.is_not(None))
    async with engine.connect() as conn:
        rows = await conn.execute(query)
        return [StoredRun(r.run_id, r.last_seq, r.closed_at is not None, r.input) for r in rows]


async def thread_messages(
    engine: AsyncEngine, thread_id: str, *, normalize: bool = False
) -> list[dict[str, Any]]:
    """The thread's transcript: user turns from inputs, assistant turns from
    projections (cached for closed runs; open runs as they stand)."""
    stored = await thread_runs(engine, thread_id)
    if not stored:
        raise ThreadNotFound(thread_id)
    texts = await final_projections(engine, [r for r in stored if r.closed], normalize)
    for run in stored:
        if not run.closed:
            texts[run.run_id] = (await run_projection(engine, run, normalize=normalize)).messages
    return assemble_thread(
        ThreadRun(run.run_id, run.input, parse_messages(texts[run.run_id])) for run in stored
    )
