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
from typing import Any, Protocol

from agent_replay.audit.projection import (
    PROJECTOR_VERSION,
    messages_json,
    parse_messages,
    project_run,
)
from agent_replay.audit.threads import ThreadRun, assemble_thread
from agent_replay.errors import OffsetOutOfRange, ThreadNotFound
from agent_replay.log import AuditReads, Reads


class ProjectedLog(Reads, AuditReads, Protocol):
    """What projections read of the log: runs' events, their records, the cache."""


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


async def _chunk_texts(log: Reads, run: StoredRun, upto: int) -> list[str]:
    """The run's stored chunks up to seq `upto` (a fork's prefix included), in one read."""
    if upto <= 0:
        return []
    return [event.chunk for event in await log.read_events(run.run_id, 0, upto)]


async def _project(run_id: str, texts: list[str], normalize: bool, finalize: bool) -> str:
    # CPU-bound for long logs: off the event loop.
    def work() -> str:
        return messages_json(project_run(run_id, texts, normalize=normalize, finalize=finalize))

    return await asyncio.to_thread(work)


async def final_projections(
    log: ProjectedLog, closed: Sequence[StoredRun], normalize: bool
) -> dict[str, str]:
    """Closed runs' final projections: from the cache, building what is missing."""
    last_seqs = {run.run_id: run.last_seq for run in closed}
    found = await log.cached_projections(last_seqs, normalize, PROJECTOR_VERSION)
    missing = [run for run in closed if run.run_id not in found]
    if missing:
        texts = {run.run_id: await _chunk_texts(log, run, run.last_seq) for run in missing}
        built = {
            run.run_id: await _project(run.run_id, texts[run.run_id], normalize, True)
            for run in missing
        }
        made = [(run.run_id, run.last_seq, built[run.run_id]) for run in missing]
        await log.store_projections(made, normalize, PROJECTOR_VERSION)
        found.update(built)
    return found


async def run_projection(
    log: ProjectedLog, run: StoredRun, *, at: int | None = None, normalize: bool = False
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
        texts = await final_projections(log, [run], normalize)
        return Projection(upto, True, texts[run.run_id])
    chunks = await _chunk_texts(log, run, upto)
    return Projection(upto, False, await _project(run.run_id, chunks, normalize, False))


async def thread_runs(
    log: AuditReads, thread_id: str, *, hosted_only: bool = False
) -> list[StoredRun]:
    """The thread's runs, oldest first; `hosted_only`: those an agent of the service ran."""
    return [
        StoredRun(r.run_id, r.last_seq, r.closed_at is not None, r.input)
        for r in await log.thread_records(thread_id)
        if not hosted_only or r.agent is not None
    ]


async def thread_messages(
    log: ProjectedLog, thread_id: str, *, normalize: bool = False
) -> list[dict[str, Any]]:
    """The thread's transcript: user turns from inputs, assistant turns from
    projections (cached for closed runs; open runs as they stand)."""
    stored = await thread_runs(log, thread_id)
    if not stored:
        raise ThreadNotFound(thread_id)
    texts = await final_projections(log, [r for r in stored if r.closed], normalize)
    for run in stored:
        if not run.closed:
            texts[run.run_id] = (await run_projection(log, run, normalize=normalize)).messages
    return assemble_thread(
        ThreadRun(run.run_id, run.input, parse_messages(texts[run.run_id])) for run in stored
    )
