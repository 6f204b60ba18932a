"""A hosted run's HTTP upstream, read by a protocol instead of a client library.

Each socket read is parsed where it arrives (httptools, the C parser uvicorn
uses, for the HTTP/1.1 framing; `agent_replay.agents.sse` for the events) and its
complete events are handed to the driver in that same callback: no stream
buffer in between and no task woken per read. A run streams a token every few
tens of milliseconds for minutes, many runs at once, so that per-read path is
most of what reading upstreams costs, and through aiohttp's reader it cost
markedly more CPU per event (ops/bench/capacity.py measures the whole).

An agent of `"protocol": "ai-sdk"` is posted the AI SDK's chat request
instead of AG-UI's `RunAgentInput`, and its UI message stream chunks are
mapped into AG-UI events as they are read (`agent_replay.agents.ai_sdk`).

One request per connection (`Connection: close`): a run's stream holds its
connection for its life. No redirects, proxies or compression: an agent's
endpoint is configured, not discovered, so a 3xx is an error like a 4xx.

An agent's URL may carry credentials (`user:pass@`, `?api_key=`), and a run's
RUN_ERROR is read by everyone who may read the run: errors name the upstream
by `upstream_name` only, and every error's text has the URL's and the agent
headers' secret values blanked (an upstream's error page may echo its request), and
so are the values of the starting request's headers forwarded to it
(`agent_replay.agents.forwarding`): those are never stored.

Backpressure: `deliver` returns False when the driver holds enough unappended
reads (the log is away); reading pauses until `resume()`. Time paused does not
count towards the idle limit.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

import httptools

from agent_replay.agents.ai_sdk import UIStream, chat_request
from agent_replay.agents.catalog import HttpAgent, RunInput
from agent_replay.agents.sse import NdjsonParser, Parser, SseParser
from agent_replay.agents.upstream import UpstreamError, refused
from agent_replay.errors import InvalidInput
from agent_replay.ingest import Limits, chunk_from_text
from agent_replay.log.chunks import dumps
from agent_replay.log.values import StoredChunk

CONNECT_SECONDS = 10.0
# Of a failed answer's body, this much goes into the run's RUN_ERROR.
_ERROR_BODY_BYTES = 300

# Secret values shorter than this are not blanked in error texts: a `?v=2` would
# otherwise blank every "2" of the message, and so short a value guards nothing.
_SHORTEST_SECRET = 4
_BLANK = "[redacted]"

Deliver = Callable[[list[StoredChunk]], bool]


def upstream_name(url: str) -> str:
    """`url` as errors name it: scheme://host[:port]/path, without the userinfo, query
    and fragment where credentials go."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a number: whatever it is stays out
        port = None
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _basic(username: str, password: str | None) -> str:
    user = f"{unquote(username)}:{unquote(password or '')}"
    return "Basic " + base64.b64encode(user.encode()).decode()


def _secrets(agent: HttpAgent, forwarded: Mapping[str, str]) -> list[str]:
    """The values in the agent's configuration that an error text must not show: the
    URL's userinfo, query and fragment values, and its headers' values (and their
    last word: the credential after `Bearer`); and the forwarded headers' values, each
    cookie's (or list item's) value too."""
    url = urlsplit(agent.url)
    found = [url.username or "", url.password or "", url.query, url.fragment]
    found += [unquote(found[0]), unquote(found[1])]
    if url.username is not None:
        found.append(_basic(url.username, url.password).partition(" ")[2])
    for text in (url.query, url.fragment):
        found += [value for _, value in parse_qsl(text, keep_blank_values=True)]
        found += [part.partition("=")[2] for part in text.split("&")]
    for value in agent.headers.values():
        found += [value, value.rpartition(" ")[2]]
    for value in forwarded.values():
        found += [value, value.rpartition(" ")[2]]
        for item in value.replace(";", ",").split(","):
            found += [item.strip(), item.partition("=")[2].strip()]
    # Longest first: a value is blanked whole before any part of it is.
    return sorted({s for s in found if len(s) >= _SHORTEST_SECRET}, key=len, reverse=True)


def _blanked(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, _BLANK)
    return text


