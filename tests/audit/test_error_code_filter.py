"""GET /v1/runs?error_code=: the code a run's last RUN_ERROR gave, as the run keeps it."""

from __future__ import annotations

import httpx


async def _ids(client: httpx.AsyncClient, **params: str) -> list[str]:
    r = await client.get("/v1/runs", params=params)
    assert r.status_code == 200, r.text
    return [run["run_id"] for run in r.json()["runs"]]


async def test_list_runs_when_code_longer_than_kept_or_unstorable_then_found_by_the_code_sent(
    client: httpx.AsyncClient,
) -> None:
    long, odd = "c" * 300, "a\u0000b"
    for run_id, code in (("ec-long", long), ("ec-odd", odd), ("ec-other", "other")):
        r = await client.post(
            f"/v1/runs/{run_id}/events",
            json={"events": [{"type": "RUN_ERROR", "message": "m", "code": code}], "close": True},
        )
        assert r.status_code == 200, r.text
    # The column keeps a cut, storable code; the filter maps what it is given the same way.
    assert await _ids(client, error_code=long) == ["ec-long"]
    assert await _ids(client, error_code=odd) == ["ec-odd"]
    summary = (await client.get("/v1/runs/ec-long")).json()
    assert summary["error_code"] == "c" * 200
    assert await _ids(client, error_code="c" * 199) == []
