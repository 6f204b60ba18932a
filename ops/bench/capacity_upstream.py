"""The model-like upstreams of ops/bench/capacity.py, all in one process.

    python ops/bench/capacity_upstream.py PORT

`POST /agent` with an AG-UI `RunAgentInput` whose `forwardedProps.capacity`
is a run's spec (see `plan`) answers with that run's events as SSE, one
event per 30 ms tick as a model streams tokens: text deltas, then a tool call
whose JSON arguments stream in pieces, its result, more text, and so on for
the run's length. Every event carries `n` (its place in the run) and `sentAt`
(`time.monotonic()` when it was written to the socket: CLOCK_MONOTONIC is one
clock for every process on the machine, so a follower elsewhere subtracts it
from its own reading).

Pacing is one timer per stream on one asyncio loop, over a bare HTTP/1.1
writer, so thousands of streams cost little; `GET /stats` says how late the
writes were against their schedule (the harness's own health; `?reset` starts
afresh), and `GET /end` finishes every stream at once (RUN_FINISHED), so a
trial stopped early leaves nothing streaming into the next.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from typing import Any

import orjson

# Lateness histogram: 1 ms buckets up to this many ms (the rest in the last).
_LATE_BUCKETS = 1000


def plan(spec: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    """(offset in seconds from the request, event) for one run, deterministic in `spec`.

    spec: {"run": str, "seed": int, "seconds": float, "interval": float, "ttft": float}
    The last event, RUN_FINISHED, has the highest `n`: a follower knows it has all.
    """
    rng = random.Random(f"{spec['seed']}:{spec['run']}")
    interval = float(spec["interval"])
    ticks = max(4, int(float(spec["seconds"]) / interval))
    run_id = str(spec["run"])
    ids = {"runId": run_id, "threadId": run_id}
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", **ids}]
    words = len(_WORDS)
    segment = 0
    while len(events) < ticks - 2:
        message = f"m{segment}"
        base = rng.randrange(words)
        events.append({"type": "TEXT_MESSAGE_START", "messageId": message, "role": "assistant"})
        events += [
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": message,
             "delta": _WORDS[(base + 7 * i) % words] + (", " if i % 9 == 8 else " ")}
            for i in range(rng.randint(30, 120))
        ]  # fmt: skip
        events.append({"type": "TEXT_MESSAGE_END", "messageId": message})
        call = f"c{segment}"
        start = rng.randrange(len(_TEXT) // 2)
        query = _TEXT[start : start + rng.randint(100, 300)]
        arguments = orjson.dumps(
            {"query": query, "limit": rng.randint(1, 50), "filters": {"lang": "en"}}
        ).decode()
        events.append(
            {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "search",
             "parentMessageId": message}
        )  # fmt: skip
        events += [
            {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": arguments[i : i + 6]}
            for i in range(0, len(arguments), 6)
        ]
        events.append({"type": "TOOL_CALL_END", "toolCallId": call})
        events.append(
            {"type": "TOOL_CALL_RESULT", "messageId": f"r{segment}", "toolCallId": call,
             "content": '{"hits": 3}', "role": "tool"}
        )  # fmt: skip
        segment += 1
    del events[ticks - 1 :]
    # Whatever the cut fell in (a tool call, a message) is closed before the run ends.
    call_, message_ = _last_bracket(events, "TOOL_CALL_"), _last_bracket(events, "TEXT_MESSAGE_")
    if call_ is not None and call_["type"] == "TOOL_CALL_START":
        events.append({"type": "TOOL_CALL_END", "toolCallId": call_["toolCallId"]})
    if message_ is not None and message_["type"] == "TEXT_MESSAGE_START":
        events.append({"type": "TEXT_MESSAGE_END", "messageId": message_["messageId"]})
    events.append({"type": "RUN_FINISHED", **ids})
    phase = rng.random() * interval  # so runs started together do not tick together
    ttft = float(spec["ttft"])
    timed = [(0.0, events[0])]
    timed += [(ttft + phase + k * interval, e) for k, e in enumerate(events[1:])]
    for n, (_, event) in enumerate(timed):
        event["n"] = n
    return timed


def _last_bracket(events: list[dict[str, Any]], family: str) -> dict[str, Any] | None:
    """The last START or END event of `family` (TOOL_CALL_, TEXT_MESSAGE_)."""
    for event in reversed(events):
        kind = event["type"]
        if kind.startswith(family) and kind.endswith(("_START", "_END")):
            found: dict[str, Any] = event
            return found
    return None


_TEXT = (
    "the model streams tokens to every reader while the log keeps each one durable and "
    "in order so a reader that drops can resume exactly where it left off; "
) * 8
_WORDS = _TEXT.split()[:29]


class _Stats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.late = [0] * (_LATE_BUCKETS + 1)
        self.events = 0
        self.streams = 0
        self.aborted = 0

    def late_ms(self, p: float) -> float:
        target = p / 100 * self.events
        seen = 0
        for ms, count in enumerate(self.late):
            seen += count
            if seen >= target and count:
                return float(ms)
        return 0.0


STATS = _Stats()
ACTIVE: set[_Stream] = set()


class _Stream:
    """One run's events, each written when due by a loop timer."""

    def __init__(self, transport: Any, spec: dict[str, Any]) -> None:
        self.transport = transport
        self.loop = asyncio.get_running_loop()
        self.start = self.loop.time()
        self.events = plan(spec)
        self.next = 0
        self.handle: asyncio.TimerHandle | None = None
        ACTIVE.add(self)
        STATS.streams += 1
        self._schedule()

    def _schedule(self) -> None:
        due = self.start + self.events[self.next][0]
        self.handle = self.loop.call_at(due, self._send)

    def _send(self) -> None:
        if self.transport.is_closing():
            STATS.aborted += 1
            self.stop()
            return
        now = self.loop.time()
        lines: list[bytes] = []
        # The event this timer is for (a loop may run a timer a hair early), then any
        # others already due (a late timer): together, each stamped now.
        while self.next < len(self.events) and (
            not lines or self.start + self.events[self.next][0] <= now
        ):
            due, event = self.events[self.next]
            late = int((now - self.start - due) * 1000)
            STATS.late[min(max(late, 0), _LATE_BUCKETS)] += 1
            STATS.events += 1
            event["sentAt"] = time.monotonic()
            lines.append(b"data: " + orjson.dumps(event) + b"\n\n")
            self.next += 1
        body = b"".join(lines)
        self.transport.write(b"%x\r\n%s\r\n" % (len(body), body))
        if self.next < len(self.events):
            self._schedule()
        else:
            self.transport.write(b"0\r\n\r\n")
            self.transport.close()
            self.stop()

    def finish(self) -> None:
        """End the run now, as a model would: RUN_FINISHED, then the end of the body."""
        self.stop()
        if self.transport.is_closing():
            return
        ids = {k: v for k, v in self.events[0][1].items() if k in ("runId", "threadId")}
        event = {"type": "RUN_FINISHED", **ids, "n": len(self.events), "sentAt": time.monotonic()}
        body = b"data: " + orjson.dumps(event) + b"\n\n"
        self.transport.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        self.transport.close()

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        ACTIVE.discard(self)


