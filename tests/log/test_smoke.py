from __future__ import annotations

import httpx

from service.log import EventLog


async def test_append_then_read_back_in_seq_order(event_log: EventLog) -> None:
    result = await event_log.append("smoke-1", [{"type": "A"}, {"type": "B"}])
    assert (result.first_seq, result.last_seq) == (1, 2)
    assert [e.type for e in await event_log.read_events("smoke-1")] == ["A", "B"]


async def test_http_append_over_socket_then_run_shows_last_seq(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/runs/smoke-2/events", json={"events": [{"type": "A"}]})
    assert r.status_code == 200, r.text
    assert r.json() == {"run_id": "smoke-2", "first_seq": 1, "last_seq": 1}
    assert (await client.get("/v1/runs/smoke-2")).json()["last_seq"] == 1
