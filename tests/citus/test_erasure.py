"""Erasure on Citus: refused over HTTP (`409 erasure_unsupported`, docs/scale-out.md), the
thread's runs left whole, through two replicas over the coordinator."""

from __future__ import annotations

import uuid

import httpx

from tests.api.test_erasure import Replicas, _make, http, replicas

__all__ = ["http", "replicas"]


async def test_erase_when_on_citus_then_409_erasure_unsupported_and_runs_left_whole(
    replicas: Replicas, http: httpx.AsyncClient
) -> None:
    thread, run = f"th-{uuid.uuid4().hex[:10]}", f"er-{uuid.uuid4().hex[:10]}"
    await _make(http, replicas.a, thread, run, 9)
    r = await http.delete(f"{replicas.a}/v1/threads/{thread}")
    assert (r.status_code, r.json()["error"]["code"]) == (409, "erasure_unsupported"), r.text
    # Nothing half-applied: the run reads whole on the other replica, its chain intact,
    # and more can be appended to it.
    r = await http.get(f"{replicas.b}/v1/runs/{run}/events")
    assert r.status_code == 200 and len(r.json()["events"]) == 9, r.text
    r = await http.get(f"{replicas.b}/v1/runs/{run}/verify")
    assert r.status_code == 200 and r.json()["ok"] is True, r.text
    r = await http.post(
        f"{replicas.b}/v1/runs/{run}/events",
        json={"events": [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}]},
    )
    assert r.status_code == 200, r.text
