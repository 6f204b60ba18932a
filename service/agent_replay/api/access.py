"""The access log, request ids and per-route request counts: one pure ASGI middleware.

Every HTTP request gets an id: the caller's `X-Request-Id` when it is a sane
token, else a fresh one; it is echoed on the response and stamped on every log
line written while the request is handled. When the response ends (a stream:
when it closes) one line goes to `replay.access` with the method, the route
template (`/v1/runs/{run_id}/events`, never the raw path, so no id explodes a
metric's labels), the status, the duration, the run id and the request id.

Nothing secret is logged: no header is, and the path's query string is kept
only with credential-like parameters (`token`, `key`, ...) blanked.

A pure ASGI middleware rather than Starlette's `BaseHTTPMiddleware`, which
would buffer through a memory stream every body the streams send.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_replay import metrics
from agent_replay.logs import REQUEST_ID

log = logging.getLogger("replay.access")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=@-]{1,128}")
# Polled every few seconds by orchestrators and scrapers: a line each would bury the
# requests people make. They are still counted; a failing probe is still logged.
QUIET_ROUTES = frozenset({"/healthz", "/readyz", "/metrics"})
SECRET_PARAMS = frozenset(
    {"token", "access_token", "key", "api_key", "apikey", "secret", "password", "signature", "sig"}
)


def request_id_of(headers: list[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if name == b"x-request-id":
            text = value.decode("latin-1").strip()
            if _REQUEST_ID.fullmatch(text):
                return text
            break
    return fresh_request_id()


class _RequestIds:
    """32 hex digits: a random prefix of this process's and a counter.

    Unique like a random UUID's digits (the prefix is drawn again in a forked
    child), without a system call for randomness on every request.
    """

    def __init__(self) -> None:
        self.reseed()
        os.register_at_fork(after_in_child=self.reseed)

    def reseed(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._next = itertools.count(int.from_bytes(os.urandom(8)) >> 1)

    def fresh(self) -> str:
        return f"{self._prefix}{next(self._next) & 0xFFFF_FFFF_FFFF_FFFF:016x}"


fresh_request_id = _RequestIds().fresh


def redacted_query(query: str) -> str:
    """The query string with credential-like parameters' values replaced."""
    if not query:
        return ""
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode(
        [(k, "REDACTED" if k.lower() in SECRET_PARAMS else v) for k, v in pairs], safe="{}/:,"
    )


class AccessLog:
    """`routes`: the app's routes, for the templates of plain Starlette routes (the
    fast append route), which FastAPI's router does not record in the scope."""

    def __init__(
        self, app: ASGIApp, *, routes: Sequence[BaseRoute], log_requests: bool = True
    ) -> None:
        self.app = app
        self.log_requests = log_requests
        self._routes = routes
        self._by_endpoint: dict[object, str] | None = None
        # The request counter's children by (method, route, status): looking a
        # child up through `labels()` each request costs more than the count.
        self._counters: dict[tuple[str, str, int], Any] = {}

    def _template(self, scope: Scope) -> str:
        path = getattr(scope.get("route"), "path", None)
        if path is not None:
            return str(path)
        if self._by_endpoint is None:
            self._by_endpoint = {
                route.endpoint: route.path for route in self._routes if isinstance(route, Route)
            }
        return self._by_endpoint.get(scope.get("endpoint"), "unmatched")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        request_id = request_id_of(headers)
        echoed = request_id.encode()
        status = 500
        response_run_id: str | None = None

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_run_id
            if message["type"] == "http.response.start":
                status = message["status"]
                out = list(message.get("headers", ()))
                for name, value in out:
                    if name == b"x-run-id":
                        response_run_id = value.decode("latin-1")
                out.append((b"x-request-id", echoed))
                message = {**message, "headers": out}
            await send(message)

        token = REQUEST_ID.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            route = self._template(scope)
            method: str = scope["method"]
            key = (method, route, status)
            counter = self._counters.get(key)
            if counter is None:
                counter = self._counters[key] = metrics.HTTP_REQUESTS.labels(
                    method, route, str(status)
                )
            counter.inc()
            quiet = route in QUIET_ROUTES and status < 400
            if self.log_requests and not quiet and log.isEnabledFor(logging.INFO):
                run_id = (scope.get("path_params") or {}).get("run_id") or response_run_id
                if run_id is None:
                    run_id = next(
                        (v.decode("latin-1") for k, v in headers if k == b"x-run-id"), None
                    )
                duration_ms = round((time.perf_counter() - started) * 1000, 3)
                query = redacted_query(scope.get("query_string", b"").decode("latin-1"))
                path = scope["path"] + ("?" + query if query else "")
                log.info(
                    "%s %s %s %.1fms",
                    method,
                    route,
                    status,
                    duration_ms,
                    extra={
                        "fields": {
                            "method": method,
                            "route": route,
                            "path": path,
                            "status": status,
                            "duration_ms": duration_ms,
                            "run_id": run_id,
                            "client": (scope.get("client") or (None,))[0],
                        }
                    },
                )
            REQUEST_ID.reset(token)
