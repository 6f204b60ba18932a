"""The Durable Streams edge: `/v1/stream/{name}` (names may hold `/`).

A plain Starlette endpoint, thin on purpose: it reads the body (bounded),
checks the key, adds the browser security headers, and copies
`agent_replay.durable.protocol`'s replies out. Refusals keep the service's error
body and carry the protocol's headers (`Stream-Closed`, `Producer-Epoch`...).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from urllib.parse import quote

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from agent_replay.api.auth import READ, WRITE, authorize
from agent_replay.api.deps import state_of
from agent_replay.api.responses import JSON, RETRY_AFTER_SECONDS, erased_or
from agent_replay.durable.protocol import Live, Reply, Streams, error_headers
from agent_replay.errors import (
    InvalidOffset,
    InvalidParameter,
    PayloadTooLarge,
    ReplayError,
    StreamNotFound,
    Unauthorized,
)

METHODS = "GET, POST, PUT, DELETE, HEAD, OPTIONS"
# On every answer. CORS is the edge's (agent_replay.api.edge.Cors, REPLAY_CORS_ORIGINS).
# A stream's body is whatever its writer sent, of any type (text/html, image/svg+xml):
# it must never run as a page of the service's origin, where the inspector and the
# demo keep their credential. Sandboxed, nothing loadable, never framed, not sniffed;
# no other site may embed it (a listed origin reads it with CORS, which CORP allows).
BASE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox; default-src 'none'; frame-ancestors 'none'",
    "Cross-Origin-Resource-Policy": "same-origin",
}
# On reads with a body: a browser sent to the URL saves it, it does not show it.
READ_HEADERS = {**BASE_HEADERS, "Content-Disposition": "attachment"}
MAX_NAME = 1024
# What PostgreSQL text cannot hold.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is over {limit} bytes")
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise PayloadTooLarge(f"the body is over {limit} bytes")
        parts.append(part)
    return b"".join(parts)


def _one(request: Request, key: str) -> str | None:
    values = request.query_params.getlist(key)
    if len(values) > 1:
        raise InvalidParameter(f"?{key}= given {len(values)} times")
    return values[0] if values else None


async def _handle(request: Request, streams: Streams, name: str) -> Reply | Live:
    method = request.method
    if method == "GET":
        offset = _one(request, "offset")
        if offset == "":
            raise InvalidOffset("?offset= is empty", offset="")
        return await streams.read(
            name,
            offset,
            _one(request, "live"),
            _one(request, "cursor"),
            request.headers.get("if-none-match"),
        )
    if method == "HEAD":
        return await streams.head(name)
    if method == "DELETE":
        return await streams.delete(name)
    limit = streams.limits.max_body_bytes
    if method == "PUT":
        body = await _body(request, limit)
        # Percent-encoded: a header carries Latin-1 only, and a name may hold any character.
        location = str(request.url.replace(path=quote(request.url.path), query=None, fragment=None))
        return await streams.create(name, request.headers, body, location)
    if method == "POST":
        return await streams.append(name, request.headers, await _body(request, limit))
    return Reply(405, {"Allow": METHODS})


def _error(exc: ReplayError, head: bool) -> Response:
    headers = {**BASE_HEADERS, **error_headers(exc)}
    if exc.status == 503:  # the database away, or a replica draining: retry (elsewhere)
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = exc.challenge
    if head:
        return Response(status_code=exc.status, headers=headers)
    return JSON(exc.body(), status_code=exc.status, headers=headers)


async def _frames(live: Live) -> AsyncIterator[bytes]:
    try:
        async for frame in live.frames:
            yield frame
    except ReplayError:
        return  # the stream went away mid-response (deleted): end it; a reconnect gets the 404


async def stream_endpoint(request: Request) -> Response:
    if request.method == "OPTIONS":
        # A listed origin's preflight was answered by the CORS layer; this is a plain one.
        return Response(status_code=204, headers={**BASE_HEADERS, "Allow": METHODS})
    head = request.method == "HEAD"
    try:
        # Reads need `read`, every write (create, append, delete) `append`; no tokens.
        await authorize(request, READ if head or request.method == "GET" else WRITE)
        name = request.path_params["name"]
        if not name or len(name) > MAX_NAME:
            raise InvalidParameter(f"a stream name is 1 to {MAX_NAME} characters")
        if _UNSTORABLE.search(name):
            raise InvalidParameter("a stream name may not hold NUL or an unpaired surrogate")
        streams = state_of(request).durable
        result = await _handle(request, streams, name)
    except ReplayError as exc:
        if isinstance(exc, StreamNotFound):
            exc = await erased_or(request, exc)
        return _error(exc, head)
    except ClientDisconnect:
        return Response(status_code=400)
    except asyncio.CancelledError:
        raise
    if isinstance(result, Live):
        return StreamingResponse(_frames(result), headers={**READ_HEADERS, **result.headers})
    base = READ_HEADERS if request.method == "GET" else BASE_HEADERS
    response = Response(result.body, status_code=result.status, headers=base)
    response.headers.update(result.headers)
    if result.status in (204, 304) or head:
        # No body, and no Content-Length a 204/304 may not carry.
        del response.headers["content-length"]
    return response
