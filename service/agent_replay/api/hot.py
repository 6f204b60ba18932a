"""The hot routes' short lane: the app's own layers, without the framework's per-request ones.

Single-chunk producers post thousands of appends a second, and FastAPI's
stack around a plain Starlette endpoint (telemetry and body-limit layers,
the exception middleware, the router walking its routes, the exit stack,
the endpoint's exception wrapper) cost more CPU than the append itself.
`ReplayApp` serves a request that fully matches one of its `hot_routes`
through a stack of its own, made of the same parts in the same order:

    ServerErrorMiddleware (the app's 500 handler)
      -> the app's middleware (`add_middleware`: ?token=, the access log, CORS)
        -> the endpoint, its errors answered by the app's exception handlers

so what a caller sees (the answer, its error body and headers, the request
id, the access log line and the metrics) is what the full stack gives.
Everything else, and every request while tracing is on (its spans come from
the full stack's instrumentation), takes the full stack.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette._utils import is_async_callable
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.requests import Request
from starlette.routing import Match, Route
from starlette.types import ASGIApp, ExceptionHandler, Receive, Scope, Send


class ReplayApp(FastAPI):
    """FastAPI, with `hot_routes` served by the short lane (see the module's doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hot_routes: tuple[Route, ...] = ()
        self._hot_stack: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.hot_routes and not self.root_path:
            for route in self.hot_routes:
                match, child = route.matches(scope)
                if match is Match.FULL:
                    stack = self._hot_stack or self._build_hot_stack()
                    if stack is not None:
                        scope.update(child)
                        scope["app"] = self
                        await stack(scope, receive, send)
                        return
                    break
        await super().__call__(scope, receive, send)

    def _build_hot_stack(self) -> ASGIApp | None:
        # Built on first use, like Starlette's own stack: every middleware and
        # handler is registered by then.
        telemetry = getattr(self, "_native_telemetry", None)
        if telemetry is not None and telemetry.enabled():
            # FastAPI's own OpenTelemetry is configured: its spans need the full stack.
            self.hot_routes = ()
            return None
        handlers = dict(self.exception_handlers)
        server_error = handlers.pop(500, None)
        server_error = handlers.pop(Exception, None) or server_error
        app: ASGIApp = _Endpoint(handlers)
        for cls, args, kwargs in reversed(self.user_middleware):
            app = cls(app, *args, **kwargs)
        self._hot_stack = ServerErrorMiddleware(app, handler=server_error, debug=self.debug)
        return self._hot_stack


class _Endpoint:
    """The matched route's endpoint, its exceptions answered as Starlette's wrapper does."""

    def __init__(self, handlers: dict[Any, ExceptionHandler]) -> None:
        self._handlers = handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        try:
            response = await scope["endpoint"](request)
        except Exception as exc:
            handler = self._handler_for(exc)
            if handler is None:
                raise
            if is_async_callable(handler):
                response = await handler(request, exc)
            else:
                response = await run_in_threadpool(handler, request, exc)
        await response(scope, receive, send)

    def _handler_for(self, exc: Exception) -> Any:
        # Starlette's order: a status handler for an HTTPException, then by class.
        if isinstance(exc, HTTPException) and exc.status_code in self._handlers:
            return self._handlers[exc.status_code]
        for cls in type(exc).__mro__:
            if cls in self._handlers:
                return self._handlers[cls]
        return None
