"""Runs and their events: create, append, close, read. A thin edge over EventLog."""

from __future__ import annotations

import logging
import time
from datetime import datetime
from types import TracebackType
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel
from starlette.responses import Response

from agent_replay import metrics
from agent_replay.api.auth import APPEND, FORK_RUN, READ_RUN, authorize, requires
from agent_replay.api.bodies import GuardedRoute, is_json, media_type, read_bounded
from agent_replay.api.deps import AppState, LogDep, StateDep, state_of
from agent_replay.api.models import (
    ERRORS,
    AppendIn,
    AppendOut,
    ErrorOut,
    EventsPage,
    ForkIn,
    ForkOut,
    RunCreate,
    RunOut,
)
from agent_replay.api.responses import JSON
from agent_replay.errors import (
    ContentTypeMismatch,
    ForkSourceNotFound,
    InvalidForkOffset,
    InvalidRequest,
    OffsetOutOfRange,
    PayloadTooLarge,
    ReplayError,
    RunConflict,
    RunNotFound,
    StreamConflict,
    UnknownFormat,
    UnsupportedMediaType,
)
from agent_replay.ingest import (
    HISTORY_EVENTS,
    Batch,
    UIBatch,
    UIChunkMapper,
    append_redacted,
    expected_from_query,
    map_ui_batch,
    needs_history,
    parse_json_batch,
    parse_ndjson_batch,
    read_ui_batch,
    record,
)
from agent_replay.log import MAX_SEQ, check_run_id
from agent_replay.log.chunks import dumps, loads
from agent_replay.log.filters import EventFilter
from agent_replay.log.store import RUN_ID
from agent_replay.log.typefilter import TypeFilter

log = logging.getLogger("replay.api")

router = APIRouter(prefix="/v1/runs", tags=["runs"], responses=ERRORS, route_class=GuardedRoute)

RunId = Annotated[str, Path(description="1-128 characters of A-Z a-z 0-9 . _ : -")]
NDJSON = "application/x-ndjson"


@router.put(
    "/{run_id}",
    status_code=201,
    responses={200: {"model": RunOut}, 201: {"model": RunOut}},
    dependencies=[requires(APPEND)],
)
async def create_run(state: StateDep, run_id: RunId, body: RunCreate | None = None) -> Response:
    """Create a run (idempotent: the same request again answers 200)."""
    body = body or RunCreate()
    limit = state.settings.max_metadata_bytes
    if body.metadata is not None and len(dumps(body.metadata).encode()) > limit:
        # Every listing of runs carries it: bounded on its own, well below a body's limit.
        raise PayloadTooLarge(f"the metadata is over {limit} bytes as JSON", limit=limit)
    run, created = await state.log.create_run(
        run_id, thread_id=body.thread_id, metadata=body.metadata
    )
    return JSON(run.to_json(), status_code=201 if created else 200)


async def append_events(request: Request) -> Response:
    """Append a batch durably; answers after commit. Creates the run if missing.

    The body is `{"events": [...], "expected_seq"?: N, "close"?: bool}`, or
    NDJSON (one chunk per line) with `?expected_seq=&close=`. With `?format=ai-sdk`
    the chunks are AI SDK UI message stream chunks, mapped into AG-UI events.
    """
    # A plain Starlette endpoint, the only handler of this route: FastAPI's
    # dependency solving and validation cost more CPU than the append itself,
    # and single-chunk producers post thousands a second. Its OpenAPI entry is
    # `document_append`'s.
    with _Counted():
        state = state_of(request)
        await authorize(request, APPEND)
        expected_seq, close, ai_sdk = None, False, False
        if request.scope.get("query_string"):  # most appends have none: skip parsing it
            query = request.query_params
            expected_seq = expected_from_query(query.get("expected_seq"))
            close_text = query.get("close", "false").lower()
            if close_text not in _BOOLEANS:
                raise InvalidRequest("close must be true or false")
            close = _BOOLEANS[close_text]
            ai_sdk = _ai_sdk_format(query.get("format"))
        run_id = request.path_params["run_id"]
        return await _append(request, state, run_id, expected_seq, close, ai_sdk)


_APPENDS_OK = metrics.APPEND_REQUESTS.labels("ok")


class _Counted:
    """An append request's outcome (ok or the error code) and, if acknowledged, its duration."""

    __slots__ = ("_started",)

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if ev is None:
            metrics.APPEND_DURATION.observe(time.perf_counter() - self._started)
            _APPENDS_OK.inc()
        else:
            outcome = ev.code if isinstance(ev, ReplayError) else "internal"
            metrics.APPEND_REQUESTS.labels(outcome).inc()


_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _ai_sdk_format(text: str | None) -> bool:
    """`?format=`: whether the chunks are AI SDK UI message stream chunks."""
    if text is None or text == "ag-ui":
        return False
    if text == "ai-sdk":
        return True
    raise UnknownFormat(f"format={text!r}: expected ag-ui (the default) or ai-sdk")


