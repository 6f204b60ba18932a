"""`agent-replay tail`: follow a run (or a thread's runs) through the HTTP stream.

The follower keeps one cursor, the last seq it printed (following a thread,
the thread stream's cursor: `<run_id>:<seq>` of each run it follows), and
after a dropped connection asks again with `Last-Event-ID: <cursor>`: the
service resumes strictly after it, so nothing is printed twice or skipped. Tool-call
arguments go through the typewriter decoder here, in the client, whose state
survives the reconnect. It ends (exit 0) once the service ends the stream,
which it does when the run is closed and delivered.

Exit codes: 0 done, 1 any other API error, 3 no such run or thread, 4 the key
was refused, 5 the service cannot be reached (at the start, or for longer
than `--retry-seconds` after a drop), 130 interrupted.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import quote

from agent_replay.console.http import Api, ApiError, Unreachable
from agent_replay.console.render import Output, PlainOutput, Pretty, RichOutput
from agent_replay.projector.typewriter import ToolCalls

EXIT_OK, EXIT_ERROR, EXIT_NOT_FOUND, EXIT_REFUSED, EXIT_UNREACHABLE = 0, 1, 3, 4, 5
EXIT_INTERRUPTED = 130


@dataclass(frozen=True, slots=True)
class TailOptions:
    url: str
    api_key: str | None
    # "now", "start" or a seq already seen.
    offset: str
    mode: str  # "pretty", "raw" or "json"
    retry_seconds: float = 30.0


class Printer:
    """Where events go, in the chosen mode."""

    def __init__(self, mode: str, stdout: TextIO, color: bool | None = None) -> None:
        self._mode = mode
        self._stdout = stdout
        self._calls = ToolCalls()
        self.events = 0
        out: Output
        if mode == "pretty" and (stdout.isatty() if color is None else color):
            from rich.console import Console

            out = RichOutput(Console(file=stdout, highlight=False, markup=False, emoji=False))
        else:
            out = PlainOutput(stdout)
        self._pretty = Pretty(out)

    def event(self, seq: int, data: str) -> None:
        self.events += 1
        if self._mode == "raw":
            self._stdout.write(data + "\n")
            self._stdout.flush()
            return
        chunk = json.loads(data)
        decoded = self._calls.observe(chunk) if isinstance(chunk, dict) else None
        if self._mode == "json":
            record: dict[str, Any] = {"seq": seq, "chunk": chunk}
            if decoded is not None:
                record["decoded"] = decoded
            self._stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._stdout.flush()
        elif isinstance(chunk, dict):
            self._pretty.chunk(chunk, decoded)

    def summary(self, run: dict[str, Any]) -> None:
        if self._mode == "pretty":
            self._pretty.summary(run, run.get("last_seq"))


def _note(stderr: TextIO, text: str) -> None:
    stderr.write(f"agent-replay tail: {text}\n")
    stderr.flush()


class _Reconnects:
    """One follower's drops: each said once, with its end; past `retry_seconds` down, raised.

    A resume that works at once is not worth a line between typed characters;
    one that fails is said, once, and so is its end.
    """

    def __init__(
        self, stderr: TextIO, retry_seconds: float, sleep: Callable[[float], None]
    ) -> None:
        self._stderr = stderr
        self._retry_seconds = retry_seconds
        self._sleep = sleep
        self._down_since: float | None = None
        self._said = False
        self._delay = 0.1

    def connected(self, where: str) -> None:
        if self._down_since is not None:
            if self._said:
                _note(self._stderr, f"resumed after {where}")
            self._down_since, self._said, self._delay = None, False, 0.1

    def lost(self, where: str, exc: Unreachable) -> None:
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
        elif now - self._down_since > self._retry_seconds:
            raise exc
        elif not self._said:
            self._said = True
            _note(self._stderr, f"connection lost after {where} ({exc}); retrying")

    def wait(self) -> None:
        self._sleep(self._delay)
        self._delay = min(self._delay * 2, 2.0)


def follow_run(
    api: Api,
    run_id: str,
    cursor: int,
    printer: Printer,
    stderr: TextIO,
    *,
    retry_seconds: float,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Print the run after `cursor` until it is closed and delivered; the run at the end."""
    path = f"/v1/runs/{quote(run_id, safe='')}/stream"
    reconnects = _Reconnects(stderr, retry_seconds, sleep)
    while True:
        try:
            for event in api.events(path, last_event_id=str(cursor)):
                reconnects.connected(f"seq {cursor}")
                if event.id is None:
                    continue
                seq = int(event.id)
                if seq <= cursor:
                    continue  # never print twice, whatever a server sends
                printer.event(seq, event.data)
                cursor = seq
            run: dict[str, Any] = api.get(f"/v1/runs/{quote(run_id, safe='')}")
            if run.get("closed") and cursor >= int(run["last_seq"]):
                return run
            # The response ended short of the end (a proxy, a cut the transport
            # reported as an end): resume after the cursor all the same.
        except Unreachable as exc:
            reconnects.lost(f"seq {cursor}", exc)
        reconnects.wait()


