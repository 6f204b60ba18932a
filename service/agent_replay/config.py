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
    read_pool_size: int | None = Field(
        default=None,
        description="Connections to the standby per process (unset: pool_size).",
    )
    data_dir: Path = Field(default=Path(".replay"), description="Embedded PostgreSQL's home.")
    api_keys: str = Field(
        default="",
        description="Comma-separated SECRET or SECRET:SCOPE[+SCOPE]; a bare secret is "
        "admin; empty = open.",
    )
    # Signs tokens (POST /v1/tokens). Unset: a random secret kept in the database.
    token_secret: str | None = Field(
        default=None,
        description="Signs tokens (HS256, at least 32 bytes); set the same value on every "
        "replica, or leave it unset and they share one random secret kept in "
        "the database.",
    )
    # Comma-separated secrets still accepted while tokens signed with them live.
    token_secret_previous: str = Field(
        default="",
        description="Comma-separated secrets still accepted, for a rotation's grace period:"
        " keep the old one here for the longest token lifetime.",
    )
    # A token's lifetime when POST /v1/tokens names none.
    token_ttl_seconds: int = Field(
        default=900,
        ge=1,
        le=86_400,
        description="A token's lifetime when POST /v1/tokens names no ttl_seconds.",
    )
    # Comma-separated origins allowed to call from a browser (`*`: any); empty = no CORS.
    cors_origins: str = Field(
        default="",
        description="Comma-separated origins (`https://app.example.com`; `*` for any) whose"
        " pages may call the service from a browser; empty: no CORS headers.",
    )
    allowed_hosts: str = Field(
        default="",
        description="Open mode (no api_keys) only: comma-separated Host names, besides "
        "localhost, 127.0.0.1 and [::1], that requests may name (`*`: any). "
        "Others are refused, so a page on a name rebound to this address (DNS "
        "rebinding) gets nothing.",
    )
    max_chunk_bytes: int = Field(
        default=1 << 20,
        description="The largest chunk accepted (413 payload_too_large above).",
    )
    max_batch_bytes: int = Field(
        default=8 << 20,
        description="The largest append body.",
    )
    max_batch_events: int = Field(
        default=10_000,
        description="The most chunks in one append.",
    )
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
    pool_size: int = Field(
        default=10,
        description="Database connections per process, besides the commit lanes' own (at "
        "most one per lane, and one more).",
    )
    # Concurrent group-commit transactions per process. More than one lets a
    # commit's fsync overlap the next group's insert.
    commit_lanes: int = Field(
        default=4,
        description="Group commits in flight at once per process: more than one lets a "
        "commit's fsync overlap the next group's insert.",
    )
    # While a group commits, the next lane waits this long before joining it (unless
    # a whole group is queued): a trickle of appends goes in fewer, larger groups.
    commit_overlap_seconds: float = Field(
        default=0.05,
        ge=0,
        description="While a group commits, how long the next lane waits before committing "
        "beside it (at once when a whole group is queued); what arrives "
        "meanwhile joins the next group. 0: lanes commit side by side at once.",
    )
    # After a group of several runs' appends, the next group starts no sooner than
    # this after it started (unless a whole group is queued): many producers at once
    # commit in fewer, larger groups, at up to this much more latency.
    commit_pace_seconds: float = Field(
        default=0.002,
        ge=0,
        le=1,
        description="After a group commit holding several runs' appends, how soon the next "
        "may start (at once when a whole group is queued, or every run of that "
        "group has queued its next append): many producers commit in fewer, "
        "larger groups, at up to this much more latency; a lone producer is "
        "never paced. 0: off.",
    )
    # Upper bound on one group commit, so one huge group cannot starve latency.
    group_max_events: int = Field(
        default=1000,
        description="The most events one group commit takes (a bigger batch still goes "
        "whole); smaller groups let lanes commit in parallel.",
    )
    # An append bringing a run at least this many chunks stores them in batch rows
    # (agent_replay.log.rows); 0: a row per event always.
    batch_min_events: int = Field(
        default=4,
        description="An append bringing a run at least this many chunks stores them in "
        "batch rows of up to 256 events; 0: a row per event always.",
    )  # agent_replay.log.rows.BATCH_MIN
    # A comment line at least this often on an idle stream (sse-starlette's ping).
    heartbeat_seconds: float = Field(
        default=15.0,
        description="An SSE comment line (a Durable Streams control event) after this long "
        "without an event.",
    )
    # A stream whose client takes longer than this to accept one write is cut
    # (sse-starlette's send_timeout); the client resumes with Last-Event-ID.
    stream_send_timeout_seconds: float = Field(
        default=30.0,
        description="A client that takes no bytes for this long is dropped; it resumes with"
        " Last-Event-ID.",
    )
    # How often every followed run's last_seq is re-read, in case a
    # notification was missed (fast polling takes over while LISTEN is down).
    stream_recheck_seconds: float = Field(
        default=5.0,
        description="How often every followed run is re-checked, covering lost notifications.",
    )
    stream_page_size: int = Field(
        default=1000,
        description="Events per catch-up read (and per write).",
    )
    # The per-run buffer of recent pages shared by a process's followers; a
    # follower that falls behind it reads the log instead.
    stream_buffer_events: int = Field(
        default=4096,
        description="Events in a run's live buffer shared by a process's followers; a "
        "follower that falls behind it reads the log itself.",
    )
    stream_buffer_bytes: int = Field(
        default=8 << 20,
        description="Bytes in a run's shared live buffer.",
    )
    # The SSE `retry:` hint (ms) for browsers' EventSource.
    stream_retry_ms: int = Field(
        default=1000,
        description="The SSE `retry:` hint, in milliseconds, for browsers' EventSource.",
    )
    # The longest an append waits for its commit before answering 503 (the database
    # stopped answering); each new connection and each statement have their own bounds,
    # so a database that hangs (no FIN, no answer) holds no connection for long.
    append_timeout_seconds: float = Field(
        default=4.5,
        description="An append the database has not committed by then answers 503 "
        "unavailable; retry it with the same expected_seq.",
    )
    db_connect_timeout_seconds: float = Field(
        default=3.0,
        description="The longest opening a database connection may take.",
    )
    db_statement_timeout_seconds: float = Field(
        default=30.0,
        description="The longest any one statement may take, so a database that hangs holds"
        " nothing for long.",
    )
    # SIGTERM: stop accepting, end streams (clients resume elsewhere), finish the
    # appends in flight, close hosted runs; whatever is left after this long is cut.
    shutdown_grace_seconds: float = Field(
        default=20.0,
        description="SIGTERM: the longest the graceful shutdown after the drain takes (streams "
        "end at once, appends in flight finish, hosted runs still driven close `interrupted`).",
    )
    # SIGTERM first drains: starts and new streams are refused (503 draining), open streams
    # end so their clients resume elsewhere, and the runs driven here go on to their end,
    # for up to this long; only then does the graceful shutdown above begin.
    drain_seconds: float = Field(
        default=90.0,
        ge=0,
        description="SIGTERM: the longest the hosted runs driven here may go on to their end "
        "before the shutdown (0: no drain); size Kubernetes' terminationGracePeriodSeconds "
        "to this plus REPLAY_SHUTDOWN_GRACE_SECONDS plus a margin.",
    )
    # `agent-replay serve`'s processes on one port (uvicorn workers): each its own event
    # loop, pool and hub, as replicas are (notifications join them). 1: one process.
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="`agent-replay serve`'s processes on its port (`--workers N`): each a "
        "whole service with its own pool and hub, joined by notifications as "
        "replicas are.",
    )
    lease_seconds: float = Field(
        default=30.0,
        description="A hosted run's driver lease: a dead driver's run is closed within "
        "about this long.",
    )
    # Hosted runs (agent_replay.agents).
    agents: str | None = Field(
        default=None,
        description='JSON {name: url | {"url", "headers", "protocol", "on_disconnect", "budget", '
        '"redact", "forward_headers"} | "python:module:function"}: the agents hosted runs can '
        'drive, besides the built-in `demo`. `"protocol": "ai-sdk"` names an AI SDK chat '
        "endpoint (its UI message stream is mapped into the log); the default is `ag-ui`. "
        '`"forward_headers"`: the starting request\'s headers sent on to the upstream, a list '
        '(`["cookie", "x-user-id"]`) or `{"request header": "upstream header"}`; never '
        "stored, never `authorization` (the service's own credential).",
    )
    # Redaction at write time (agent_replay.ingest.rules, docs/concepts/redaction.md).
    redact: str = Field(
        default="",
        description="Comma-separated redaction rules applied to every run before the log "
        "stores it: built-in detector names (openai_key, anthropic_key, aws_access_key, "
        "github_token, jwt, private_key, card, email), `default` for all of them, and "
        "`name=regex` custom rules. Empty: no redaction (agents and runs may still add rules).",
    )
    redact_max_window: int = Field(
        default=1024,
        ge=1,
        le=65536,
        description="The longest text a custom redaction rule may match, in characters: a "
        "pattern that can match more (or unbounded text) is refused. It is also the most a "
        "rule can hold back of a streamed message.",
    )
    # A stable name for this process (pod, unit): on restart it closes the runs
    # its earlier life was driving at once, instead of waiting for their leases.
    instance_id: str | None = Field(
        default=None,
        description="A stable name for this process (pod, unit): on restart it closes its "
        "earlier life's hosted runs at once.",
    )
    upstream_idle_seconds: float = Field(
        default=300.0,
        description="An upstream agent silent this long fails its run.",
    )
    # Disconnect policies: how long a `cancel` run nobody has followed yet waits
    # for its first reader (its starter must have time to attach).
    first_reader_seconds: float = Field(
        default=10.0,
        ge=0,
        le=86_400,
        allow_inf_nan=False,
        description="How long a hosted run with disconnect policy `cancel` that nobody has "
        "followed yet waits for its first reader.",
    )
    # Durable Streams (agent_replay.durable): how long a long-poll waits before its
    # 204, how long an SSE response lives before the client reconnects
    # (PROTOCOL.md asks for about a minute), and one catch-up response's size.
    durable_long_poll_seconds: float = Field(
        default=20.0,
        description="A Durable Streams long-poll's wait before its 204.",
    )
    # How long a long-poll's channel stays after the poll is answered, buffering
    # what is committed meanwhile for the follower's next poll (0: not at all).
    durable_poll_linger_seconds: float = Field(
        default=2.0,
        ge=0,
        description="How long a long-poll's follow of its run outlives the poll, buffering "
        "what is committed meanwhile for the follower's next poll (0: not at "
        "all).",
    )
    durable_sse_seconds: float = Field(
        default=60.0,
        description="A Durable Streams SSE response's life (the client reconnects).",
    )
    durable_read_max_messages: int = Field(
        default=10_000,
        description="The most messages in one Durable Streams catch-up response.",
    )
    durable_read_max_bytes: int = Field(
        default=4 << 20,
        description="The most bytes in one Durable Streams catch-up response.",
    )
    # How often expired streams are deleted with their runs (0: never; they still
    # answer 404), and the sweep's pace in events a second (0: unpaced), so the
    # deletes' WAL and I/O stay small beside the appends' commits.
    durable_sweep_seconds: float = Field(
        default=60.0,
        description="How often expired Durable Streams are deleted with their runs (0: "
        "never; they answer 404 either way).",
    )
    durable_sweep_max_rate: float = Field(
        default=20_000.0,
        description="The expiry sweep's pace, in events deleted per second (0: as fast as "
        "it goes).",
    )
    # Slow enough that a person can close the tab mid-answer (an answer takes 9 s or more).
    demo_delay_seconds: float = Field(
        default=0.35,
        description="The demo agent's pause between deltas: long enough to close the tab "
        "mid-answer.",
    )
    # `agent-replay serve`'s connections (agent_replay.api.connections): bounds on reading a
    # request, so nobody holds connections by sending slowly or not at all. Streamed answers (SSE)
    # are writes and are never cut by these.
    header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="A request's line and headers must be in this long after its connection "
        "opened or its previous answer ended; else the connection is closed.",
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="A request body that sends no byte for this long is answered 408 "
        "request_timeout and its connection closed.",
    )
    keep_alive_seconds: float = Field(
        default=5.0, gt=0, description="An idle keep-alive connection is closed after this long."
    )
    max_connections: int = Field(
        default=10_000,
        ge=1,
        description="Open connections per process (SSE streams count); a request past it is "
        "answered 503 too_many_connections.",
    )
    # Operations: log lines as text or JSON; one access line per request; /metrics open.
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="`json`: every log line one JSON object; `text`: `LEVEL logger: message"
        " key=value`.",
    )
    access_log: bool = Field(
        default=True,
        description="One `replay.access` line per request.",
    )
    metrics_public: bool = Field(
        default=False,
        description="GET /metrics without a key (else it needs one, when keys are set).",
    )

    @cached_property
    def previous_token_secrets(self) -> list[str]:
        return [s.strip() for s in self.token_secret_previous.split(",") if s.strip()]

    @cached_property
    def cors_origin_list(self) -> list[str]:
        return [o.strip().rstrip("/") for o in self.cors_origins.split(",") if o.strip()]

    @cached_property
    def allowed_host_list(self) -> list[str]:
        return [h.strip() for h in self.allowed_hosts.split(",") if h.strip()]
