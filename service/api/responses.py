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


def error_response(status: int, code: str, message: str, **extra: Any) -> JSON:
    return JSON({"error": {"code": code, "message": message, **extra}}, status_code=status)


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
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    response = JSON(exc.body(), status_code=exc.status, headers=headers)
    return response


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
