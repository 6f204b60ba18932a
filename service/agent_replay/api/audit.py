"""The audit API: run listings, stored-run projections, thread transcripts, export.

A thin edge over agent_replay.audit and agent_replay.archive; every answer comes from
the runs' maintained columns, the projection cache, or one run's events.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Protocol

from fastapi import APIRouter, Path, Query
from starlette.responses import Response, StreamingResponse

from agent_replay.api.auth import EXPORT_RUN, LIST_RUNS, READ_RUN, READ_THREAD, requires
from agent_replay.api.bodies import GuardedRoute
from agent_replay.api.deps import LogDep
from agent_replay.api.models import ERRORS, ThreadVerifyOut, VerifyOut
from agent_replay.api.pages import page_headers
from agent_replay.api.responses import JSON
from agent_replay.archive.dump import check_chains, export_bytes, export_lines, run_records
from agent_replay.archive.reader import read_archive
from agent_replay.audit.cache import StoredRun, run_projection, thread_messages
from agent_replay.audit.integrity import thread_json, verify_run, verify_thread
from agent_replay.audit.projection import messages_json
from agent_replay.audit.queries import list_runs
from agent_replay.log import MAX_SEQ, AuditReads, Reads
from agent_replay.log.chunks import dumps
from agent_replay.log.filters import STATUSES, RunFilter
from agent_replay.transcript import from_archive, render
from agent_replay.transcript.html import CSS as TRANSCRIPT_CSS


class TranscribedLog(Reads, AuditReads, Protocol):
    """What a transcript reads of the log: the runs' records and their events."""


router = APIRouter(tags=["audit"], responses=ERRORS, route_class=GuardedRoute)

RunId = Annotated[str, Path(description="1-128 characters of A-Z a-z 0-9 . _ : -")]
Normalize = Annotated[bool, Query(description="apply the projector's legacy normalization")]


