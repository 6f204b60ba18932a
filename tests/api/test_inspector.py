"""The run inspector (`/inspect`) in headless Chromium (Playwright, Debian's Chromium), as a
person auditing runs uses it, against the service over a real socket (through a relay the
test cuts, where a dropped connection is the point)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from agent_replay.config import asyncpg_dsn
from tests.conftest import settings_for
from tests.support.relay import Relay, relay_to
from tests.support.servers import Running, serve_in_process

NODE = Path(__file__).resolve().parents[1] / "node"
STEP_TIMEOUT = 60.0
CONTENT = 'import React from "react";\n\nexport const App = () => <p>"hi"</p>;\n'
ARGS = json.dumps({"filePath": "src/App.tsx", "content": CONTENT})
DELTAS = [ARGS[i : i + 8] for i in range(0, len(ARGS), 8)]


@pytest.fixture(scope="module")
async def service(database_url: str) -> AsyncIterator[Running]:
    async with serve_in_process(settings_for(database_url, heartbeat_seconds=0.5)) as running:
        yield running


@pytest.fixture
async def http(service: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as client:
        yield client


@pytest.fixture
async def relay(service: Running) -> AsyncIterator[Relay]:
    async with relay_to(service.base_url) as running:
        yield running


class Browser:
    """tests/node/inspector.mjs: one JSON line per step, `go` to let it continue."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def open(cls, base: str, scenario: str, *args: str) -> Browser:
        assert shutil.which("chromium"), "the inspector tests need Chromium (ops/test installs it)"
        proc = await asyncio.create_subprocess_exec(
            "node", "inspector.mjs", base, scenario, *args, cwd=NODE,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        return cls(proc)

    async def step(self, name: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), STEP_TIMEOUT)
        if not line:
            await self.proc.wait()
            assert self.proc.stderr is not None
            err = (await self.proc.stderr.read()).decode()
            raise AssertionError(f"the browser script ended before {name!r}: {err[-3000:]}")
        data: dict[str, Any] = json.loads(line)
        assert data["step"] == name, data
        return data

    async def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        await self.proc.stdin.drain()

    async def finish(self) -> None:
        done = await self.step("done")
        assert done["problems"] == []
        assert await asyncio.wait_for(self.proc.wait(), STEP_TIMEOUT) == 0

    async def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def _append(
    http: httpx.AsyncClient, run: str, chunks: list[dict[str, Any]], close: bool = False
) -> None:
    r = await http.post(f"/v1/runs/{run}/events", json={"events": chunks, "close": close})
    assert r.status_code == 200, r.text


def _text(mid: str, *deltas: str) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": d} for d in deltas),
        {"type": "TEXT_MESSAGE_END", "messageId": mid},
    ]


