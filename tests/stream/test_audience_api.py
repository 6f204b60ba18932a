"""Streams per audience over a real socket: `?types=`, `?events=named`, `?view=decoded`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from agent_replay.log import EventLog

DEADLINE = 10.0
CONTENT = 'import React from "react";\n\nexport const App = () => <p>héllo 😀</p>;\n'
ARGS = json.dumps({"filePath": "src/App.tsx", "content": CONTENT})


def _run_chunks() -> list[dict[str, Any]]:
    deltas = [ARGS[i : i + 7] for i in range(0, len(ARGS), 7)]
    return [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Writing"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "write_file"},
        *({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": d} for d in deltas),
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]


async def _append(
    http: httpx.AsyncClient, run: str, chunks: list[dict[str, Any]], **kw: Any
) -> None:
    r = await http.post(f"/v1/runs/{run}/events", json={"events": chunks, **kw})
    assert r.status_code == 200, r.text


def _frames(raw: bytes) -> list[dict[str, str]]:
    """SSE frames as field dicts (comments and the retry hint left out)."""
    frames = []
    for block in raw.decode().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line and not line.startswith(":"):
                name, _, value = line.partition(": ")
                assert name not in fields, block
                fields[name] = value
        if "data" in fields:
            frames.append(fields)
    return frames


async def _read(
    http: httpx.AsyncClient, run: str, headers: dict[str, str] | None = None, **params: str
) -> tuple[int, bytes]:
    async with asyncio.timeout(DEADLINE):
        r = await http.get(f"/v1/runs/{run}/stream", params=params, headers=headers)
    return r.status_code, r.content


async def test_stream_when_types_given_then_only_matching_events_with_their_own_seqs(
    http: httpx.AsyncClient, event_log: EventLog
) -> None:
    await _append(http, "aud-types", _run_chunks(), close=True)
    status, raw = await _read(http, "aud-types", types="TEXT_MESSAGE_*,TOOL_CALL_START")
    assert status == 200
    stored = await event_log.read_events("aud-types", 0, 1000)
    want = [
        (e.seq, e.chunk)
        for e in stored
        if e.type.startswith("TEXT_MESSAGE_") or e.type == "TOOL_CALL_START"
    ]
    assert [(int(f["id"]), f["data"]) for f in _frames(raw)] == want
    assert [s for s, _ in want] == [2, 3, 4, 5]


async def test_stream_when_filtered_resume_from_last_id_then_rest_exactly_once(
    http: httpx.AsyncClient, event_log: EventLog
) -> None:
    await _append(http, "aud-resume", _run_chunks(), close=True)
    _, raw = await _read(http, "aud-resume", types="TOOL_CALL_*")
    every = [(int(f["id"]), f["data"]) for f in _frames(raw)]
    cut = every[len(every) // 2][0]
    _, rest = await _read(http, "aud-resume", {"Last-Event-ID": str(cut)}, types="TOOL_CALL_*")
    resumed = [(int(f["id"]), f["data"]) for f in _frames(rest)]
    assert resumed == [e for e in every if e[0] > cut]
    stored = await event_log.read_events("aud-resume", 0, 1000)
    assert every == [(e.seq, e.chunk) for e in stored if e.type.startswith("TOOL_CALL_")]


async def test_stream_when_events_named_then_each_frame_carries_its_chunk_type(
    http: httpx.AsyncClient,
) -> None:
    await _append(http, "aud-named", _run_chunks()[:4], close=True)
    _, named = await _read(http, "aud-named", events="named")
    assert [f.get("event") for f in _frames(named)] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]
    _, plain = await _read(http, "aud-named")
    assert all("event" not in f for f in _frames(plain))


async def test_stream_when_types_malformed_then_400_invalid_types_before_any_byte(
    http: httpx.AsyncClient,
) -> None:
    await _append(http, "aud-bad", _run_chunks()[:2])
    for bad in ("", "TEXT*_X", "A B", ",,"):
        status, raw = await _read(http, "aud-bad", types=bad)
        assert status == 400, bad
        assert json.loads(raw)["error"]["code"] == "invalid_types"
    status, raw = await _read(http, "aud-bad", events="loud")
    assert status == 422 and json.loads(raw)["error"]["code"] == "invalid_request"
    status, raw = await _read(http, "aud-bad", view="fancy")
    assert status == 422 and json.loads(raw)["error"]["code"] == "invalid_request"
    r = await http.get("/v1/runs/aud-bad/events", params={"types": "*X"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_types"


async def test_events_when_types_with_wildcard_then_matching_page_and_cursor(
    http: httpx.AsyncClient,
) -> None:
    await _append(http, "aud-events", _run_chunks(), close=True)
    r = await http.get("/v1/runs/aud-events/events", params={"types": "TOOL_CALL_*", "limit": 3})
    page = r.json()
    assert [e["type"] for e in page["events"]] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_ARGS",
    ]
    seen = [e["seq"] for e in page["events"]]
    after = page["next_after"]
    while after is not None:
        page = (
            await http.get(
                "/v1/runs/aud-events/events", params={"types": "TOOL_CALL_*", "after": after}
            )
        ).json()
        seen += [e["seq"] for e in page["events"]]
        after = page["next_after"]
    every = (await http.get("/v1/runs/aud-events/events")).json()["events"]
    assert seen == [e["seq"] for e in every if e["type"].startswith("TOOL_CALL_")]
    # `_` in a prefix is a character, not SQL's one-character wildcard.
    r = await http.get("/v1/runs/aud-events/events", params={"types": "TEXT_MESSAGE_C*"})
    assert [e["type"] for e in r.json()["events"]] == ["TEXT_MESSAGE_CONTENT"]
    r = await http.get("/v1/runs/aud-events/events", params={"types": "TEXT%"})
    assert r.status_code == 400


def _typed(frames: list[dict[str, str]], path: str) -> str:
    text = ""
    for frame in frames:
        decoded = json.loads(frame["data"]).get("decoded")
        for piece in (decoded or {}).get("pieces", []):
            if piece["path"] == path:
                text += piece.get("text", "")
    return text


async def test_stream_when_view_decoded_then_arguments_arrive_decoded_beside_each_chunk(
    http: httpx.AsyncClient, event_log: EventLog
) -> None:
    await _append(http, "aud-decoded", _run_chunks(), close=True)
    _, raw = await _read(http, "aud-decoded", view="decoded")
    frames = _frames(raw)
    stored = await event_log.read_events("aud-decoded", 0, 1000)
    assert [int(f["id"]) for f in frames] == [e.seq for e in stored]
    for frame, event in zip(frames, stored, strict=True):
        data = json.loads(frame["data"])
        assert data["seq"] == event.seq and data["chunk"] == json.loads(event.chunk)
        assert ("decoded" in data) == (event.type in ("TOOL_CALL_ARGS", "TOOL_CALL_END"))
    assert _typed(frames, "/content") == CONTENT
    assert _typed(frames, "/filePath") == "src/App.tsx"
    end = json.loads(frames[-2]["data"])
    assert end["decoded"] == {"toolCallId": "c1", "pieces": [], "complete": True}


async def test_stream_when_view_decoded_resumed_mid_arguments_then_typing_continues_exactly(
    http: httpx.AsyncClient,
) -> None:
    await _append(http, "aud-decoded-resume", _run_chunks(), close=True)
    _, raw = await _read(http, "aud-decoded-resume", view="decoded")
    frames = _frames(raw)
    for cut in (7, 12, len(frames) - 3):
        before = [f for f in frames if int(f["id"]) <= cut]
        _, rest = await _read(
            http, "aud-decoded-resume", {"Last-Event-ID": str(cut)}, view="decoded"
        )
        after = _frames(rest)
        assert [int(f["id"]) for f in after] == [int(f["id"]) for f in frames if int(f["id"]) > cut]
        assert _typed(before, "/content") + _typed(after, "/content") == CONTENT


async def test_stream_when_view_decoded_and_live_then_pieces_follow_appends(
    http: httpx.AsyncClient,
) -> None:
    chunks = _run_chunks()
    await _append(http, "aud-live", chunks[:9])  # through the whole filePath
    got = b""
    async with (
        asyncio.timeout(DEADLINE),
        http.stream(
            "GET", "/v1/runs/aud-live/stream", params={"view": "decoded", "types": "TOOL_CALL_*"}
        ) as r,
    ):
        raw = r.aiter_raw()
        while _typed(_frames(got), "/filePath") != "src/App.tsx":
            got += await anext(raw)
        await _append(http, "aud-live", chunks[9:], close=True)
        async for data in raw:
            got += data
    frames = _frames(got)
    assert {json.loads(f["data"])["chunk"]["type"] for f in frames} == {
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
    }
    assert _typed(frames, "/content") == CONTENT