@router.get("/v1/runs", dependencies=[requires(LIST_RUNS)])
async def get_runs(
    log: LogDep,
    thread_id: str | None = None,
    status: Annotated[
        list[str] | None, Query(description=f"repeatable; one of {', '.join(STATUSES)}")
    ] = None,
    created_after: Annotated[datetime | None, Query(description="inclusive")] = None,
    created_before: Annotated[datetime | None, Query(description="exclusive")] = None,
    agent: str | None = None,
    tool: Annotated[str | None, Query(description="runs that called a tool of this name")] = None,
    has_error: Annotated[
        bool | None, Query(description="the run's last terminal event was RUN_ERROR")
    ] = None,
    error_code: Annotated[
        list[str] | None,
        Query(
            description="repeatable; the code of the run's last RUN_ERROR "
            "(cancelled, abandoned, budget_exhausted, interrupted, upstream_error, or a "
            "producer's own)"
        ),
    ] = None,
    redacted: Annotated[
        bool | None, Query(description="whether any match was redacted in the run")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
) -> Response:
    """Run summaries, newest first (created_at, run_id), one page at a time. With
    `thread_id`, `erased` lists the tombstones of the thread's erased runs (every page)."""
    run_filter = RunFilter(
        thread_id=thread_id,
        statuses=tuple(status or ()),
        created_after=created_after,
        created_before=created_before,
        agent=agent,
        tool=tool,
        has_error=has_error,
        error_codes=tuple(error_code or ()),
        redacted=redacted,
    )
    page = await list_runs(log, run_filter, limit=limit, cursor=cursor)
    body: dict[str, object] = {"runs": page.runs, "next_cursor": page.next_cursor}
    if thread_id is not None:
        # The thread's erased runs: gone from `runs`, listed by their tombstones.
        body["erased"] = [t.to_json() for t in await log.tombstones(thread_id=thread_id)]
    return JSON(body)


@router.get("/v1/runs/{run_id}/messages", dependencies=[requires(READ_RUN)])
async def get_run_messages(
    log: LogDep,
    run_id: RunId,
    at: Annotated[
        int | None, Query(ge=0, le=MAX_SEQ, description="project events with seq <= at")
    ] = None,
    normalize: Normalize = False,
) -> Response:
    """The run's UIMessage[]: finalized once the run is closed (and `at`
    reaches its end), served from the projection cache."""
    run = await log.get_run(run_id)
    projection = await run_projection(
        log, StoredRun(run.run_id, run.last_seq, run.closed), at=at, normalize=normalize
    )
    body = (
        f'{{"run_id":{dumps(run.run_id)},"seq":{projection.upto},'
        f'"finalized":{"true" if projection.finalized else "false"},'
        f'"messages":{projection.messages}}}'
    )
    return Response(body.encode(), media_type="application/json")


@router.get("/v1/threads/{thread_id}/messages", dependencies=[requires(READ_THREAD)])
async def get_thread_messages(
    log: LogDep, thread_id: str, normalize: Normalize = False
) -> Response:
    """The thread's transcript across its runs, user turns included."""
    messages = await thread_messages(log, thread_id, normalize=normalize)
    body = f'{{"thread_id":{dumps(thread_id)},"messages":{messages_json(messages)}}}'
    return Response(body.encode(), media_type="application/json")


@router.get("/v1/runs/{run_id}/export", dependencies=[requires(EXPORT_RUN)])
async def export_run(log: LogDep, run_id: RunId) -> Response:
    """The run as an export file (what `agent-replay export --run` writes, unsigned)."""
    records = await run_records(log, run_id=run_id)
    await check_chains(log, records)
    return StreamingResponse(
        export_lines(log, records),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{run_id}.jsonl"'},
    )


TranscriptFormat = Annotated[
    Literal["markdown", "html", "json"], Query(description="markdown (default), html or json")
]
_TRANSCRIPT_TYPES = {
    "markdown": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "json": "application/json",
}

# An HTML transcript runs no script at all; its one style block is fixed (never the run's).
_HTML_HEADERS = page_headers(styles=[TRANSCRIPT_CSS.encode()])
_NOSNIFF = {"X-Content-Type-Options": "nosniff"}


async def _transcript(
    log: TranscribedLog, fmt: str, *, run_id: str | None = None, thread_id: str | None = None
) -> Response:
    # The same path as `agent-replay transcript --run/--thread`: the export, read back.
    records = await run_records(log, run_id=run_id, thread_id=thread_id)
    archive = read_archive(await export_bytes(log, records))
    headers = _HTML_HEADERS if fmt == "html" else _NOSNIFF
    body = render(from_archive(archive), fmt).encode()
    return Response(body, media_type=_TRANSCRIPT_TYPES[fmt], headers=headers)


@router.get("/v1/runs/{run_id}/transcript", dependencies=[requires(READ_RUN)])
async def run_transcript(
    log: LogDep, run_id: RunId, format: TranscriptFormat = "markdown"
) -> Response:
    """The run as `agent-replay transcript --run` writes it."""
    return await _transcript(log, format, run_id=run_id)


@router.get("/v1/threads/{thread_id}/transcript", dependencies=[requires(READ_THREAD)])
async def thread_transcript(
    log: LogDep, thread_id: str, format: TranscriptFormat = "markdown"
) -> Response:
    """The thread as `agent-replay transcript --thread` writes it."""
    return await _transcript(log, format, thread_id=thread_id)


@router.get(
    "/v1/runs/{run_id}/verify",
    responses={200: {"model": VerifyOut}},
    dependencies=[requires(READ_RUN)],
)
async def verify_run_chain(log: LogDep, run_id: RunId) -> Response:
    """The run's stored events checked against its hash chain: intact, or the first
    altered seq and why (`agent-replay verify --run`)."""
    return JSON((await verify_run(log, run_id)).to_json())


@router.get(
    "/v1/threads/{thread_id}/verify",
    responses={200: {"model": ThreadVerifyOut}},
    dependencies=[requires(READ_THREAD)],
)
async def verify_thread_chains(log: LogDep, thread_id: str) -> Response:
    """Each of the thread's runs checked as `GET /v1/runs/{run_id}/verify` checks it."""
    return JSON(thread_json(thread_id, await verify_thread(log, thread_id)))
