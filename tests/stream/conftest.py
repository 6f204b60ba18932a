"""The stream's fixtures: the service in this process with its app (and hub) in reach."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from agent_replay.api.app import create_app
from agent_replay.config import Settings
from agent_replay.stream import Hub
from tests.conftest import settings_for
from tests.support.servers import serve_asgi


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
    """The service on loopback, with its app (and so its hub) in reach."""
    app = create_app(settings, migrate_on_start=False)
    async with serve_asgi(app) as base_url:
        yield Served(base_url, app)


@pytest.fixture(scope="module")
async def served(database_url: str) -> AsyncIterator[Served]:
    settings = settings_for(database_url, heartbeat_seconds=0.3, stream_recheck_seconds=1.0)
    async with serve_app(settings) as running:
        yield running


@pytest.fixture
async def http(served: Served) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as client:
        yield client


async def wait_for(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    """Poll a condition on the server's state (no event exists for it), with a deadline."""
    try:
        async with asyncio.timeout(seconds):
            while not condition():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"not within {seconds} s: {what}") from None
