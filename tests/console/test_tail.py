"""`agent-replay tail` as a person runs it: on a real pseudo-terminal and piped, against a live
run served over a real socket, through a relay whose connection the test cuts mid-run."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pyte
import pytest

from tests.conftest import settings_for
from tests.support.relay import Relay, relay_to
from tests.support.servers import Running, serve_in_process

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0
CONTENT = 'import React from "react";\n\nexport const App = () => <p>"hi" ✓</p>;\n'
ARGS = json.dumps({"filePath": "src/App.tsx", "content": CONTENT})
DELTAS = [ARGS[i : i + 9] for i in range(0, len(ARGS), 9)]
HALF = len(DELTAS) // 2
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
async def service(database_url: str) -> AsyncIterator[Running]:
    settings = settings_for(database_url, heartbeat_seconds=0.5)
    async with serve_in_process(settings) as running:
        yield running


@pytest.fixture
async def relay(service: Running) -> AsyncIterator[Relay]:
    async with relay_to(service.base_url) as running:
        yield running


@pytest.fixture
async def http(service: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as client:
        yield client


async def _append(
    http: httpx.AsyncClient, run: str, chunks: list[dict[str, Any]], close: bool = False
) -> None:
    r = await http.post(f"/v1/runs/{run}/events", json={"events": chunks, "close": close})
    assert r.status_code == 200, r.text


def _opening(run: str, thread: str = "t-tail") -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r", "delta": "pondering"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        *(
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": d}
            for d in ("Hel", "lo, I will ", "write the file.")
        ),
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "write_file"},
        *({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": d} for d in DELTAS[:HALF]),
    ]


def _closing(run: str) -> list[dict[str, Any]]:
    return [
        *({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": d} for d in DELTAS[HALF:]),
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {
            "type": "TOOL_CALL_RESULT",
            "toolCallId": "c1",
            "messageId": "tr",
            "content": "wrote 3 lines",
        },
        {"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m2", "delta": "Done."},
        {"type": "TEXT_MESSAGE_END", "messageId": "m2"},
        {"type": "RUN_FINISHED", "threadId": "t-tail", "runId": run},
    ]


EXPECTED_PLAIN = (
    "thinking: pondering\n"
    "Hello, I will write the file.\n"
    "▶ write_file  (c1)\n"
    "  filePath: src/App.tsx\n"
    '  content: import React from "react";\n'
    "\n"
    'export const App = () => <p>"hi" ✓</p>;\n'
    "◀ write_file  (c1): wrote 3 lines\n"
    "Done.\n"
)
SUMMARY = re.compile(r"— run (\S+) finished · events (\d+) · \d+\.\d s\n")


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "agent_replay.cli", "tail", *args]


async def _tail(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Run `agent-replay tail` to its end off the event loop (which serves the service)."""
    return await asyncio.to_thread(
        subprocess.run,
        _command(*args),
        capture_output=True,
        env=_env(),
        cwd=ROOT,
        timeout=DEADLINE,
    )


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "REPLAY_API_KEY")}
    return {**env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "60"}


async def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