def _request(
    agent: HttpAgent, run_input: RunInput, forwarded: Mapping[str, str]
) -> tuple[str, int, bool, bytes]:
    """(host, port, tls, the request's bytes) for `agent`, with the starting request's
    `forwarded` headers (upstream name to value)."""
    url = urlsplit(agent.url)
    where = upstream_name(agent.url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise UpstreamError(f"cannot connect to upstream {where}: not an http(s) URL")
    tls = url.scheme == "https"
    try:
        port = url.port or (443 if tls else 80)
    except ValueError:
        raise UpstreamError(f"cannot connect to upstream {where}: not a port number") from None
    ai_sdk = agent.protocol == "ai-sdk"
    body = dumps(chat_request(run_input) if ai_sdk else run_input).encode()
    host = url.netloc.rpartition("@")[2]  # as written, an IPv6 literal's brackets kept
    # By lowercased name: an agent's "accept" replaces our "Accept" (names are
    # case-insensitive), and nobody's header is sent twice.
    headers = {"content-type": ("Content-Type", "application/json")}
    headers["accept"] = ("Accept", "text/event-stream")
    if url.username is not None:
        headers["authorization"] = ("Authorization", _basic(url.username, url.password))
    fixed = {"Host": host, "Content-Length": str(len(body)), "Connection": "close"}
    # Forwarded first, so the agent's own headers win a clash (a list that would clash
    # was refused at start-up: this is the second line of defence).
    for name, value in (*forwarded.items(), *agent.headers.items(), *fixed.items()):
        headers[name.lower()] = (name, value)
    if any(c in text for pair in headers.values() for text in pair for c in "\r\n\0"):
        raise UpstreamError(f"agent {agent.name!r} has a header with a line break")
    target = (url.path or "/") + (f"?{url.query}" if url.query else "")
    head = f"POST {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.values())
    try:
        encoded = (head + "\r\n").encode("latin-1")
    except UnicodeEncodeError:  # its text would quote the URL and headers whole
        raise UpstreamError(
            f"agent {agent.name!r}: its URL or a header is not Latin-1 text"
        ) from None
    return url.hostname, port, tls, encoded + body


class HttpUpstream(asyncio.Protocol):
    """One run's upstream: `await run()` reads it to its end, handing each read's
    events to `deliver`; raises `UpstreamError` (after delivering what came before)."""

    def __init__(
        self,
        agent: HttpAgent,
        run_input: RunInput,
        idle_seconds: float,
        limits: Limits,
        deliver: Deliver,
        forwarded: Mapping[str, str] | None = None,
    ) -> None:
        self._agent = agent
        # The starting request's headers for the upstream: held here, for this run only.
        self._forwarded = forwarded or {}
        self._input = run_input
        self._idle_seconds = idle_seconds
        self._limits = limits
        self._deliver = deliver
        self._secrets = _secrets(agent, self._forwarded)
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._transport: Any = None  # uvloop's transports are no asyncio.Transport
        self._http = httptools.HttpResponseParser(self)
        self._status = 0
        self._reason = b""
        self._media = b""
        self._framed = False  # a length or chunked body (else it ends with the connection)
        self._events: Parser | None = None  # once a 2xx answer's headers are in
        self._error_body = b""
        self._number = 0
        # An AI SDK upstream's chunks are mapped into AG-UI events on their way in.
        self._ui = UIStream(run_input, limits) if agent.protocol == "ai-sdk" else None
        self._data_stream = False  # an AI SDK 4 data stream's header was seen
        self._last_read = 0.0
        self._paused = False
        self._idle: asyncio.TimerHandle | None = None

    async def run(self) -> None:
        try:
            await self._run()
        except UpstreamError as exc:
            raise UpstreamError(_blanked(str(exc), self._secrets)) from None

    async def _run(self) -> None:
        host, port, tls, request = _request(self._agent, self._input, self._forwarded)
        context = ssl.create_default_context() if tls else None
        try:
            async with asyncio.timeout(CONNECT_SECONDS):
                await self._loop.create_connection(
                    lambda: self, host, port, ssl=context, server_hostname=host if tls else None
                )
        except (OSError, TimeoutError) as exc:
            detail = str(exc) or f"no connection within {CONNECT_SECONDS:g} s"
            name = upstream_name(self._agent.url)
            raise UpstreamError(f"cannot connect to upstream {name}: {detail}") from exc
        try:
            self._transport.write(request)
            self._last_read = self._loop.time()
            self._idle = self._loop.call_later(self._idle_seconds, self._check_idle)
            await self._done
        finally:
            if self._idle is not None:
                self._idle.cancel()
            if not self._transport.is_closing():
                self._transport.close()

    @property
    def paused(self) -> bool:
        """Whether reading waits for `resume()`."""
        return self._paused

    def resume(self) -> None:
        """The driver has room again: read on."""
        if self._paused:
            self._paused = False
            self._last_read = self._loop.time()
            if not self._transport.is_closing():
                self._transport.resume_reading()

    # -- the socket ---------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._last_read = self._loop.time()
        try:
            self._http.feed_data(data)
        except httptools.HttpParserError as exc:
            self._finish(UpstreamError(f"upstream connection failed: malformed answer ({exc})"))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._done.done():
            return
        if self._status and not self._framed:
            self.on_message_complete()  # its body ends with the connection
            return
        why = f" ({exc})" if exc else ""
        what = "the answer ended early" if self._status else "closed before answering"
        self._finish(UpstreamError(f"upstream connection failed: {what}{why}"))

    def _check_idle(self) -> None:
        self._idle = None
        if self._done.done():
            return
        now = self._loop.time()
        if self._paused:
            self._last_read = now
        left = self._last_read + self._idle_seconds - now
        if left <= 0:
            seconds = f"{self._idle_seconds:g}"
            self._finish(UpstreamError(f"upstream stalled: no event for {seconds} s"))
        else:
            self._idle = self._loop.call_later(left, self._check_idle)

    def _finish(self, error: UpstreamError | None = None) -> None:
        if not self._done.done():
            if error is None:
                self._done.set_result(None)
            else:
                self._done.set_exception(error)
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    # -- httptools' callbacks -----------------------------------------------

    def on_status(self, status: bytes) -> None:
        self._reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-type":
            self._media = value.lower()
        elif name in (b"content-length", b"transfer-encoding"):
            self._framed = True
        elif name == b"x-vercel-ai-data-stream":
            self._data_stream = True

    def on_headers_complete(self) -> None:
        self._status = self._http.get_status_code()
        if 200 <= self._status < 300 and self._ui is not None and self._data_stream:
            # AI SDK 4's `toDataStreamResponse()`: lines like `0:"text"`, no chunk in them.
            self._finish(UpstreamError(
                "upstream answered the AI SDK 4 data stream protocol; an ai-sdk agent answers "
                "the UI message stream (ai 5 and later: toUIMessageStreamResponse)"
            ))  # fmt: skip
            return
        if 200 <= self._status < 300:
            media = self._media.split(b";")[0].strip()
            ndjson = b"ndjson" in media or b"jsonl" in media
            self._events = NdjsonParser() if ndjson else SseParser()

    def on_body(self, body: bytes) -> None:
        if self._done.done():
            return
        if self._events is None:
            self._error_body = (self._error_body + body)[:_ERROR_BODY_BYTES]
            return
        texts = self._events.feed(body)
        if texts:
            self._hand(texts)

    def on_message_complete(self) -> None:
        if self._done.done():
            return
        if self._events is None:
            body = self._error_body.decode(errors="replace")
            detail = body or self._reason.decode("latin-1")
            self._finish(UpstreamError(f"upstream answered HTTP {self._status}: {detail}"))
            return
        texts = self._events.end()
        if texts:
            self._hand(texts)
        self._finish()

    def _hand(self, texts: list[str]) -> None:
        """Validate a read's events and deliver them; a bad one ends the run, after
        the ones before it."""
        batch: list[StoredChunk] = []
        for text in texts:
            self._number += 1
            try:
                if self._ui is None:
                    batch.append(chunk_from_text(text, self._number - 1, self._limits))
                else:
                    batch += self._ui.chunks(text, self._number - 1)
            except InvalidInput as exc:
                if batch:
                    self._deliver(batch)
                ui = self._ui is not None
                self._finish(refused(exc, self._number, self._limits, ui=ui))
                return
        if not batch:
            return
        if not self._deliver(batch) and not self._paused:
            self._paused = True
            self._transport.pause_reading()
