"""The HTTP edge: `create_app()` wires settings, the log and the routers.

The lifespan owns every long-lived resource (the embedded database when no
URL is configured, the connection pool, the group committer, the stream hub's
LISTEN connection) and yields them as one typed `AppState`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.routing import Route

from agent_replay import ingest, metrics, migrate, tracing
from agent_replay.access import KeyRing
from agent_replay.agents import Drivers, load_catalog
from agent_replay.agents.catalog import HttpAgent
from agent_replay.agents.demo import demo_agent
from agent_replay.api import (
    ag_ui,
    agents,
    ai_sdk,
    audit,
    chat,
    demo_page,
    docs,
    durable,
    erasure,
    health,
    inspect_page,
    runs,
    stream,
    threads,
    tokens,
)
from agent_replay.api import metrics as metrics_route
from agent_replay.api.access import AccessLog
from agent_replay.api.auth import Gate, document_access
from agent_replay.api.deps import AppState
from agent_replay.api.drain import Drain
from agent_replay.api.edge import Cors, HostGuard, OriginGuard, QueryToken
from agent_replay.api.hot import ReplayApp
from agent_replay.api.responses import (
    JSON,
    on_http_error,
    on_replay_error,
    on_unexpected_error,
    on_validation_error,
)
from agent_replay.config import Settings
from agent_replay.durable.protocol import Limits as DurableLimits
from agent_replay.durable.protocol import Streams
from agent_replay.durable.sweeper import Sweeper
from agent_replay.embedded import embedded_postgres
from agent_replay.errors import ReplayError
from agent_replay.log import Administration, EventLog, PoolStats
from agent_replay.log.streams import StreamStore
from agent_replay.stream import Hub, Limits
from agent_replay.stream.presence import Presence
from agent_replay.workers import worker_settings

log = logging.getLogger("replay")


def worker_app() -> FastAPI:
    """The app of one `agent-replay serve --workers N` process (uvicorn's factory): its parent
    settled the database (`agent_replay.cli`), so it only connects."""
    return create_app(worker_settings(), migrate_on_start=False)


def create_app(
    settings: Settings | None = None, *, migrate_on_start: bool | None = None
) -> FastAPI:
    settings = settings or Settings()
    # A malformed key list or token secret fails here, at start.
    gate = Gate(KeyRing(settings.api_keys), settings.token_secret, settings.previous_token_secrets)
    # So does a malformed REPLAY_AGENTS (the message names the agent); CORS below needs
    # the headers its agents forward.
    window = settings.redact_max_window
    catalog = load_catalog(
        settings.agents,
        {"demo": demo_agent(settings.demo_delay_seconds)},
        redact_max_window=window,
    )
    forwarded = sorted(
        {name for agent in catalog.agents.values() if isinstance(agent, HttpAgent)
         for name in agent.forward.sources}
    )  # fmt: skip

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if stop_tracing is not None:
                # First in, last out: spans of the shutdown itself are flushed too.
                stack.callback(stop_tracing)
            url = settings.database_url
            auto_migrate = migrate_on_start
            if url is None:
                url = stack.enter_context(embedded_postgres(settings.data_dir))
                auto_migrate = True if auto_migrate is None else auto_migrate
            if auto_migrate:
                await asyncio.to_thread(migrate.upgrade, url)
            event_log = await EventLog.open(
                url,
                pool_size=settings.pool_size,
                commit_lanes=settings.commit_lanes,
                commit_overlap_seconds=settings.commit_overlap_seconds,
                commit_pace_seconds=settings.commit_pace_seconds,
                group_max_events=settings.group_max_events,
                answer_seconds=settings.append_timeout_seconds,
                connect_seconds=settings.db_connect_timeout_seconds,
                statement_seconds=settings.db_statement_timeout_seconds,
                read_url=settings.read_database_url,
                read_pool_size=settings.read_pool_size,
                batch_min=settings.batch_min_events or None,
            )
            stack.push_async_callback(event_log.close)
            hub = Hub(
                event_log,
                limits=Limits(
                    page_size=settings.stream_page_size,
                    buffer_events=settings.stream_buffer_events,
                    buffer_bytes=settings.stream_buffer_bytes,
                ),
                recheck_seconds=settings.stream_recheck_seconds,
                # Readers counted in the log for disconnect policies; a row is
                # fresh for a lease's length, as a driver is alive for one.
                presence=Presence(event_log, fresh_seconds=settings.lease_seconds),
            )
            await hub.start()
            # Appends committed by this process reach its followers directly, rows
            # and all (no read back), for the runs someone here follows; NOTIFY covers
            # every other process (this one's listener drops its own).
            stack.callback(event_log.on_commit_rows(hub.committed, hub.follows))
            # Pushed after the log, so it stops first: readers before their pool.
            stack.push_async_callback(hub.stop)
            # REPLAY_REDACT: every run's rules; an agent's and a run's only add to them.
            service_rules = ingest.parse_rules(settings.redact, "REPLAY_REDACT", window)
            drivers = Drivers(
                event_log,
                catalog,
                redact=service_rules,
                redact_max_window=window,
                lease_seconds=settings.lease_seconds,
                idle_seconds=settings.upstream_idle_seconds,
                first_reader_seconds=settings.first_reader_seconds,
                instance_id=settings.instance_id,
                limits=ingest.Limits(
                    settings.max_chunk_bytes, settings.max_batch_bytes, settings.max_batch_events
                ),
            )
            await drivers.start_reaper()
            # A run closed anywhere (cancelled on another replica) stops its driver here.
            hub.on_close(drivers.closed_elsewhere)
            # A run whose last reader left anywhere has its disconnect policy judged now.
            hub.on_readers_left(drivers.readers_left)
            # Stops before the hub and the log: drivers still append as they end.
            stack.push_async_callback(drivers.close)
            # SIGTERM drains first (agent_replay.api.drain); a drain under way stops first.
            drain = Drain(drivers, hub, settings.drain_seconds)
            stack.callback(drain.install())
            stack.push_async_callback(drain.stop)
            for stop_sampling in _gauges(event_log, hub, drivers):
                stack.callback(stop_sampling)
            stream_store = StreamStore(event_log)
            sweeper = Sweeper(
                stream_store,
                interval_seconds=settings.durable_sweep_seconds,
                max_rate=settings.durable_sweep_max_rate or None,
            )
            sweeper.start()
            stack.push_async_callback(sweeper.stop)
            streams = Streams(
                stream_store,
                hub,
                DurableLimits(
                    max_body_bytes=settings.max_batch_bytes,
                    max_messages=settings.max_batch_events,
                    read_max_messages=settings.durable_read_max_messages,
                    read_max_bytes=settings.durable_read_max_bytes,
                    long_poll_seconds=settings.durable_long_poll_seconds,
                    poll_linger_seconds=settings.durable_poll_linger_seconds,
                    sse_seconds=settings.durable_sse_seconds,
                    heartbeat_seconds=settings.heartbeat_seconds,
                    private=not gate.keys.open,
                ),
            )
            streams.redact = ingest.Rules(service_rules) if service_rules else None
            # Before the log's pool closes: pages still being read ahead.
            stack.push_async_callback(streams.close)
            app.state.replay = AppState(
                settings=settings,
                log=event_log,
                hub=hub,
                drivers=drivers,
                durable=streams,
                gate=gate.bind(event_log),
                redact=streams.redact,
            )
            # Startup's objects (modules, routes, settings) never die: keep the
            # collector from walking them again on every full collection.
            gc.collect()
            gc.freeze()
            yield

    app = ReplayApp(
        title="agent-replay",
        summary="Durable event logs for AI agent runs: append, replay, project.",
        version="0.1.0",
        lifespan=lifespan,
        default_response_class=JSON,
        docs_url=None,  # docs.install: the same pages, with their assets served from here
        redoc_url=None,
    )
    docs.install(app)
    app.add_exception_handler(ReplayError, on_replay_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(Exception, on_unexpected_error)
    # The hot append route, a plain Starlette endpoint (see runs.append_events),
    # first in line; its OpenAPI entry is added to the document FastAPI builds.
    append_route = Route("/v1/runs/{run_id}/events", runs.append_events, methods=["POST"])
    app.router.routes.insert(0, append_route)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            runs.document_append(FastAPI.openapi(app))
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    # Durable Streams: every method on one endpoint, outside FastAPI's routing
    # (names hold `/`; HEAD, OPTIONS and bodies of any type are the protocol's).
    stream_route = Route(
        "/v1/stream/{name:path}",
        durable.stream_endpoint,
        methods=["GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS"],
    )
    app.router.routes.insert(0, stream_route)
    # Inside CORS, so a listed origin can read these refusals too.
    if gate.keys.open:
        app.add_middleware(HostGuard, allowed=settings.allowed_host_list)
    app.add_middleware(OriginGuard, origins=settings.cors_origin_list)
    if settings.cors_origin_list:
        # Inside the access log (preflights are logged), outside every route and error.
        app.add_middleware(Cors, origins=settings.cors_origin_list, forwarded=forwarded)
    app.add_middleware(AccessLog, routes=app.router.routes, log_requests=settings.access_log)
    stop_tracing = tracing.instrument(app)
    if stop_tracing is None:
        # Traced requests need the full stack, where the instrumentation sits.
        app.hot_routes = (append_route, stream_route)
    app.include_router(health.router)
    app.include_router(metrics_route.router)
    app.include_router(demo_page.router)
    app.include_router(inspect_page.router)
    # Every route below declares its access rule (agent_replay.api.auth).
    # Before runs.router: its /v1/runs/{run_id} must not shadow /v1/runs.
    app.include_router(audit.router)
    app.include_router(runs.router)
    app.include_router(stream.router)
    app.include_router(threads.router)
    app.include_router(erasure.router)
    app.include_router(agents.router)
    app.include_router(chat.router)
    app.include_router(ai_sdk.router)
    app.include_router(ag_ui.router)
    app.include_router(tokens.router)
    document_access(app)
    # Outermost: the access log and everything else see the URL without ?token=.
    app.add_middleware(QueryToken)
    return app


def _gauges(event_log: Administration, hub: Hub, drivers: Drivers) -> list[Callable[[], None]]:
    """Register this app's gauges with the metrics registry; returns their removers."""
    return [
        metrics.sample("replay_stream_followers", lambda: hub.stats().subscribers),
        metrics.sample("replay_stream_runs_followed", lambda: hub.stats().channels),
        metrics.sample("replay_stream_thread_followers", lambda: hub.stats().thread_followers),
        metrics.sample("replay_stream_reads", lambda: hub.stats().reads, by="channel"),
        metrics.sample("replay_stream_reads", lambda: hub.stats().follower_reads, by="follower"),
        metrics.sample("replay_hosted_runs", lambda: len(drivers.active)),
        metrics.sample("replay_listen_connected", lambda: float(hub.listening)),
        *_pool_gauges("log", event_log.pool_stats),
        *_optional_pool_gauges(event_log),
    ]


def _optional_pool_gauges(event_log: Administration) -> list[Callable[[], None]]:
    """The gauges of the log's pools that it may not have: a standby's, the lanes' own."""
    optional = (("replica", event_log.replica_pool_stats), ("commit", event_log.commit_pool_stats))
    return [
        remover
        for label, stats in optional
        if stats() is not None
        for remover in _pool_gauges(label, stats)
    ]


def _pool_gauges(label: str, stats: Callable[[], PoolStats | None]) -> list[Callable[[], None]]:
    """A pool's three gauges, read from `stats()` at scrape time; returns their removers."""

    def read(field: str) -> Callable[[], float]:
        return lambda: getattr(stats(), field, 0)

    return [
        metrics.sample("replay_db_pool_in_use", read("in_use"), pool=label),
        metrics.sample("replay_db_pool_size", read("size"), pool=label),
        metrics.sample("replay_db_pool_max_size", read("max_size"), pool=label),
    ]
