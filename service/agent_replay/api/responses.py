"""JSON responses and the one place errors become HTTP bodies."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response
from starlette.routing import Match

from agent_replay.api.auth import authenticate
from agent_replay.errors import (
    Erased,
    InvalidJson,
    ReplayError,
    RunNotFound,
    StreamNotFound,
    ThreadNotFound,
    Unauthorized,
)
from agent_replay.log import Erasure
from agent_replay.log.chunks import dumps


class JSON(JSONResponse):
    """orjson-backed, and lossless for what the log accepts (lone surrogates)."""

    def render(self, content: Any) -> bytes:
        return dumps(content).encode()


# A 503 says when to try again: the database is away (stopped, restarting, failing over,
# its disk full) and a producer's retry with the same expected_seq is safe. One second:
# the service notices the database is back within about that long.
RETRY_AFTER_SECONDS = 1


def _headers_for(status: int) -> dict[str, str] | None:
    if status == 401:
        return {"WWW-Authenticate": "Bearer"}
    if status == 503:
        return {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return None


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSON:
    body = {"error": {"code": code, "message": message, **extra}}
    return JSON(
        body, status_code=status, headers={**(_headers_for(status) or {}), **(headers or {})}
    )


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


async def on_replay_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ReplayError)
    if isinstance(exc, (RunNotFound, ThreadNotFound, StreamNotFound)):
        exc = await erased_or(request, exc)
    headers = _headers_for(exc.status)
    if isinstance(exc, Unauthorized):
        headers = {"WWW-Authenticate": exc.challenge}
    return JSON(exc.body(), status_code=exc.status, headers=headers)


async def erased_or(
    request: Request, exc: RunNotFound | ThreadNotFound | StreamNotFound
) -> ReplayError:
    """`Erased` in place of a run, stream or thread not found that was erased: every read
    of an erased run answers 410 wherever it looks the run up (one look at the
    tombstones, on the not-found path only); `exc` otherwise, or when the look fails."""
    log = getattr(getattr(request.app.state, "replay", None), "log", None)
    if log is None:
        return exc
    try:
        if isinstance(exc, ThreadNotFound):
            await refuse_erased(log, thread_id=exc.thread_id)
        else:
            await refuse_erased(log, run_id=exc.run_id)
    except Erased as erased:
        return erased
    except ReplayError:
        pass
    return exc


async def refuse_erased(
    log: Erasure, *, run_id: str | None = None, thread_id: str | None = None
) -> None:
    """`Erased` if the run (or the thread) was erased: for a route that answers a run or
    thread it does not find otherwise than 404 (an empty chat, a stream not resumable)."""
    if thread_id is not None:
        found = await log.tombstones(thread_id=thread_id)
        what = f"thread {thread_id[:160]!r}"
    else:
        found = await log.tombstones(run_ids=[run_id] if run_id is not None else [])
        what = f"run {(run_id or '')[:160]!r}"
    if found:
        at = max(t.erased_at for t in found).isoformat()
        raise Erased(f"{what} was erased at {at}; only its tombstone remains")


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    # FastAPI's own refusal of a body it cannot read (400) comes before any dependency;
    # a wrong path or method (404, 405) is about the route, answered before any credential.
    if exc.status_code not in (404, 405):
        try:
            await authenticate(request)
        except ReplayError as refused:
            return await on_replay_error(request, refused)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    message = str(exc.detail)
    if exc.status_code == 404 and message == "Not Found":  # the router's: no such route
        message = f"no route {request.method} {request.url.path}; see /docs"
    elif exc.status_code == 405:
        allowed = ", ".join(_allowed_methods(request))
        message = f"{request.method} is not allowed on {request.url.path} (allowed: {allowed})"
        return error_response(405, code, message, headers={"Allow": allowed})
    return error_response(exc.status_code, code, message, headers=exc.headers)


def _allowed_methods(request: Request) -> list[str]:
    # Starlette's Allow names only the first route whose path matched; a path served by
    # several routes (GET and PUT /v1/runs/{id}) allows all of theirs. Asked route by
    # route, method by method (this only runs on a 405).
    return [
        method
        for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.routes
        )
    ]


async def on_unexpected_error(request: Request, exc: Exception) -> Response:
    # Still the one error shape; the traceback goes to the log, not the client.
    logging.getLogger("replay").error("unhandled error on %s", request.url.path, exc_info=exc)
    return error_response(500, "internal", "the service failed to handle this request")


async def on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    # Authentication first, even when the body could not be parsed: a refusal of the
    # body must not tell an unauthenticated caller anything (it would come before the 401).
    try:
        await authenticate(request)
    except ReplayError as refused:
        return await on_replay_error(request, refused)
    for err in exc.errors():
        # FastAPI parses a JSON body before it validates anything: one code for a body
        # that is not JSON, on every route, as the append routes answer it.
        if err.get("type") == "json_invalid":
            error = InvalidJson(
                f"the body is not valid JSON: {(err.get('ctx') or {}).get('error')}"
            )
            return JSON(error.body(), status_code=error.status)
    problems = [
        f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg')}" for err in exc.errors()
    ]
    return error_response(
        422, "invalid_request", "; ".join(problems) or "invalid request", details=problems
    )