async def _ui_events(state: AppState, run_id: str, chunks: UIBatch) -> Batch:
    """An append of UI chunks as the AG-UI events they become on `run_id`: the mapper is
    told what it needs of the run (whether it started; the parts and tool calls it
    started, when a chunk's mapping depends on them)."""
    run = await state.log.find_run(run_id)
    thread = run.thread_id if run is not None and run.thread_id else run_id
    mapper = UIChunkMapper(run_id, thread)
    mapper.started = run is not None and run.last_seq > 0
    if run is not None and run.last_seq > 0 and needs_history(chunks.chunks, mapper):
        earlier = EventFilter(HISTORY_EVENTS)
        after = 0
        while page := await state.log.read_filtered(run_id, earlier, after, 1000):
            for event in page:
                mapper.observe(loads(event.chunk))
            after = page[-1].seq
    return map_ui_batch(chunks, mapper, state.limits)


async def _append(
    request: Request,
    state: AppState,
    run_id: str,
    expected_seq: int | None,
    close: bool,
    ai_sdk: bool = False,
) -> Response:
    check_run_id(run_id)
    media = media_type(request)
    ndjson = media in (NDJSON, "application/jsonl", "application/ndjson")
    if not ndjson and not is_json(media):  # refused before the body is read
        raise UnsupportedMediaType(
            f"unsupported Content-Type {media!r}: send application/json or {NDJSON}"
        )
    if not ndjson and (expected_seq is not None or close):
        raise InvalidRequest("with a JSON body, put expected_seq and close in the body")
    limits = state.limits
    body = await read_bounded(request, limits.max_batch_bytes, "the batch")
    if ai_sdk:
        ui = read_ui_batch(body, limits, ndjson=ndjson, expected_seq=expected_seq, close=close)
        batch = await _ui_events(state, run_id, ui)
    elif ndjson:
        batch = parse_ndjson_batch(
            body,
            limits,
            expected_seq=expected_seq,
            close=close,
            columns_from=state.settings.batch_min_events or None,
        )
    else:
        # From the log's batch-row threshold on, an append's chunks may stay columns.
        batch = parse_json_batch(body, limits, state.settings.batch_min_events or None)
    if not batch.chunks:
        # Nothing to store: an empty append names an existing run, it never creates one.
        await state.log.get_run(run_id)
    if state.redact is None:
        result = await state.log.append(
            run_id, batch.chunks, expected_seq=batch.expected_seq, close=batch.close
        )
    else:
        # Redacted from the text the run holds back, which the append replaces, with
        # the run's counts, in its own statement (docs/concepts/redaction.md).
        result, counts = await append_redacted(
            state.log,
            state.redact,
            run_id,
            batch.chunks,
            expected_seq=batch.expected_seq,
            close=batch.close,
            known=state.holds,
        )
        record(counts)  # committed: /metrics counts what is stored
    return JSON({"run_id": run_id, "first_seq": result.first_seq, "last_seq": result.last_seq})


# The append route's OpenAPI entry. The route itself is a plain Starlette
# endpoint (FastAPI's dependency solving and validation would cost more CPU
# than the append), so its operation is written here, from the same models,
# and merged into the document FastAPI builds (see agent_replay.api.app).
_ERROR_STATUSES = (400, 401, 403, 404, 409, 413, 415, 422)


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def document_append(schema: dict[str, Any]) -> None:
    """Add `POST /v1/runs/{run_id}/events` (and the schemas it names) to `schema`."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for model in (AppendIn, AppendOut, ErrorOut):
        model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(model_schema.pop("$defs", {}))
        components[model.__name__] = model_schema
    responses: dict[str, Any] = {
        "200": {
            "description": "Appended (after commit)",
            "content": {"application/json": {"schema": _ref(AppendOut)}},
        }
    }
    for status in _ERROR_STATUSES:
        responses[str(status)] = {
            "description": "Rejected; nothing was appended",
            "content": {"application/json": {"schema": _ref(ErrorOut)}},
        }
    operation = {
        "tags": ["runs"],
        "summary": "Append Events",
        "description": (append_events.__doc__ or "").strip(),
        "operationId": "append_events_v1_runs__run_id__events_post",
        "parameters": [
            {"name": "run_id", "in": "path", "required": True,
             "schema": {"type": "string", "pattern": RUN_ID.pattern},
             "description": "1-128 characters of A-Z a-z 0-9 . _ : -"},
            {"name": "expected_seq", "in": "query", "required": False,
             "schema": {"type": "integer", "minimum": 1, "maximum": MAX_SEQ},
             "description": "NDJSON bodies only"},
            {"name": "close", "in": "query", "required": False,
             "schema": {"type": "boolean", "default": False},
             "description": "NDJSON bodies only"},
            {"name": "format", "in": "query", "required": False,
             "schema": {"type": "string", "enum": ["ag-ui", "ai-sdk"], "default": "ag-ui"},
             "description": "ai-sdk: the chunks are AI SDK UI message stream chunks, "
                            "mapped into AG-UI events"},
        ],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": _ref(AppendIn)},
                NDJSON: {"schema": {"type": "string", "description": "one AG-UI chunk per line"}},
            },
        },
        "responses": responses,
        "security": [{"bearer": []}, {"token": []}],
        "x-access": APPEND.describe(),
    }  # fmt: skip
    schema.setdefault("paths", {}).setdefault("/v1/runs/{run_id}/events", {})["post"] = operation


@router.post("/{run_id}/close", responses={200: {"model": RunOut}}, dependencies=[requires(APPEND)])
async def close_run(state: StateDep, run_id: RunId) -> Response:
    """Close the run's log (idempotent). Appends after this get 409 run_closed."""
    if state.redact is None:
        run = await state.log.close_run(run_id)
        return JSON(run.to_json())
    # Text the run still holds back goes out (redacted as complete text) before the close,
    # in the statement that closes it: it was acknowledged when it was appended.
    check_run_id(run_id)
    _, counts = await append_redacted(
        state.log, state.redact, run_id, [], close=True, create=False, known=state.holds
    )
    record(counts)
    return JSON((await state.log.get_run(run_id)).to_json())


