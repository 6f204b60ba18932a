"""`StreamResponse`: the run stream's ASGI response, our own, beside sse-starlette.

Which and why: a small response of our own, not a subclass of sse-starlette's
`EventSourceResponse`. Its public API cannot express what the fan-out needs
(one cheap send per follower per wake-up: with 1,000 followers every append
costs 1,000 sends, and the library's `anyio.move_on_after` around each send,
a fresh cancel scope with its deadline timer, was a large share of the
fan-out's CPU), and reaching past it meant overriding three private methods
and reading its private attributes. So this module owns the loop and keeps
to sse-starlette's public contract where the two meet (checked against the
pinned library by `tests/stream/test_sse_parity.py`):

* the same headers (`Cache-Control: no-store` unless given, `Connection:
  keep-alive`, `X-Accel-Buffering: no`) and bytes, HEAD answered with headers
  and an empty body, heartbeats as its `ServerSentEvent` comments;
* a stalled send ends the response with its `SendTimeoutError`, and the body
  is closed (its cleanup runs, bounded) before the error escapes;
* the client's `http.disconnect` ends the response;
* shutdown drains: streams end once `AppStatus.should_exit` is set (the
  library sets it from uvicorn's exit handler). Unlike the library, which
  cancels the response and so leaves its chunked body unterminated (to the
  client, a broken connection), a stream here ends *cleanly*: a data send
  under way finishes, then the body's end is sent, so the client sees the
  stream end and resumes with `Last-Event-ID`, on another replica during a
  rolling restart.

Deliberate divergences, each for the send path's cost:

* A data send is not wrapped in its own cancel scope. Each send stamps when
  it started, and the ping task, waking at least every `send_timeout / 4`,
  ends the response once a send has been stuck for `send_timeout`: a stalled
  client is dropped after between 1 and 1.25 times `send_timeout`.
* That watch lives in the ping task, so it needs `ping > 0` (the app always
  sends heartbeats); with `ping=0` sends are not timed at all.
* The body yields pre-framed `bytes` (many events each): there is no
  per-chunk encode step or debug log.
* Given the body's `Outlet` (`agent_replay.stream.outlet`), the response also
  takes data between the body's yields: a caught-up follower's events,
  written by the commit that buffered them (`_write_now`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.abc
from sse_starlette import ServerSentEvent
from sse_starlette.sse import AppStatus, SendTimeoutError
from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from agent_replay.stream.outlet import Outlet

log = logging.getLogger("replay.stream")

# What every stream answer carries: StreamResponse adds X-Accel-Buffering
# itself; no-cache (not its default no-store) is what TanStack's reference
# server sends.
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

# How often a stream checks for the server's exit (as sse-starlette polls it).
_EXIT_POLL_SECONDS = 0.5


def blank_line() -> bytes:
    """The NDJSON keepalive: an SSE comment would break an NDJSON reader, and
    TanStack's line reader skips blank lines."""
    return b"\n"