def _tool(call: str, name: str, deltas: list[str], result: str) -> list[dict[str, Any]]:
    return [
        {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": name},
        *({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": d} for d in deltas),
        {"type": "TOOL_CALL_END", "toolCallId": call},
        {
            "type": "TOOL_CALL_RESULT",
            "toolCallId": call,
            "messageId": f"{call}-r",
            "content": result,
        },
    ]


async def test_inspector_list_when_filtered_then_rows_match_the_api_and_filters_stay_in_the_url(
    http: httpx.AsyncClient, service: Running, node_harness: Path
) -> None:
    await _append(
        http,
        "list-done",
        [{"type": "RUN_STARTED", "threadId": "t-a", "runId": "list-done"}, *_text("m", "fine")],
        close=True,
    )
    await _append(
        http,
        "list-err",
        [
            {"type": "RUN_STARTED", "threadId": "t-b", "runId": "list-err"},
            *_tool("s1", "search", ['{"q": "x"}'], "none"),
            {"type": "RUN_ERROR", "message": "boom", "code": "e"},
        ],
        close=True,
    )
    await _append(
        http, "list-live", [{"type": "RUN_STARTED", "threadId": "t-live", "runId": "list-live"}]
    )
    browser = await Browser.open(service.base_url, "list", "t-live")
    try:
        every = {
            r["run_id"] for r in (await http.get("/v1/runs", params={"limit": 50})).json()["runs"]
        }
        assert set((await browser.step("all"))["rows"]) == every
        status = await browser.step("status")
        errors = (await http.get("/v1/runs", params={"status": "error"})).json()["runs"]
        assert status["rows"] == [r["run_id"] for r in errors] and "list-err" in status["rows"]
        assert "status=error" in status["url"]
        tool = await browser.step("tool")
        assert tool["rows"] == ["list-err"] and tool["tool"] == "search"
        # By the code its RUN_ERROR gave, shown with the status.
        code = await browser.step("code")
        assert (code["rows"], code["code"], code["status"]) == (["list-err"], "e", "error (e)")
        assert (await browser.step("none"))["rows"] == []
        assert (await browser.step("live-list"))["before"] == "1"
        await _append(http, "list-live", _text("m", "more"), close=True)
        await browser.go()
        assert (await browser.step("live-list-after"))["events"] == "4"
        await browser.finish()
    finally:
        await browser.close()


async def test_inspector_run_when_events_appended_and_connection_dropped_then_typed_live_once(
    http: httpx.AsyncClient, relay: Relay, node_harness: Path
) -> None:
    run = "insp-live"
    half = len(DELTAS) // 2
    await _append(http, run, [{"type": "RUN_STARTED", "threadId": "t-live-page", "runId": run}])
    browser = await Browser.open(relay.url, "live", run)
    try:
        assert "Hello" not in (await browser.step("loaded"))["text"]
        await _append(http, run, [
            *_text("m1", "Hello, ", "I will **write** ", "the file."),
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "write_file"},
            *({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": d} for d in DELTAS[:half]),
        ])  # fmt: skip
        await browser.go()
        halfway = await browser.step("half")
        assert "Hello, I will write the file." in halfway["text"]
        assert halfway["path"] == "src/App.tsx"
        assert CONTENT.startswith(halfway["content"]) and "\\n" not in halfway["content"]
        assert relay.cut() >= 1  # the page's live stream drops
        await _append(http, run, [
            *({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": d} for d in DELTAS[half:]),
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "messageId": "r1",
             "content": "wrote it"},
            *_text("m2", "Done."),
            {"type": "RUN_FINISHED", "threadId": "t-live-page", "runId": run},
        ], close=True)  # fmt: skip
        await browser.go()
        closed = await browser.step("closed")
        assert closed["sameDocument"] is True  # no reload
        assert closed["content"] == CONTENT
        assert closed["text"].count("Hello, I will write the file.") == 1
        assert closed["text"].count("Done.") == 1 and "wrote it" in closed["text"]
        last = (await http.get(f"/v1/runs/{run}")).json()["last_seq"]
        assert closed["timeline"] == list(range(1, last + 1))  # each event once, in order
        assert closed["status"] == "finished"
        stored = (await http.get(f"/v1/runs/{run}/events", params={"after": 1, "limit": 1})).text
        assert (await browser.step("raw"))["raw"] in stored
        await browser.finish()
    finally:
        await browser.close()


async def test_inspector_thread_when_runs_start_and_end_later_then_listed_and_redrawn_live(
    http: httpx.AsyncClient, service: Running, node_harness: Path
) -> None:
    thread = "t-insp-thread"
    first, second = "insp-thread:1", "insp-thread:2"
    await _append(http, first, [{"type": "RUN_STARTED", "threadId": thread, "runId": first}])
    browser = await Browser.open(service.base_url, "thread", thread)
    try:
        assert (await browser.step("loaded"))["runs"] == [[first, "running"]]
        await _append(http, first, [
            *_text("m1", "First answer."),
            {"type": "RUN_FINISHED", "threadId": thread, "runId": first},
        ], close=True)  # fmt: skip
        await _append(http, second, [{"type": "RUN_STARTED", "threadId": thread, "runId": second}])
        await browser.go()
        announced = (await browser.step("announced"))["runs"]
        assert announced == [[first, "finished"], [second, "running"]]
        await _append(http, second, [
            *_text("m2", "Second answer."),
            {"type": "RUN_FINISHED", "threadId": thread, "runId": second},
        ], close=True)  # fmt: skip
        await browser.go()
        finished = await browser.step("finished")
        assert finished["runs"] == [[first, "finished"], [second, "finished"]]
        assert finished["heading"] == "Runs, in order (2)"
        assert finished["transcript"].count("First answer.") == 1
        assert finished["transcript"].count("Second answer.") == 1
        assert finished["sameDocument"] is True
        await browser.finish()
    finally:
        await browser.close()


async def test_inspector_run_when_at_given_then_only_what_existed_at_that_seq(
    http: httpx.AsyncClient, service: Running, node_harness: Path
) -> None:
    run = "insp-at"
    await _append(http, run, [
        {"type": "RUN_STARTED", "threadId": "t-at", "runId": run},
        *_text("m1", "First ", "second ", "third."),
        *_text("m2", "Done."),
    ], close=True)  # fmt: skip
    browser = await Browser.open(service.base_url, "at", run, "4")
    try:
        at = await browser.step("at")
        assert "First second" in at["text"] and "third." not in at["text"]
        assert "Done." not in at["text"]
        assert at["visible"] == [1, 2, 3, 4] and at["slider"] == "4"
        end = await browser.step("end")
        assert "First second third." in end["text"] and "Done." in end["text"]
        assert end["visible"] == list(range(1, 10))
        await browser.finish()
    finally:
        await browser.close()


async def test_inspector_when_chunks_carry_script_and_img_onerror_then_nothing_executes(
    http: httpx.AsyncClient, service: Running, node_harness: Path
) -> None:
    run = "insp-xss"
    script = "<script>window.__xss = 1</script>"
    image = '<img src=x onerror="window.__xss2 = 1">'
    args = json.dumps({"content": f"{script}{image}", "<img src=x onerror=window.__xss3=1>": 1})
    await _append(http, run, [
        {"type": "RUN_STARTED", "threadId": "t-xss", "runId": run},
        *_text("m1", f"text {script} and {image} and [link](javascript:window.__xss4=1)"),
        *_tool("c1", f"tool{image}", [args[:15], args[15:]], f"result {script}{image}"),
        {"type": "CUSTOM", "name": f"n{image}", "value": {"progress": 0.5, "message": script}},
    ], close=True)  # fmt: skip
    browser = await Browser.open(service.base_url, "xss", run)
    try:
        seen = await browser.step("xss")
        assert seen["flags"] == [None, None, None, None]
        assert seen["images"] == 0 and seen["scripts"] == 0
        assert script in seen["text"] and image in seen["text"]  # shown as text
        assert not any(href and href.lower().startswith("javascript:") for href in seen["hrefs"])
        await browser.finish()
    finally:
        await browser.close()


@pytest.mark.parametrize("key", ["inspect-admin", "inspect-read"])
async def test_inspector_when_keys_required_then_asks_once_and_keeps_it_for_the_tab(
    database_url: str, node_harness: Path, key: str
) -> None:
    # The inspector only reads: a `read` key is enough for every page of it.
    settings = settings_for(database_url, api_keys="inspect-admin, inspect-read:read")
    run = f"insp-{key}"
    async with (
        serve_in_process(settings) as locked,
        httpx.AsyncClient(
            base_url=locked.base_url, headers={"Authorization": "Bearer inspect-admin"}
        ) as http,
    ):
        await _append(
            http,
            run,
            [{"type": "RUN_STARTED", "threadId": "t-k", "runId": run}, *_text("m", "behind a key")],
            close=True,
        )
        browser = await Browser.open(locked.base_url, "key", key, run)
        try:
            listed = await browser.step("listed")
            assert run in listed["rows"] and listed["stored"] is True
            shown = await browser.step("run")
            assert shown["asked"] is False and "behind a key" in shown["text"]
            await browser.finish()
        finally:
            await browser.close()


async def test_inspector_when_phone_width_and_dark_then_no_sideways_scroll_and_keys_work(
    http: httpx.AsyncClient, service: Running, node_harness: Path
) -> None:
    run = "insp-phone"
    await _append(http, run, [
        {"type": "RUN_STARTED", "threadId": "t-phone-" + "x" * 60, "runId": run},
        *_text("m1", "A long line " * 30),
        *_tool("c1", "write_file", [ARGS], "ok"),
    ], close=True)  # fmt: skip
    browser = await Browser.open(service.base_url, "phone", run)
    try:
        phone = await browser.step("phone")
        assert phone["overflow"] <= 0
        assert phone["background"] != "rgb(255, 255, 255)"  # the dark scheme
        keys = await browser.step("keys")
        assert keys["expanded"] == "true" and keys["focused"] == "2"
        await browser.finish()
    finally:
        await browser.close()


async def test_eventsource_when_events_named_then_browser_listeners_get_them_by_type(
    http: httpx.AsyncClient, service: Running, node_harness: Path
) -> None:
    run = "insp-es"
    await _append(http, run, [
        {"type": "RUN_STARTED", "threadId": "t-es", "runId": run},
        *_text("m1", "one ", "two"),
        *_tool("c1", "t", ["{}"], "r"),
    ], close=True)  # fmt: skip
    browser = await Browser.open(service.base_url, "eventsource", run)
    try:
        seen = (await browser.step("eventsource"))["seen"]
        # Named frames only (no unnamed `message` events), ids are the events' seqs.
        assert seen == [["3", "one "], ["4", "two"], ["5", "END"]]
        await browser.finish()
    finally:
        await browser.close()


async def test_inspector_when_a_stored_chunk_altered_then_run_and_thread_show_altered_at_its_seq(
    http: httpx.AsyncClient, service: Running, node_harness: Path, database_url: str
) -> None:
    """The run page shows its chain intact, then (verified again after a chunk was changed
    in the database) altered at that seq; the thread's "Verify thread" names each run's state."""
    for run in ("insp-int-1", "insp-int-2"):
        await _append(http, run, [
            {"type": "RUN_STARTED", "threadId": "t-int", "runId": run},
            *_text(f"{run}-m", "Hello ", "there."),
        ], close=True)  # fmt: skip
    browser = await Browser.open(service.base_url, "integrity", "insp-int-2", "t-int")
    try:
        intact = await browser.step("intact")
        assert intact["text"] == "intact (5 events)"
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            # Seq 3's delta, in its own row or inside a batch row.
            await conn.execute(
                "UPDATE events SET chunk = replace(chunk, 'Hello', 'Howdy') "
                "WHERE run_id = 'insp-int-2'"
            )
        finally:
            await conn.close()
        await browser.go()
        altered = await browser.step("altered")
        assert altered["text"] == "altered at seq 3 (hash_mismatch)"
        thread = await browser.step("thread")
        assert thread["summary"] == "1 of 2 runs not intact."
        assert thread["runs"] == [
            ["insp-int-1", "intact (5 events)"],
            ["insp-int-2", "altered at seq 3 (hash_mismatch)"],
        ]
        await browser.finish()
    finally:
        await browser.close()
