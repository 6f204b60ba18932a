"""Text PostgreSQL refuses (NUL, lone surrogates) in what a chunk or a request names.

A chunk keeps such text byte for byte (as JSON escapes). The columns derived
from it (type, ids, the run's thread) and the filters that query them map it to
U+FFFD alike, so nothing valid fails a group commit and a lookup still matches.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from agent_replay.log import EventLog

RAW = [
    '{"type":"RUN_STARTED","threadId":"t\\u0000x","runId":"odd-1"}',
    '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m\\u0000","delta":"a"}',
    '{"type":"TOOL_CALL_ARGS","toolCallId":"half \\ud83d","delta":"{}"}',
    '{"type":"A\\u0000B"}',
    '{"type":"\\udc00"}',
]


async def test_append_when_type_ids_and_thread_unstorable_then_chunks_kept_and_columns_mapped(
    event_log: EventLog,
) -> None:
    chunks = [json.loads(text) for text in RAW]
    odd, neighbour = await asyncio.gather(
        event_log.append("odd-1", chunks), event_log.append("odd-2", [{"type": "A"}])
    )
    assert (odd.last_seq, neighbour.last_seq) == (5, 1)
    stored = await event_log.read_events("odd-1", 0, 10)
    assert [json.loads(e.chunk) for e in stored] == chunks
    assert [e.type for e in stored] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_CONTENT",
        "TOOL_CALL_ARGS",
        "A\ufffdB",
        "\ufffd",
    ]
    # The id columns are kept on rows of one event (a batch row keeps none): one by one.
    for chunk in chunks[1:3]:
        await event_log.append("odd-1-ids", [chunk])
    async with event_log.pool.acquire() as conn:
        ids = await conn.fetch(
            "SELECT message_id, tool_call_id FROM events WHERE run_id = 'odd-1-ids' ORDER BY seq"
        )
    assert [tuple(row) for row in ids] == [("m\ufffd", None), (None, "half \ufffd")]
    assert (await event_log.get_run("odd-1")).thread_id == "t\ufffdx"


async def test_queries_when_filters_hold_nul_then_they_match_and_never_fail(
    client: httpx.AsyncClient, event_log: EventLog
) -> None:
    await event_log.create_run("odd-3", thread_id="q\u0000", agent="a\u0000")
    await event_log.append("odd-3", [{"type": "TOOL_CALL_START", "toolCallId": "c",
                                      "toolCallName": "look\u0000up"}])  # fmt: skip
    for params in ({"thread_id": "q\u0000"}, {"agent": "a\u0000"}, {"tool": "look\u0000up"}):
        r = await client.get("/v1/runs", params=params)
        assert r.status_code == 200, r.text
        assert [run["run_id"] for run in r.json()["runs"]] == ["odd-3"], params
    r = await client.get("/v1/threads/q%00/messages")
    assert r.status_code == 200, r.text
    r = await client.get("/v1/runs/odd-3/events", params={"type": "\u0000"})
    assert (r.status_code, r.json()["events"]) == (200, [])
    r = await client.put("/v1/runs/odd-4", json={"thread_id": "q\u0000"})
    assert (r.status_code, r.json()["thread_id"]) == (201, "q\ufffd")
    r = await client.put("/v1/runs/odd-5", json={"metadata": {"k": "\u0000"}})
    assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_request")
