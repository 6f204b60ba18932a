"""Settings, read once from `REPLAY_*` environment variables.

Every knob the service has lives here, so the README's configuration table and
this class can be read side by side.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def asyncpg_dsn(url: str) -> str:
    """The URL in the spelling asyncpg accepts (`postgresql://`)."""
    for prefix in ("postgresql+asyncpg://", "postgres+asyncpg://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    return url


def sqlalchemy_url(url: str) -> str:
    """The URL in the spelling SQLAlchemy's async engine needs (`postgresql+asyncpg://`)."""
    return "postgresql+asyncpg://" + asyncpg_dsn(url)[len("postgresql://") :]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="REPLAY_", extra="ignore")

    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL; unset means an embedded PostgreSQL in data_dir.",
    )
    read_database_url: str | None = Field(
        default=None,
        description="A hot standby of database_url for catch-up reads, audit lists and exports.",
    )
    # Connections to the standby (default: pool_size).
    read_pool_size: int | None = None
    data_dir: Path = Field(default=Path(".replay"), description="Embedded PostgreSQL's home.")
    api_keys: str = Field(
        default="",
        description="Comma-separated SECRET or SECRET:SCOPE[+SCOPE]; a bare secret is admin; "
        "empty = open.",
    )
    # Signs tokens (POST /v1/tokens). Unset: a random secret kept in the database.
    token_secret: str | None = None
    # Comma-separated secrets still accepted while tokens signed with them live.
    token_secret_previous: str = ""
    # A token's lifetime when POST /v1/tokens names none.
    token_ttl_seconds: int = Field(default=900, ge=1, le=86_400)
    # Comma-separated origins allowed to call from a browser (`*`: any); empty = no CORS.
    cors_origins: str = ""
    max_chunk_bytes: int = 1 << 20
    max_batch_bytes: int = 8 << 20
    max_batch_events: int = 10_000
    max_body_bytes: int = Field(
        default=1 << 20,
        ge=1,
        description="The largest request body of every route but the append route and "
        "Durable Streams (those take max_batch_bytes): run inputs, chat messages, metadata. "
        "Over it: 413, judged on Content-Length before any byte is read.",
    )
    max_metadata_bytes: int = Field(
        default=64 << 10,
        ge=2,
        description="The largest metadata of a run (PUT /v1/runs/{run_id}), as JSON text: "
        "every listing of runs carries it.",
    )
    pool_size: int = 10
    # Concurrent group-commit transactions per process. More than one lets a
    # commit's fsync overlap the next group's insert.
    commit_lanes: int = 4
    # While a group commits, the next lane waits this long before joining it (unless
    # a whole group is queued): a trickle of appends goes in fewer, larger groups.
    commit_overlap_seconds: float = Field(default=0.05, ge=0)
    # After a group of several runs' appends, the next group starts no sooner than
    # this after it started (unless a whole group is queued): many producers at once
    # commit in fewer, larger groups, at up to this much more latency.
    commit_pace_seconds: float = Field(default=0.002, ge=0, le=1)
    # Upper bound on one group commit, so one huge group cannot starve latency.
    group_max_events: int = 1000
    # An append bringing a run at least this many chunks stores them in batch rows
    # (service.log.rows); 0: a row per event always.
    batch_min_events: int = 4  # service.log.rows.BATCH_MIN
    # A comment line at least this often on an idle stream (sse-starlette's ping).
    heartbeat_seconds: float = 15.0
    # A stream whose client takes longer than this to accept one write is cut
    # (sse-starlette's send_timeout); the client resumes with Last-Event-ID.
    stream_send_timeout_seconds: float = 30.0
    # How often every followed run's last_seq is re-read, in case a
    # notification was missed (fast polling takes over while LISTEN is down).
    stream_recheck_seconds: float = 5.0
    stream_page_size: int = 1000
    # The per-run buffer of recent pages shared by a process's followers; a
    # follower that falls behind it reads the log instead.
    stream_buffer_events: int = 4096
    stream_buffer_bytes: int = 8 << 20
    # The SSE `retry:` hint (ms) for browsers' EventSource.
    stream_retry_ms: int = 1000
    # The longest an append waits for its commit before answering 503 (the database
    # stopped answering); each new connection and each statement have their own bounds,
    # so a database that hangs (no FIN, no answer) holds no connection for long.
    append_timeout_seconds: float = 4.5
    db_connect_timeout_seconds: float = 3.0
    db_statement_timeout_seconds: float = 30.0
    # SIGTERM: stop accepting, end streams (clients resume elsewhere), finish the
    # appends in flight, close hosted runs; whatever is left after this long is cut.
    shutdown_grace_seconds: float = 20.0
    # `replay serve`'s processes on one port (uvicorn workers): each its own event
    # loop, pool and hub, as replicas are (notifications join them). 1: one process.
    workers: int = Field(default=1, ge=1, le=64)
    lease_seconds: float = 30.0
    # Hosted runs (service.agents).
    agents: str | None = Field(default=None, description="JSON {name: url | {url, headers}}")
    # A stable name for this process (pod, unit): on restart it closes the runs
    # its earlier life was driving at once, instead of waiting for their leases.
    instance_id: str | None = None
    upstream_idle_seconds: float = 300.0
    # Disconnect policies: how long a `cancel` run nobody has followed yet waits
    # for its first reader (its starter must have time to attach).
    first_reader_seconds: float = Field(default=10.0, ge=0, le=86_400, allow_inf_nan=False)
    # Durable Streams (service.durable): how long a long-poll waits before its
    # 204, how long an SSE response lives before the client reconnects
    # (PROTOCOL.md asks for about a minute), and one catch-up response's size.
    durable_long_poll_seconds: float = 20.0
    # How long a long-poll's channel stays after the poll is answered, buffering
    # what is committed meanwhile for the follower's next poll (0: not at all).
    durable_poll_linger_seconds: float = Field(default=2.0, ge=0)
    durable_sse_seconds: float = 60.0
    durable_read_max_messages: int = 10_000
    durable_read_max_bytes: int = 4 << 20
    # How often expired streams are deleted with their runs (0: never; they still
    # answer 404), and the sweep's pace in events a second (0: unpaced), so the
    # deletes' WAL and I/O stay small beside the appends' commits.
    durable_sweep_seconds: float = 60.0
    durable_sweep_max_rate: float = 20_000.0
    # Slow enough that a person can close the tab mid-answer (an answer takes 9 s or more).
    demo_delay_seconds: float = 0.35
    # Operations: log lines as text or JSON; one access line per request; /metrics open.
    log_format: Literal["text", "json"] = "text"
    access_log: bool = True
    metrics_public: bool = False

    @cached_property
    def previous_token_secrets(self) -> list[str]:
        return [s.strip() for s in self.token_secret_previous.split(",") if s.strip()]

    @cached_property
    def cors_origin_list(self) -> list[str]:
        return [o.strip().rstrip("/") for o in self.cors_origins.split(",") if o.strip()]
