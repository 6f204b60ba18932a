"""A hosted run whose thread is erased while its agent streams: its follower ends, its
driver stops and lets go of the upstream, and nothing of the run comes back."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.stream.wire import SseReader

DEADLINE = 30.0


async def test_erase_when_hosted_run_streaming_then_follower_ends_upstream_dropped_run_stays_gone(
    http: httpx.AsyncClient, upstream: tuple[str, Any]
) -> None:
    _, app = upstream
    state = app.state.slow
    state["aborted"] = asyncio.Event()
    thread = "th-erase-hosted"
    body = {"threadId": thread, "messages": [{"id": "u1", "role": "user", "content": "hi"}]}
    r = await http.post("/v1/agents/slow/runs", json=body)
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    reader = SseReader()
    async with asyncio.timeout(DEADLINE):
        async with http.stream("GET", f"/v1/runs/{run_id}/stream") as response:
            chunks = response.aiter_bytes()
            while len(reader.events) < 10:
                reader.feed(await anext(chunks))
            erased = await http.delete(f"/v1/threads/{thread}")
            assert erased.status_code == 200, erased.text
            async for data in chunks:  # ends: the run is gone
                reader.feed(data)
        await state["aborted"].wait()
    (tombstone,) = erased.json()["runs"]
    assert (tombstone["run_id"], tombstone["erased_by"]) == (run_id, "open")
    # The follower got a prefix of the run, each event once, and no more than was stored.
    seqs = [int(seq) for seq, _ in reader.events]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) <= tombstone["events"]
    # The stopped driver wrote nothing back: no run, the same tombstone.
    r = await http.get(f"/v1/runs/{run_id}")
    assert (r.status_code, r.json()["error"]["code"]) == (410, "erased")
    listed = (await http.get("/v1/runs", params={"thread_id": thread})).json()
    assert (listed["runs"], listed["erased"]) == ([], [tombstone])