class StreamResponse(Response):
    """Streams pre-framed `bytes` from `body`, with heartbeats, until it ends or the client goes."""

    def __init__(
        self,
        body: AsyncIterator[bytes],
        *,
        headers: Mapping[str, str] | None = None,
        media_type: str = "text/event-stream",
        ping: float = 15,
        ping_message: Callable[[], bytes] | None = None,
        sep: str = "\n",
        send_timeout: float | None = None,
        cleanup_timeout: float = 30.0,
        status_code: int = 200,
        outlet: Outlet | None = None,
    ) -> None:
        self.body_iterator = body
        # Given the body's outlet, the response writes through it between the body's
        # yields too (`_write_now`): a caught-up follower's events, by the commit.
        self.outlet = outlet
        self.status_code = status_code
        self.media_type = media_type
        self.background = None
        merged = MutableHeaders(headers=dict(headers or {}))
        merged.setdefault("Cache-Control", "no-store")
        merged["Connection"] = "keep-alive"
        merged["X-Accel-Buffering"] = "no"
        self.init_headers(merged)
        self.ping_interval = ping
        self.ping_message = ping_message or self._comment_ping
        self.sep = sep
        self.send_timeout = send_timeout
        self.cleanup_timeout = cleanup_timeout
        self.active = True
        # When the data send in progress began (monotonic), None between sends.
        self._send_started: float | None = None
        self._send_lock = anyio.Lock()
        # The server is shutting down: no more data, the body's end is due.
        self._ending = False
        # A `_write_now` whose send had to wait: finished by a task of its own, and
        # every later data send waits for it (`_settled`).
        self._held: anyio.Event | None = None
        self._group: anyio.abc.TaskGroup | None = None

    def _comment_ping(self) -> bytes:
        """sse-starlette's default heartbeat: a `: ping - <time>` comment."""
        return ServerSentEvent(comment=f"ping - {datetime.now(UTC)}", sep=self.sep).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start: Message = {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": self.raw_headers,
        }
        if scope["type"] == "http" and scope["method"].upper() == "HEAD":
            # An endless stream must not start for HEAD: the server would wait forever.
            await send(start)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        try:
            async with anyio.create_task_group() as group:
                self._group = group

                async def until_done(part: Callable[[], Awaitable[None]]) -> None:
                    await part()
                    group.cancel_scope.cancel()

                group.start_soon(until_done, lambda: self._stream(start, send))
                if self.ping_interval > 0:
                    group.start_soon(until_done, lambda: self._ping(send))
                group.start_soon(until_done, lambda: self._drain(send))
                group.start_soon(until_done, lambda: self._disconnect(receive))
        except BaseExceptionGroup as group_error:
            # One task's failure is the response's (as Starlette's own streams unwrap it).
            errors = group_error.exceptions
            raise errors[0] if len(errors) == 1 else group_error from None
        finally:
            if self.outlet is not None:
                self.outlet.write = None

    async def _stream(self, start: Message, send: Send) -> None:
        await send(start)
        if self.outlet is not None:
            self.outlet.write = lambda data: self._write_now(send, data)
        async for data in self.body_iterator:
            if self._ending:
                await self._close_body()
                break
            await self._settled()
            try:
                self._send_started = time.monotonic()
                await send({"type": "http.response.body", "body": data, "more_body": True})
                self._send_started = None
            except BaseException:
                await self._close_body()
                raise
        await self._end(send)

    def _write_now(self, send: Send, data: bytes) -> bool:
        """Send `data` without waiting (from a callback: the body's outlet), or refuse it.

        Refused (False, nothing sent) while another data send is under way or
        the body is ending. ASGI's send is a coroutine that, on an unpaused
        connection, finishes without suspending: it is stepped here directly. One
        that suspends (the client reads slowly) is finished by a task in the
        response's group, timed like any data send, and the next data send waits
        for it: the bytes go out in the order they were accepted.
        """
        if self._send_started is not None or self._held is not None:
            return False
        if self._ending or not self.active or self._group is None:
            return False
        step = send({"type": "http.response.body", "body": data, "more_body": True})
        try:
            yielded = step.send(None)  # type: ignore[attr-defined]
        except StopIteration:
            return True
        except Exception:
            # Raised before it wrote (uvicorn checks its state first): the body's own
            # send of the same bytes meets the error where the response handles it.
            return False
        held = self._held = anyio.Event()
        self._send_started = time.monotonic()
        self._group.start_soon(self._finish_send, step, yielded, held)
        return True

    async def _finish_send(self, step: Any, yielded: Any, held: anyio.Event) -> None:
        """Run a suspended send to its end, as a task would have."""
        try:
            while True:
                if yielded is None:  # a bare yield: one turn of the loop
                    await asyncio.sleep(0)
                else:
                    await asyncio.wait((yielded,))
                try:
                    yielded = step.send(None)
                except StopIteration:
                    return
        except BaseException:
            step.close()
            raise
        finally:
            self._send_started = None
            self._held = None
            held.set()

    async def _settled(self) -> None:
        """Returns once no data send accepted by `_write_now` is still under way."""
        while self._held is not None:
            await self._held.wait()

    async def _end(self, send: Send) -> None:
        """The body's last (empty) frame, once, whoever gets here first."""
        await self._settled()
        async with self._send_lock:
            if self.active:
                self.active = False
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _drain(self, send: Send) -> None:
        """Once the server is shutting down, end the body cleanly (see the module doc)."""
        await _server_exit()
        self._ending = True
        if self.outlet is not None:
            self.outlet.write = None
        # A data send under way completes first (the ping task's watch bounds it).
        while self._send_started is not None:  # noqa: ASYNC110 (a send has no event)
            await anyio.sleep(0.01)
        await self._end(send)

    async def _close_body(self) -> None:
        """Let a body suspended at `yield` run its cleanup (a follower unsubscribes)."""
        aclose = getattr(self.body_iterator, "aclose", None)
        if aclose is None:
            return
        with anyio.move_on_after(self.cleanup_timeout, shield=True):
            try:
                await aclose()
            except Exception:
                log.exception("closing a stream body after a failed send")

    async def _ping(self, send: Send) -> None:
        interval = self.ping_interval
        timeout = self.send_timeout
        tick = interval if timeout is None else min(interval, max(timeout / 4, 0.01))
        next_ping = time.monotonic() + interval
        while self.active:
            await anyio.sleep(tick)
            now = time.monotonic()
            started = self._send_started
            if timeout is not None and started is not None and now - started >= timeout:
                raise SendTimeoutError()
            if now < next_ping:
                continue
            next_ping = now + interval
            message: Message = {
                "type": "http.response.body",
                "body": self.ping_message(),
                "more_body": True,
            }
            async with self._send_lock:
                if self.active:
                    # Timed on its own (rare, unlike data sends): a stuck ping cannot hang.
                    with anyio.move_on_after(timeout) as scope:
                        await send(message)
                    if scope.cancel_called:
                        raise SendTimeoutError()

    async def _disconnect(self, receive: Receive) -> None:
        while self.active:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.active = False
                return