class Terminal:
    """A pseudo-terminal with a VT100 screen (pyte) on its master side."""

    def __init__(self, columns: int = 120, lines: int = 60) -> None:
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        self.screen = pyte.Screen(columns, lines)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = b""
        os.set_blocking(self.master, False)
        asyncio.get_running_loop().add_reader(self.master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
            return
        self.raw += data
        self.stream.feed(data)

    @property
    def text(self) -> str:
        lines = [line.rstrip() for line in self.screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.master)
        os.close(self.master)


class Piped:
    """`agent-replay tail` with stdout and stderr on pipes, read without blocking the loop."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            _command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=ROOT
        )
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        self._out = b""

    @property
    def text(self) -> str:
        assert self.proc.stdout is not None
        if not self.proc.stdout.closed:
            self._out += self.proc.stdout.read() or b""
        return self._out.decode(errors="replace")

    def lines(self) -> list[dict[str, Any]]:
        """The complete JSON lines so far."""
        return [json.loads(line) for line in self.text.split("\n")[:-1]]

    def close(self) -> bytes:
        if self.proc.poll() is None:
            self.proc.kill()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        os.set_blocking(self.proc.stdout.fileno(), True)
        self._out += self.proc.stdout.read()
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.proc.wait()
        return err


async def _wait_exit(proc: subprocess.Popen[bytes]) -> int:
    await _until(lambda: proc.poll() is not None, "agent-replay tail to exit")
    assert proc.returncode is not None
    return proc.returncode


async def test_tail_when_on_a_terminal_and_connection_cut_mid_arguments_then_screen_types_it_once(
    http: httpx.AsyncClient, relay: Relay
) -> None:
    run = "tail-pty"
    await _append(http, run, _opening(run))
    term = Terminal()
    proc = subprocess.Popen(  # noqa: ASYNC220 (it runs beside the loop; its exit is polled)
        _command(run, "--from-start", "--url", relay.url),
        stdin=term.slave,
        stdout=term.slave,
        stderr=term.slave,
        env=_env(),
        cwd=ROOT,
    )
    os.close(term.slave)
    try:
        await _until(lambda: "  content: import Re" in term.text, "the first half of the content")
        assert relay.cut() == 1
        await _append(http, run, _closing(run), close=True)
        assert await _wait_exit(proc) == 0
        await _until(lambda: "— run" in term.text, "the summary line")
    finally:
        if proc.poll() is None:
            proc.kill()
        term.close()
    screen = term.text
    assert screen.startswith(EXPECTED_PLAIN), screen
    match = SUMMARY.fullmatch(screen[len(EXPECTED_PLAIN) :])
    assert match and match.groups() == (run, str(len(_opening(run)) + len(_closing(run)))), screen
    assert "\\n" not in screen and '\\"' not in screen
    assert relay.accepted >= 3  # the run, the cut stream, the resumed stream (and the end)
    # Colours on a terminal: the tool header is styled, the text is not.
    assert re.search(rb"\x1b\[[0-9;]*m\xe2\x96\xb6 write_file", term.raw)


async def test_tail_when_piped_and_connection_cut_then_plain_text_exactly_once(
    http: httpx.AsyncClient, relay: Relay
) -> None:
    run = "tail-pipe"
    await _append(http, run, _opening(run))
    tail = Piped(run, "--from-start", "--url", relay.url)
    try:
        await _until(lambda: "  content: import Re" in tail.text, "the first half, piped")
        assert relay.cut() == 1
        await _append(http, run, _closing(run), close=True)
        assert await _wait_exit(tail.proc) == 0
    finally:
        tail.close()
    text = tail.text
    assert not ANSI.search(text), text
    assert text.startswith(EXPECTED_PLAIN), text
    assert SUMMARY.fullmatch(text[len(EXPECTED_PLAIN) :]), text


async def test_tail_when_raw_then_stored_chunks_as_json_lines(
    http: httpx.AsyncClient, service: Running
) -> None:
    run = "tail-raw"
    await _append(http, run, _opening(run) + _closing(run), close=True)
    done = await _tail(run, "--from-start", "--raw", "--url", service.base_url)
    assert done.returncode == 0, done.stderr
    stored = (await http.get(f"/v1/runs/{run}/events")).json()["events"]
    assert [json.loads(line) for line in done.stdout.decode().splitlines()] == [
        e["chunk"] for e in stored
    ]


async def test_tail_when_json_then_decoded_stream_with_typewriter_pieces(
    http: httpx.AsyncClient, service: Running
) -> None:
    run = "tail-json"
    await _append(http, run, _opening(run) + _closing(run), close=True)
    done = await _tail(run, "--from-start", "--json", "--url", service.base_url)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    typed = "".join(
        p.get("text", "")
        for r in records
        for p in r.get("decoded", {}).get("pieces", [])
        if p["path"] == "/content"
    )
    assert typed == CONTENT


async def test_tail_when_offset_given_then_starts_after_it(
    http: httpx.AsyncClient, service: Running
) -> None:
    run = "tail-offset"
    await _append(http, run, _opening(run) + _closing(run), close=True)
    done = await _tail(run, "--offset", "5", "--raw", "--url", service.base_url)
    assert done.returncode == 0
    stored = (await http.get(f"/v1/runs/{run}/events", params={"after": 5})).json()["events"]
    assert [json.loads(line) for line in done.stdout.decode().splitlines()] == [
        e["chunk"] for e in stored
    ]


async def test_tail_when_run_missing_then_exit_3_with_message(service: Running) -> None:
    done = await _tail("no-such-run", "--url", service.base_url)
    assert done.returncode == 3
    assert b"run_not_found" in done.stderr and done.stdout == b""


async def test_tail_when_service_unreachable_then_exit_5_with_message() -> None:
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
        done = await _tail("r", "--url", f"http://127.0.0.1:{port}")
    assert done.returncode == 5
    assert b"cannot reach the service" in done.stderr


async def test_tail_when_key_refused_then_exit_4_with_message(database_url: str) -> None:
    async with serve_in_process(settings_for(database_url, api_keys="right-key")) as locked:
        for key in ("wrong-key", None):
            args = ["r", "--url", locked.base_url] + (["--api-key", key] if key else [])
            done = await _tail(*args)
            assert done.returncode == 4, done.stderr
            assert b"unauthorized" in done.stderr


async def test_tail_when_thread_then_current_run_and_the_next_until_interrupted(
    http: httpx.AsyncClient, service: Running
) -> None:
    first, second = "tail-thread-a", "tail-thread-b"
    thread = "t-tail-follow"
    await _append(http, first, _opening(first, thread))
    tail = Piped("--thread", thread, "--from-start", "--raw", "--url", service.base_url)
    try:
        await _until(lambda: len(tail.lines()) == len(_opening(first)), "the first run's chunks")
        await _append(http, first, _closing(first), close=True)
        total = len(_opening(first)) + len(_closing(first))
        await _until(lambda: len(tail.lines()) == total, "the first run to end")
        await _append(http, second, _opening(second, thread)[:3])
        await _until(lambda: len(tail.lines()) == total + 3, "the next run of the thread")
        assert tail.proc.poll() is None  # a thread tail goes on
        tail.proc.send_signal(signal.SIGINT)
        assert await _wait_exit(tail.proc) == 130
    finally:
        tail.close()
    got = tail.lines()
    assert [c.get("runId") for c in got if c["type"] == "RUN_STARTED"] == [first, second]


async def test_tail_when_thread_has_no_run_yet_then_waits_and_prints_each_run_as_it_starts(
    http: httpx.AsyncClient, service: Running
) -> None:
    first, second = "tail-empty-a", "tail-empty:b"  # a colon in an id: the cursor keeps it
    thread = "t-tail-empty"
    # The earlier tails' streams gone first: the one counted next is this tail's.
    await _until_async(lambda: _thread_followers(http, 0), "no thread stream open")
    tail = Piped("--thread", thread, "--json", "--url", service.base_url)
    try:
        # Started before the thread has any run: it waits (before, exit 3).
        await _until_async(lambda: _thread_followers(http, 1), "the tail to follow the thread")
        await _append(http, first, _opening(first, thread))
        await _until(lambda: len(tail.lines()) == len(_opening(first)), "the first run")
        await _append(http, first, _closing(first), close=True)
        await _append(http, second, _opening(second, thread)[:2])
        total = len(_opening(first)) + len(_closing(first)) + 2
        await _until(lambda: len(tail.lines()) == total, "the second run")
        assert tail.proc.poll() is None
        tail.proc.send_signal(signal.SIGINT)
        assert await _wait_exit(tail.proc) == 130
    finally:
        tail.close()
    got = tail.lines()
    assert [line["seq"] for line in got] == [
        *range(1, len(_opening(first)) + len(_closing(first)) + 1), 1, 2,
    ]  # fmt: skip
    assert [line["chunk"]["runId"] for line in got if line["chunk"]["type"] == "RUN_STARTED"] == [
        first, second,
    ]  # fmt: skip


async def test_tail_when_thread_runs_open_side_by_side_then_each_printed_once_as_they_come(
    http: httpx.AsyncClient, service: Running
) -> None:
    """A run started while the one before is open is followed at once: its chunks print
    before the first run ends, and the first run's later chunks after them."""
    first, second = "tail-side-a", "tail-side:b"
    thread = "t-tail-side"
    await _append(http, first, _opening(first, thread)[:2])
    tail = Piped("--thread", thread, "--from-start", "--json", "--url", service.base_url)
    try:
        await _until(lambda: len(tail.lines()) == 2, "the first run's chunks")
        await _append(http, second, _opening(second, thread)[:3])
        await _until(lambda: len(tail.lines()) == 5, "the second run, the first still open")
        await _append(http, first, _opening(first, thread)[2:4])
        await _until(lambda: len(tail.lines()) == 7, "the first run's later chunks")
        assert tail.proc.poll() is None
        tail.proc.send_signal(signal.SIGINT)
        assert await _wait_exit(tail.proc) == 130
    finally:
        tail.close()
    got = tail.lines()
    assert [(line["chunk"].get("runId"), line["seq"]) for line in got][:5] == [
        (first, 1), (None, 2), (second, 1), (None, 2), (None, 3),
    ]  # fmt: skip
    assert [line["seq"] for line in got[5:]] == [3, 4]


async def _thread_followers(http: httpx.AsyncClient, count: int) -> bool:
    text = (await http.get("/metrics")).text
    line = next(ln for ln in text.splitlines() if ln.startswith("replay_stream_thread_followers "))
    return float(line.split()[1]) == count


async def _until_async(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("target", ["run", "thread"])
async def test_tail_when_service_gone_after_a_drop_then_said_once_and_exit_5_past_retry_seconds(
    http: httpx.AsyncClient, relay: Relay, target: str
) -> None:
    run, thread = f"tail-gone-{target}", f"t-tail-gone-{target}"
    await _append(http, run, _opening(run, thread))
    follow = [run] if target == "run" else ["--thread", thread]
    tail = Piped(*follow, "--from-start", "--raw", "--retry-seconds", "3", "--url", relay.url)
    try:
        await _until(lambda: len(tail.lines()) == len(_opening(run)), "the run's chunks")
        await relay.stop()  # the stream cut and every reconnect refused from now on
        assert await _wait_exit(tail.proc) == 5
    finally:
        err = tail.close().decode()
    seen = len(_opening(run))
    where = f"seq {seen}" if target == "run" else f"{run}:{seen}"
    notes = [line for line in err.splitlines() if line.startswith("agent-replay tail: ")]
    assert notes[0].startswith(f"agent-replay tail: connection lost after {where} ("), err
    assert notes[0].endswith("; retrying"), err
    assert notes[-1].startswith("agent-replay tail: cannot reach the service at "), err
    assert len(notes) == 2, err  # the drop said once, never a resume
