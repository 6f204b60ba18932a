"""The stream's fixtures: the service in this process with its app (and hub) in reach."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from service.api.app import create_app
from service.config import Settings
from service.stream import Hub
from tests.conftest import settings_for


@dataclass
class Served:
    base_url: str
    app: FastAPI

    @property
    def hub(self) -> Hub:
        hub: Hub = self.app.state.replay.hub
        return hub


@asynccontextmanager
async def serve_app(settings: Settings) -> AsyncIterator[Served]:
    app = create_app(settings, migrate_on_start=False)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("uvicorn stopped before it started")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}", app)
    finally:
        server.should_exit = True
        await task


@pytest.fixture(scope="module")
async def served(database_url: str) -> AsyncIterator[Served]:
    settings = settings_for(database_url, heartbeat_seconds=0.3, stream_recheck_seconds=1.0)
    async with serve_app(settings) as running:
        yield running


@pytest.fixture
async def http(served: Served) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as client:
        yield client
