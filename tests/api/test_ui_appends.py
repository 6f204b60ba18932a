"""Direct appends of AI SDK UI message stream chunks (`?format=ai-sdk`): a producer that
pushes what `streamText(...).toUIMessageStream()` gives, in as many appends as it likes,
and the AI SDK endpoint serves back the chunks it pushed; the log holds AG-UI events."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx

from tests.ingest.test_ui_chunks import EVERY_TYPE

Chunk = dict[str, Any]


def ndjson(chunks: list[Chunk]) -> bytes:
    return "".join(json.dumps(c) + "\n" for c in chunks).encode()


def served_for(chunks: list[Chunk], run_id: str, thread: str) -> list[Chunk]:
    """What the AI SDK endpoint sends for a producer's `chunks`: its own start (the run's id
    and metadata), the producer's start and finish metadata as message-metadata chunks."""
    out: list[Chunk] = []
    for chunk in chunks:
        metadata = [{"type": "message-metadata", "messageMetadata": chunk["messageMetadata"]}
                    ] if "messageMetadata" in chunk else []  # fmt: skip
        if chunk["type"] == "start":
            out.append({"type": "start", "messageId": run_id,
                        "messageMetadata": {"runId": run_id, "threadId": thread}})  # fmt: skip
            out += metadata
        elif chunk["type"] == "finish":
            out += metadata
            out.append({k: v for k, v in chunk.items() if k != "messageMetadata"})
        else:
            out.append(chunk)
    return out


async def ui_stream(client: httpx.AsyncClient, chat: str, opened: asyncio.Event) -> list[Chunk]:
    """The chat's active run as the AI SDK endpoint streams it, to its `[DONE]`: every chunk
    as stored (`resume=replay`; the default compacts what was stored before the request)."""
    chunks: list[Chunk] = []
    url = f"/v1/ai-sdk/demo/{chat}/stream?approvals=true&resume=replay"
    async with client.stream("GET", url) as response:
        assert response.status_code == 200
        opened.set()
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    return chunks


async def test_ui_chunks_appended_in_pieces_when_streamed_then_the_chunks_pushed(
    client: httpx.AsyncClient,
) -> None:
    run_id, chat = "ui-pushed", "chat-ui-pushed"
    assert (await client.put(f"/v1/runs/{run_id}", json={"thread_id": chat})).status_code == 201
    # Cut inside the streamed tool call: its start, its input and its end in three appends.
    first = EVERY_TYPE.index({"type": "tool-input-delta", "toolCallId": "c1",
                              "inputTextDelta": '{"city":'})  # fmt: skip
    cuts = [0, first, first + 2, 25, len(EVERY_TYPE)]
    opened = asyncio.Event()
    reading: asyncio.Task[list[Chunk]] | None = None
    for a, b in itertools.pairwise(cuts):
        if b == len(EVERY_TYPE):  # the last append closes the run: follow it first
            reading = asyncio.create_task(ui_stream(client, chat, opened))
            await opened.wait()
        answer = await client.post(
            f"/v1/runs/{run_id}/events?format=ai-sdk&close={b == len(EVERY_TYPE)}",
            content=ndjson(EVERY_TYPE[a:b]), headers={"content-type": "application/x-ndjson"},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
    assert reading is not None
    assert await reading == served_for(EVERY_TYPE, run_id, chat)
    events = (await client.get(f"/v1/runs/{run_id}/events")).json()["events"]
    types = [e["type"] for e in events]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert types.count("TOOL_CALL_START") == 4  # each call started once
    # Every other reader reads the run as an AG-UI one.
    projected = json.dumps((await client.get(f"/v1/runs/{run_id}/messages")).json())
    assert all(text in projected for text in ("Hello world", "Think", '"c1"', "it failed"))
    transcript = await client.get(f"/v1/runs/{run_id}/transcript")
    assert transcript.status_code == 200 and "Hello world" in transcript.text
    export = await client.get(f"/v1/runs/{run_id}/export")
    assert export.status_code == 200 and export.text.count("\n") > len(EVERY_TYPE)


async def test_ui_chunks_in_a_json_body_when_appended_then_mapped_as_ndjson_ones(
    client: httpx.AsyncClient,
) -> None:
    chunks = [{"type": "start"}, {"type": "text-start", "id": "t"},
              {"type": "text-delta", "id": "t", "delta": "hi"}]  # fmt: skip
    answer = await client.post("/v1/runs/ui-json/events?format=ai-sdk", json={"events": chunks})
    assert answer.status_code == 200, answer.text
    assert answer.json()["last_seq"] == 3
    events = (await client.get("/v1/runs/ui-json/events")).json()["events"]
    assert [e["chunk"] for e in events] == [
        {"type": "RUN_STARTED", "threadId": "ui-json", "runId": "ui-json"},
        {"type": "TEXT_MESSAGE_START", "messageId": "t", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "t", "delta": "hi"},
    ]


async def test_part_id_started_again_in_a_later_append_when_mapped_then_a_message_of_its_own(
    client: httpx.AsyncClient,
) -> None:
    step = [{"type": "text-start", "id": "0"}, {"type": "text-delta", "id": "0", "delta": "x"},
            {"type": "text-end", "id": "0"}]  # fmt: skip
    for chunks in ([{"type": "start"}, *step], step, step):
        answer = await client.post(
            "/v1/runs/ui-steps/events?format=ai-sdk", json={"events": chunks}
        )
        assert answer.status_code == 200, answer.text
    events = (await client.get("/v1/runs/ui-steps/events")).json()["events"]
    starts = [e["chunk"]["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START"]
    assert starts == ["0", "0:2", "0:3"]


async def test_append_with_unknown_format_when_posted_then_422_and_no_run(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.post("/v1/runs/ui-unknown/events?format=vercel", json={"events": []})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "unknown_format"
    assert (await client.get("/v1/runs/ui-unknown")).status_code == 404


async def test_ui_batch_with_a_chunk_that_is_no_ui_chunk_when_posted_then_nothing_appended(
    client: httpx.AsyncClient,
) -> None:
    good = [{"type": "start"}, {"type": "text-start", "id": "t"}]
    assert (
        await client.post("/v1/runs/ui-bad/events?format=ai-sdk", json={"events": good})
    ).status_code == 200
    bad = [{"type": "text-delta", "id": "t", "delta": "x"}, {"type": "text-delta", "delta": "y"}]
    answer = await client.post("/v1/runs/ui-bad/events?format=ai-sdk", json={"events": bad})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "invalid_event"
    assert (await client.get("/v1/runs/ui-bad")).json()["last_seq"] == 2