# One watcher per event loop, shared by every stream on it (as sse-starlette
# keeps one per thread): a poll per stream would cost the fan-out a wake-up
# per follower twice a second.
_EXITS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = (
    weakref.WeakKeyDictionary()
)
_WATCHERS: set[asyncio.Task[None]] = set()


def _exiting() -> bool:
    """sse-starlette's signals for "the server is shutting down".

    `AppStatus.should_exit` is set by the library's patch of uvicorn's exit
    handler; a uvicorn server told to stop directly (`should_exit = True`, as
    an embedding program or a test does) is found, as the library finds it,
    through the SIGTERM handler it installed.
    """
    if AppStatus.should_exit:
        return True
    if not AppStatus.enable_automatic_graceful_drain:
        return False
    server = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return bool(getattr(server, "should_exit", False))


async def _watch_exit(event: asyncio.Event) -> None:
    # Polled: neither uvicorn nor sse-starlette offers an event to wait on.
    while not _exiting():  # noqa: ASYNC110
        await asyncio.sleep(_EXIT_POLL_SECONDS)
    event.set()


async def _server_exit() -> None:
    """Returns once the server is shutting down, so open streams drain."""
    if _exiting():
        return
    loop = asyncio.get_running_loop()
    event = _EXITS.get(loop)
    if event is None or event.is_set():
        event = _EXITS[loop] = asyncio.Event()
        watcher = loop.create_task(_watch_exit(event), name="stream-exit-watch")
        _WATCHERS.add(watcher)
        watcher.add_done_callback(_WATCHERS.discard)
    await event.wait()
