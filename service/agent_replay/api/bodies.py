"""Request bodies at the edge: the credential first, then the type, the size, and one parse.

Every FastAPI route of the service is a `GuardedRoute` (`APIRouter(route_class=...)`),
which admits a request before FastAPI reads a byte of its body:

1. the credential, on a route with an access rule while keys are set: none or an unknown
   one is 401, so an unauthenticated caller cannot make the server read (or hold) its body;
2. the type: POST, PUT and PATCH say JSON, body or not, else 415. A page on another origin
   can send text, a form or no type at all without a CORS preflight (a `no-cors` fetch);
   it cannot send JSON without one, so no cross-site page reaches a write here;
3. the size: a declared Content-Length over `max_body_bytes` is 413 at once, and a chunked
   body is counted as it arrives and cut at the limit;
4. the parse: once, by the log's exact parser (UTF-8, no NaN, lone surrogates and big
   numbers kept); a body it refuses is 400 invalid_json before the route runs. The access
   rule (agent_replay.api.auth) and the route's model read that one parsed value: no body can
   name one run to the rule and another to the route.

The two plain Starlette routes do the same themselves: the append route (its batch limit,
JSON or NDJSON) and Durable Streams (its protocol takes any type).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from agent_replay.api.auth import PARSED_BODY, check_credential, rule_of
from agent_replay.errors import InvalidJson, PayloadTooLarge, UnsupportedMediaType
from agent_replay.ingest import whole_number
from agent_replay.log.chunks import loads

# The methods that change something: their Content-Type must say JSON, body or not.
WRITES = frozenset({"POST", "PUT", "PATCH"})


def media_type(request: Request) -> str:
    """The body's media type, lowercased, without parameters ("" when none is named)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def is_json(media: str) -> bool:
    # No type at all is not JSON: it is what a cross-site page sends without a preflight.
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def check_declared_size(request: Request, limit: int, what: str = "the body") -> None:
    """413 when the request declares a body over `limit`, before any of it is read."""
    declared = request.headers.get("content-length")
    size = None if declared is None else whole_number(declared)
    if size is not None and size > limit:
        raise PayloadTooLarge(f"{what} is over {limit} bytes", limit=limit)


async def read_bounded(request: Request, limit: int, what: str = "the body") -> bytes:
    """The body, refused (413) as soon as it is known to be over `limit`."""
    check_declared_size(request, limit, what)
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise PayloadTooLarge(f"{what} is over {limit} bytes", limit=limit)
        parts.append(part)
    return b"".join(parts)


def parse(body: bytes) -> Any:
    """The body's JSON value, by the one parser every access decision uses."""
    try:
        return loads(body)
    except RecursionError:
        raise InvalidJson("the body is not valid JSON: nested too deeply") from None


class ParsedRequest(Request):
    """The request as the edge admitted it: FastAPI's body and JSON are the edge's."""

    def __init__(self, request: Request, body: bytes) -> None:
        super().__init__(request.scope, request.receive)
        self._admitted = body

    async def stream(self) -> AsyncGenerator[bytes, None]:
        yield self._admitted
        yield b""

    async def body(self) -> bytes:
        return self._admitted

    async def json(self) -> Any:
        return self.scope[PARSED_BODY]


class GuardedRoute(APIRoute):
    """An APIRoute whose requests are admitted as the module's doc says."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        rule = rule_of(self)
        reads_body = self.body_field is not None

        async def admitted(request: Request) -> Response:
            if rule is not None:
                await check_credential(request, rule)
            if request.method in WRITES and not is_json(media_type(request)):
                raise UnsupportedMediaType(
                    f"unsupported Content-Type {media_type(request)!r}: "
                    "send application/json (with or without a body)"
                )
            limit: int = request.app.state.replay.settings.max_body_bytes
            if not reads_body:
                check_declared_size(request, limit)  # never read: only its size is judged
                request.scope[PARSED_BODY] = None
                return await handle(request)
            body = await read_bounded(request, limit)
            request.scope[PARSED_BODY] = parse(body) if body else None
            return await handle(ParsedRequest(request, body))

        return admitted


__all__ = ["GuardedRoute", "is_json", "media_type", "read_bounded"]