class _Http(asyncio.Protocol):
    """A bare HTTP/1.1 server: one request per connection (the stream ends it)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport  # uvloop's is no asyncio.Transport subclass
        self.buffer = b""
        self.stream: _Stream | None = None

    def data_received(self, data: bytes) -> None:
        if self.stream is not None:
            return
        self.buffer += data
        head, sep, body = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            return
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        fields = (line.partition(":") for line in lines[1:])
        headers = {k.strip().lower(): v.strip() for k, _, v in fields}
        length = int(headers.get("content-length", "0"))
        if len(body) < length:
            return
        if method == "GET" and path == "/end":
            for stream in list(ACTIVE):
                stream.finish()
            self._answer(b"200 OK", b"{}")
            return
        if method == "GET" and path.startswith("/stats"):
            answer = json.dumps(
                {"events": STATS.events, "streams": STATS.streams, "aborted": STATS.aborted,
                 "active": len(ACTIVE), "late_p50_ms": STATS.late_ms(50),
                 "late_p99_ms": STATS.late_ms(99), "late_max_ms": _max_late()}
            ).encode()  # fmt: skip
            if "reset" in path:
                STATS.reset()
            self._answer(b"200 OK", answer)
            return
        if method != "POST" or not path.startswith("/agent"):
            self._answer(b"404 Not Found", b"{}")
            return
        try:
            spec = json.loads(body[:length])["forwardedProps"]["capacity"]
        except (ValueError, KeyError, TypeError):
            self._answer(b"400 Bad Request", b'{"error": "no forwardedProps.capacity"}')
            return
        self.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        self.stream = _Stream(self.transport, spec)

    def _answer(self, status: bytes, body: bytes) -> None:
        self.transport.write(
            b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (status, len(body), body)
        )
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.stream is not None and self.stream in ACTIVE:
            STATS.aborted += 1
            self.stream.stop()


def _max_late() -> float:
    return float(max((ms for ms, c in enumerate(STATS.late) if c), default=0))


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Http, "127.0.0.1", port, backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def run(coro: Any) -> Any:
    """asyncio.run on uvloop when it is installed (the harness should cost little)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


if __name__ == "__main__":
    run(serve(int(sys.argv[1])))