@router.post(
    "/{run_id}/fork",
    status_code=201,
    responses={200: {"model": ForkOut}},
    dependencies=[requires(FORK_RUN)],
)
async def fork_run(state: StateDep, run_id: RunId, body: ForkIn) -> Response:
    """A cheap branch of the run ("retry from here"): a new run whose first `at_seq`
    events are this run's (shared, not copied), open for appends of its own."""
    check_run_id(run_id)
    check_run_id(body.run_id)
    if body.at_seq is not None and not 0 <= body.at_seq <= MAX_SEQ:
        raise InvalidRequest(f"at_seq must be from 0 to {MAX_SEQ}")
    try:
        fork, fork_seq, created = await state.durable.fork_run(run_id, body.run_id, body.at_seq)
    except ForkSourceNotFound:
        raise RunNotFound(run_id) from None
    except InvalidForkOffset:
        last = (await state.log.get_run(run_id)).last_seq
        raise OffsetOutOfRange(
            f"at_seq {body.at_seq} is beyond run {run_id!r}'s last event ({last})", last_seq=last
        ) from None
    except (StreamConflict, ContentTypeMismatch):
        # Said without the taken run's details: the caller may not be able to read it.
        raise RunConflict(f"run {body.run_id!r} exists and is not this fork") from None
    run = await state.log.get_run(fork)
    out = {**run.to_json(), "forked_from": run_id, "fork_seq": fork_seq}
    return JSON(out, status_code=201 if created else 200)


@router.get("/{run_id}", responses={200: {"model": RunOut}}, dependencies=[requires(READ_RUN)])
async def get_run(log: LogDep, run_id: RunId) -> Response:
    run = await log.get_run(run_id)
    return JSON(run.to_json())


@router.get(
    "/{run_id}/events", responses={200: {"model": EventsPage}}, dependencies=[requires(READ_RUN)]
)
async def list_events(
    log: LogDep,
    run_id: RunId,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ, description="Only events with seq > after")] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    type: Annotated[list[str] | None, Query(description="repeatable: only these types")] = None,
    types: Annotated[
        str | None,
        Query(description="comma-separated types, `*` as a suffix wildcard (`TOOL_CALL_*`)"),
    ] = None,
    received_after: Annotated[datetime | None, Query(description="inclusive")] = None,
    received_before: Annotated[datetime | None, Query(description="exclusive")] = None,
) -> Response:
    """A page of the log in seq order; `next_after` continues it (null at the end)."""
    run = await log.get_run(run_id)
    patterns = TypeFilter.parse(types) if types is not None else None
    event_filter = EventFilter(tuple(type or ()), patterns, received_after, received_before)
    if event_filter.empty:
        events = await log.read_events(run_id, after, limit, through=run.last_seq)
    else:
        events = await log.read_filtered(run_id, event_filter, after, limit)
    # Stored chunks are JSON text already: splice them in rather than re-encode.
    items = ",".join(
        f'{{"seq":{e.seq},"type":{dumps(e.type)},"received_at":"{e.received_at.isoformat()}",'
        f'"chunk":{e.chunk}}}'
        for e in events
    )
    # A filtered page shorter than the limit has scanned to the end.
    more = (
        bool(events)
        and events[-1].seq < run.last_seq
        and (event_filter.empty or len(events) == limit)
    )
    next_after = str(events[-1].seq) if more else "null"
    return Response(
        f'{{"events":[{items}],"next_after":{next_after}}}'.encode(),
        media_type="application/json",
    )
