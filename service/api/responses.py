"""JSON responses and the one place errors become HTTP bodies."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from service.errors import ReplayError
from service.log.chunks import dumps


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


def error_response(status: int, code: str, message: str, **extra: Any) -> JSON:
    body = {"error": {"code": code, "message": message, **extra}}
    return JSON(body, status_code=status, headers=_headers_for(status))


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
    return JSON(exc.body(), status_code=exc.status, headers=_headers_for(exc.status))


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail))


async def on_unexpected_error(request: Request, exc: Exception) -> Response:
    # Still the one error shape; the traceback goes to the log, not the client.
    logging.getLogger("replay").error("unhandled error on %s", request.url.path, exc_info=exc)
    return error_response(500, "internal", "the service failed to handle this request")


async def on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = [
        f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg')}" for err in exc.errors()
    ]
    return error_response(
        422, "invalid_request", "; ".join(problems) or "invalid request", details=problems
    )