def _start_cursor(offset: str, run: dict[str, Any]) -> int:
    if offset == "start":
        return 0
    if offset == "now":
        return int(run["last_seq"])
    return int(offset)


def tail_run(api: Api, run_id: str, options: TailOptions, printer: Printer, stderr: TextIO) -> int:
    run = api.get(f"/v1/runs/{quote(run_id, safe='')}")
    cursor = _start_cursor(options.offset, run)
    if run.get("closed") and cursor >= int(run["last_seq"]) and options.offset == "now":
        _note(stderr, f"run {run_id} is closed; --from-start replays it")
    final = follow_run(api, run_id, cursor, printer, stderr, retry_seconds=options.retry_seconds)
    printer.summary(final)
    return EXIT_OK


def _entries(cursor: str) -> list[tuple[str, int]]:
    """A thread cursor: `<run_id>:<seq>` entries joined by `~`, the frame's own run first
    (a run id may hold colons, a seq never does: an entry splits at its last colon)."""
    entries = []
    for entry in cursor.split("~"):
        run_id, _, seq = entry.rpartition(":")
        entries.append((run_id, int(seq)))
    return entries


def follow_thread(
    api: Api,
    thread_id: str,
    cursor: str,
    printer: Printer,
    stderr: TextIO,
    *,
    retry_seconds: float,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Print the thread's runs after `cursor` (`-1`: from its first run) until interrupted.

    The service announces each run (`event: run`) before its events, whose ids
    are thread cursors naming every run it still follows (runs made while another
    is open are followed side by side, their events interleaved); after a drop it
    resumes strictly after the last one. A run that leaves the cursor is over:
    its summary goes out.
    """
    path = f"/v1/threads/{quote(thread_id, safe='')}/stream"
    # The runs followed, and the last seq of each printed (or announced: 0).
    printed: dict[str, int] = {} if cursor == "-1" else dict(_entries(cursor))
    reconnects = _Reconnects(stderr, retry_seconds, sleep)
    while True:
        try:
            for event in api.events(path, last_event_id=cursor):
                reconnects.connected(cursor)
                if event.id is None:
                    continue
                entries = _entries(event.id)
                run_id, seq = entries[0]
                listed = {run for run, _ in entries}
                for over in [run for run in printed if run not in listed]:
                    del printed[over]
                    printer.summary(api.get(f"/v1/runs/{quote(over, safe='')}"))
                if event.event == "run":
                    printed[run_id] = 0
                elif seq <= printed.get(run_id, 0):
                    continue  # never print twice, whatever a server sends
                else:
                    printer.event(seq, event.data)
                    printed[run_id] = seq
                cursor = event.id
            # The service ended the response (a replica draining, a proxy): resume.
        except Unreachable as exc:
            reconnects.lost(cursor, exc)
        reconnects.wait()


def tail_thread(
    api: Api, thread_id: str, options: TailOptions, printer: Printer, stderr: TextIO
) -> int:
    """The thread's newest run (from the offset), then each run made after it, until
    interrupted; a thread with no run yet is waited on."""
    page = api.get("/v1/runs", {"thread_id": thread_id, "limit": "1"})
    cursor = "-1"
    if page["runs"]:
        newest = api.get(f"/v1/runs/{quote(page['runs'][0]['run_id'], safe='')}")
        cursor = f"{newest['run_id']}:{_start_cursor(options.offset, newest)}"
    follow_thread(api, thread_id, cursor, printer, stderr, retry_seconds=options.retry_seconds)
    return EXIT_OK


def main(
    run_id: str | None,
    thread_id: str | None,
    options: TailOptions,
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
) -> int:
    try:
        api = Api(options.url, options.api_key)
    except ValueError as exc:
        _note(stderr, str(exc))
        return EXIT_ERROR
    printer = Printer(options.mode, stdout)
    try:
        if thread_id is not None:
            return tail_thread(api, thread_id, options, printer, stderr)
        assert run_id is not None
        return tail_run(api, run_id, options, printer, stderr)
    except ApiError as exc:
        _note(stderr, exc.message + f" ({exc.code})")
        if exc.status == 404:
            return EXIT_NOT_FOUND
        if exc.status in (401, 403):
            return EXIT_REFUSED
        return EXIT_ERROR
    except Unreachable as exc:
        _note(stderr, f"cannot reach the service at {options.url}: {exc}")
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        if options.mode == "pretty":
            stdout.write("\n")  # JSON Lines stay JSON Lines
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
