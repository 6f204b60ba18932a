"""Fixtures for hosted runs: upstream agents on loopback and a service configured with them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.agents.upstreams import upstream_app
from tests.conftest import settings_for
from tests.stream.wire import SseReader
from tests.support.servers import Running, free_port, serve_asgi, serve_in_process


@pytest.fixture(scope="module")
async def upstream() -> AsyncIterator[tuple[str, Any]]:
    app = upstream_app()
    async with serve_asgi(app) as base:
        yield base, app


@pytest.fixture(scope="module")
async def hosted(database_url: str, upstream: tuple[str, Any]) -> AsyncIterator[Running]:
    base, _ = upstream
    agents = {
        name: f"{base}/{name}"
        for name in (
            "pydantic",
            "drops",
            "invalid-json",
            "no-terminal",
            "stalls",
            "slow",
            "http-error",
            "oversized",
            "too-deep",
        )
    }
    agents["refused"] = f"http://127.0.0.1:{free_port()}/nothing-listens-here"
    agents["broken-python"] = "python:tests.agents.pyagents:broken"
    agents["oversized-python"] = "python:tests.agents.pyagents:oversized"
    agents["endless-python"] = "python:tests.agents.pyagents:endless"
    settings = settings_for(
        database_url,
        agents=json.dumps(agents),
        upstream_idle_seconds=1.0,
        demo_delay_seconds=0.002,
        heartbeat_seconds=0.5,
    )
    async with serve_in_process(settings) as running:
        yield running


@pytest.fixture
async def http(hosted: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=hosted.base_url, timeout=30) as client:
        yield client


async def follow(http: httpx.AsyncClient, run_id: str, **params: str) -> list[dict[str, Any]]:
    """The run's events, read from its stream until the service ends it (the run closed)."""
    reader = SseReader()
    async with http.stream("GET", f"/v1/runs/{run_id}/stream", params=params) as response:
        assert response.status_code == 200, await response.aread()
        async for data in response.aiter_bytes():
            reader.feed(data)
    assert [seq for seq, _ in reader.events] == list(range(1, len(reader.events) + 1))
    return [json.loads(text) for _, text in reader.events]
