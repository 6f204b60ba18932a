"""Fork as a cheap branch of a run ("retry from here"), on the run API and the stream API."""

from __future__ import annotations

import json

import httpx

from agent_replay.durable.offsets import format_offset

CHUNKS = [
    {"type": "RUN_STARTED", "threadId": "t-fork", "runId": "fork-src"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Keep "},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "this, not that"},
]


async def test_fork_when_run_forked_at_seq_then_prefix_shared_and_branch_goes_its_own_way(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/v1/runs/fork-src/events", json={"events": CHUNKS})
    fork = await client.post("/v1/runs/fork-src/fork", json={"run_id": "fork-b", "at_seq": 3})
    assert fork.status_code == 201
    body = fork.json()
    assert (body["forked_from"], body["fork_seq"], body["last_seq"]) == ("fork-src", 3, 3)
    assert body["thread_id"] == "t-fork"
    again = await client.post("/v1/runs/fork-src/fork", json={"run_id": "fork-b", "at_seq": 3})
    assert again.status_code == 200

    retry = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "but this."}
    appended = await client.post("/v1/runs/fork-b/events", json={"events": [retry]})
    assert appended.json()["first_seq"] == 4

    events = (await client.get("/v1/runs/fork-b/events")).json()["events"]
    assert [e["chunk"] for e in events] == [*CHUNKS[:3], retry]
    later = (await client.get("/v1/runs/fork-b/events", params={"after": 1})).json()["events"]
    assert [e["seq"] for e in later] == [2, 3, 4]
    typed = await client.get("/v1/runs/fork-b/events", params={"type": "TEXT_MESSAGE_CONTENT"})
    assert [e["seq"] for e in typed.json()["events"]] == [3, 4]
    messages = (await client.get("/v1/runs/fork-b/messages")).json()["messages"]
    assert messages[0]["parts"] == [{"type": "text", "content": "Keep but this."}]
    # The source is untouched.
    source = (await client.get("/v1/runs/fork-src/events")).json()["events"]
    assert [e["chunk"] for e in source] == CHUNKS

    # Its export is a whole run: the shared prefix, then its own events.
    export = (await client.get("/v1/runs/fork-b/export")).text.splitlines()
    exported = [json.loads(line) for line in export[1:]]
    assert [(e["seq"], e["chunk"]) for e in exported] == list(
        enumerate([*CHUNKS[:3], retry], start=1)
    )

    # The same fork through the stream API, the run's SSE replay included.
    read = await client.get("/v1/stream/fork-b", params={"offset": format_offset(1)})
    assert read.json() == [*CHUNKS[1:3], retry]
    await client.post("/v1/runs/fork-b/close", headers={"Content-Type": "application/json"})
    async with client.stream("GET", "/v1/runs/fork-b/stream") as sse:
        ids = [line for line in [x async for x in sse.aiter_lines()] if line.startswith("id:")]
    assert ids == ["id: 1", "id: 2", "id: 3", "id: 4"]


async def test_fork_when_at_seq_beyond_last_event_then_409_and_nothing_created(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/v1/runs/fork-short/events", json={"events": CHUNKS[:2]})
    refused = await client.post("/v1/runs/fork-short/fork", json={"run_id": "fork-x", "at_seq": 5})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "offset_out_of_range"
    assert (await client.get("/v1/runs/fork-x")).status_code == 404
    missing = await client.post("/v1/runs/no-such-run/fork", json={"run_id": "fork-y"})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "run_not_found"
