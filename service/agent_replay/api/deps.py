"""Typed dependencies: what a route may ask the app for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from agent_replay.agents import Drivers
from agent_replay.api.auth import Gate
from agent_replay.config import Settings
from agent_replay.durable.protocol import Streams
from agent_replay.ingest import Holds, Limits, Rules
from agent_replay.log import LogStore
from agent_replay.stream import Hub


@dataclass
class AppState:
    """Everything the lifespan owns, yielded once and typed."""

    settings: Settings
    # The log, every read and write of the database included (a hot standby, if
    # configured, is the log's to use).
    log: LogStore
    # This process's LISTEN connection and per-run fan-out (agent_replay.stream).
    hub: Hub
    # The hosted runs this process drives, and its lease reaper.
    drivers: Drivers
    # The Durable Streams protocol over the same log (agent_replay.durable).
    durable: Streams
    # API keys and the token signer (agent_replay.api.auth).
    gate: Gate
    # REPLAY_REDACT's rules, compiled (None: nothing to redact on pushed appends).
    redact: Rules | None = field(default=None)
    # The holds this process's redacted appends left (agent_replay.ingest.held).
    holds: Holds = field(default_factory=Holds)

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


StateDep = Annotated[AppState, Depends(_state)]
LogDep = Annotated[LogStore, Depends(_log)]


async def _drivers(request: Request) -> Drivers:
    return state_of(request).drivers


DriversDep = Annotated[Drivers, Depends(_drivers)]
