"""`agent-replay serve`'s HTTP/1.1 connections: uvicorn's httptools protocol with the bounds
it lacks, so a client cannot hold connections by sending slowly or not at all.

- A request's head (request line and headers) must be complete within
  `header_seconds` of the connection opening or of its previous response
  ending; else the connection is closed (a slowloris sends a header a byte at
  a time, or nothing, and uvicorn would wait forever).
- While a request's body is being read, `body_seconds` without a byte ends it:
  408 `request_timeout` if no answer has started, and the connection closes.
  Time the server itself is not reading (flow control, or waiting to send
  `100 Continue`) does not count: the stall must be the client's.
- Past `max_connections` open connections, a request is answered 503
  `too_many_connections` and its connection closed.

Only reads are bounded: a response that streams for an hour (SSE) is writes to
the client, and keeps its connection. Idle keep-alive connections are closed by
uvicorn's own `timeout_keep_alive`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from agent_replay.api.edge import refuse
from agent_replay.errors import ReplayError, RequestTimeout, TooManyConnections


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    header_seconds: float
    body_seconds: float
    max_connections: int


def _answer(error: ReplayError) -> bytes:
    """A whole HTTP/1.1 answer carrying `error` as every refusal does, closing."""
    body = json.dumps(error.body()).encode()
    return (
        f"HTTP/1.1 {error.status} {HTTPStatus(error.status).phrase}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with `ConnectionLimits` (given by `functools.partial`,
    which uvicorn's worker processes can unpickle, unlike a class made at run time)."""

    def __init__(self, *args: Any, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = limits
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None

    # -- the head ------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def _await_head(self) -> None:
        self._cancel_head()
        self._head_timer = self.loop.call_later(self._limits.header_seconds, self._head_late)

    def _cancel_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            # Not a word of HTTP yet, or half a head: nothing to answer.
            self.transport.close()

    def on_headers_complete(self) -> None:
        self._cancel_head()
        super().on_headers_complete()
        if self.cycle is not None and self.cycle.more_body:
            self._await_body()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline:
            self._await_head()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        if len(self.connections) > self._limits.max_connections:
            cycle.keep_alive = False  # uvicorn closes the connection after this answer
            limit = self._limits.max_connections

            async def over_the_cap(scope: Any, receive: Any, send: Any) -> None:
                await refuse(send, TooManyConnections(f"over {limit} open connections"))

            app = over_the_cap
        super()._start_asgi_task(cycle, app)

    # -- the body ------------------------------------------------------------

    def _await_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
        self._body_timer = self.loop.call_later(self._limits.body_seconds, self._body_late)

    def _cancel_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._await_body()

    def on_message_complete(self) -> None:
        self._cancel_body()
        super().on_message_complete()

    def _body_late(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None or not cycle.more_body:
            return
        if self.flow.read_paused or cycle.waiting_for_100_continue:
            self._await_body()  # the server is not reading: not the client's stall
            return
        seconds = f"{self._limits.body_seconds:g}"
        error = RequestTimeout(f"no byte of the request's body for {seconds} s")
        if not cycle.response_started:
            self.transport.write(_answer(error))
        # The app reading the body hears that the client is gone; nothing it sends
        # after this is written.
        cycle.disconnected = True
        cycle.message_event.set()
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head()
        self._cancel_body()
        super().connection_lost(exc)
