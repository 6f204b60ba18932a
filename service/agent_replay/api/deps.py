"""Typed dependencies: what a route may ask the app for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine

from agent_replay.agents import Drivers
from agent_replay.api.auth import Gate
from agent_replay.config import Settings
from agent_replay.durable.protocol import Streams
from agent_replay.ingest import Limits
from agent_replay.log import LogStore
from agent_replay.stream import Hub


@dataclass
class AppState:
    """Everything the lifespan owns, yielded once and typed."""

    settings: Settings
    log: LogStore
    database_url: str
    # SQLAlchemy Core engine for the audit's filtered queries (agent_replay.audit).
    engine: AsyncEngine
    # The same on the hot standby (REPLAY_READ_DATABASE_URL), if any.
    read_engine: AsyncEngine | None
    # This process's LISTEN connection and per-run fan-out (agent_replay.stream).
    hub: Hub
    # The hosted runs this process drives, and its lease reaper.
    drivers: Drivers
    # The Durable Streams protocol over the same log (agent_replay.durable).
    durable: Streams
    # API keys and the token signer (agent_replay.api.auth).
    gate: Gate

    @property
    def limits(self) -> Limits:
        s = self.settings
        return Limits(s.max_chunk_bytes, s.max_batch_bytes, s.max_batch_events)


# Dependencies are `async def` on purpose: FastAPI runs a plain `def`
# dependency in a worker thread, a thread hop per request on the append path.


def state_of(request: Request) -> AppState:
    state: AppState = request.app.state.replay
    return state


async def _state(request: Request) -> AppState:
    return state_of(request)


async def _log(request: Request) -> LogStore:
    return state_of(request).log


async def _engine(request: Request) -> AsyncEngine:
    return state_of(request).engine


StateDep = Annotated[AppState, Depends(_state)]
LogDep = Annotated[LogStore, Depends(_log)]
EngineDep = Annotated[AsyncEngine, Depends(_engine)]


async def _read_engine(request: Request) -> AsyncEngine:
    """The standby's engine for reads that may lag (run listings), else the primary's."""
    state = state_of(request)
    return state.read_engine or state.engine


ReadEngineDep = Annotated[AsyncEngine, Depends(_read_engine)]


async def _drivers(request: Request) -> Drivers:
    return state_of(request).drivers


DriversDep = Annotated[Drivers, Depends(_drivers)]
