"""The log's tables, as SQLAlchemy Core metadata.

Alembic revisions create the schema; this module is what the drift test (and
alembic's environment) compares them with. No statement is built from it: the
log's are in `queries.sql` (and the run listing's in `lookups.py`).

`events` has no foreign key to `runs` on purpose: every append reaches it
through an UPDATE of its run row in the same statement, so the key could never
fail, and its per-row trigger would cost the hot path a lookup per event.
"""

from __future__ import annotations

import re

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("run_id", Text, primary_key=True),
    Column("thread_id", Text, nullable=True),
    Column("agent", Text, nullable=True),
    Column("status", Text, nullable=False, server_default=text("'running'")),
    # High-water mark: the seq of the last committed event; 0 for an empty run.
    Column("last_seq", BigInteger, nullable=False, server_default=text("0")),
    # Type of the last RUN_FINISHED / RUN_ERROR chunk, kept by every append so
    # closing can decide the status without reading the log back.
    Column("last_terminal", Text, nullable=True),
    Column("error_message", Text, nullable=True),
    Column("metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    # The agent input (a RunAgentInput) as JSON text, for hosted runs.
    Column("input", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("closed_at", DateTime(timezone=True), nullable=True),
    Column("lease_owner", Text, nullable=True),
    Column("lease_expires_at", DateTime(timezone=True), nullable=True),
    # Maintained by every append, so audit queries never scan events:
    # the distinct tool names called (TOOL_CALL_START) and the token usage
    # summed over RUN_FINISHED chunks.
    Column("tool_names", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
    Column("prompt_tokens", BigInteger, nullable=True),
    Column("completion_tokens", BigInteger, nullable=True),
    Column("total_tokens", BigInteger, nullable=True),
    # Hosted runs' disconnect policy (revision 0004_disconnect_policy):
    # continue / cancel / cancel_after with its grace, and when the last
    # reader left (agent_replay.log.readers).
    Column("on_disconnect", Text, nullable=True),
    Column("grace_seconds", Float, nullable=True),
    Column("reader_left_at", DateTime(timezone=True), nullable=True),
    # The code of the last terminal RUN_ERROR (`cancelled`, `abandoned`,
    # `interrupted`, a producer's own), kept by every append like
    # error_message (revision 0005_error_code).
    Column("error_code", Text, nullable=True),
    # The hash of the run's last event (agent_replay.chain; revision 0011_hash_chain):
    # GENESIS for a new run, NULL for a run the backfill has not chained yet
    # (agent_replay.log.chaining). Set by the append in the statement that numbers events.
    Column(
        "chain_head",
        LargeBinary,
        nullable=True,
        server_default=text("'\\x" + "00" * 32 + "'::bytea"),
    ),
    # Matches replaced per redaction rule, {rule: count}; NULL: none (revision 0013_redaction).
    Column("redactions", JSONB, nullable=True),
    # Text redaction holds back for the run's open messages, as ingest serialized it
    # (agent_replay.ingest.held); NULL: nothing held. Written and guarded by the append
    # statement, read only by the next redacted append, never served (revision
    # 0015_redaction_hold). Text, not jsonb: held text may decode to characters jsonb
    # refuses (U+0000), which the serialization keeps escaped.
    Column("redaction_hold", Text, nullable=True),
    # The UTC month the run row was created in (an import's: its created_at's),
    # its events' partition (revision 0006_partitioned_events,
    # agent_replay.log.partitions). Set once, never updated: not generated from
    # created_at, so nothing that changes created_at can strand its events.
    Column(
        "run_month",
        Date,
        nullable=False,
        server_default=text("(date_trunc('month', now() AT TIME ZONE 'UTC'))::date"),
    ),
    Index("runs_thread_created_idx", "thread_id", "created_at"),
    Index("runs_agent_created_idx", "agent", "created_at"),
    Index("runs_tool_names_idx", "tool_names", postgresql_using="gin"),
    Index("runs_status_created_idx", "status", "created_at"),
    Index("runs_created_idx", "created_at"),
    # Audit and retention (revision 0002): the keyset order of run listings,
    # the has_error filter, and prune's scan of closed runs by age.
    Index("runs_created_run_idx", "created_at", "run_id"),
    Index(
        "runs_error_created_idx",
        "created_at",
        postgresql_where=text("error_message IS NOT NULL"),
    ),
    Index("runs_closed_idx", "closed_at", postgresql_where=text("closed_at IS NOT NULL")),
    # Retention's look at a month's runs (revision 0006_partitioned_events).
    Index("runs_month_closed_idx", "run_month", "closed_at"),
    # The error_code filter (revision 0005_error_code).
    Index(
        "runs_error_code_created_idx",
        "error_code",
        "created_at",
        postgresql_where=text("error_code IS NOT NULL"),
    ),
    # `?redacted=true` (revision 0013_redaction).
    Index(
        "runs_redacted_created_idx",
        "created_at",
        postgresql_where=text("redactions IS NOT NULL"),
    ),
    Index(
        "runs_open_lease_idx",
        "lease_expires_at",
        postgresql_where=text("closed_at IS NULL AND lease_owner IS NOT NULL"),
    ),
)

events = Table(
    "events",
    metadata,
    Column("run_id", Text, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("type", Text, nullable=False),
    # The chunk's JSON text exactly as replay sends it (see agent_replay.log.chunks).
    Column("chunk", Text, nullable=False),
    Column("message_id", Text, nullable=True),
    Column("tool_call_id", Text, nullable=True),
    Column("received_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    # The run's `run_month`, copied by the append: the partition key (revision
    # 0006_partitioned_events). A partition a month, created ahead and dropped
    # whole by retention (agent_replay.log.partitions); every per-run statement
    # names the run's month so it reads one partition.
    Column("run_month", Date, nullable=False),
    # How many events the row holds (revision 0007_event_batches): 1, or a batch
    # whose `seq` is its last event's (agent_replay.log.rows has the layout).
    Column("n", Integer, nullable=False, server_default=text("1")),
    # The row's events' hashes, 32 bytes each in seq order (revision 0011_hash_chain);
    # NULL while the run's chain is not computed yet (agent_replay.log.chaining).
    Column("hashes", LargeBinary, nullable=True),
    PrimaryKeyConstraint("run_id", "seq", "run_month", name="events_pkey"),
    postgresql_partition_by="RANGE (run_month)",
)


def is_partition(name: str | None) -> bool:
    """Whether a table is one of `events`' monthly partitions (not in the metadata)."""
    return name is not None and re.fullmatch(r"events_[0-9]{4}_[0-9]{2}", name) is not None


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Alembic's filter: `events`' partitions (and their indexes) are the service's, not
    the metadata's."""
    if type_ == "table":
        return not is_partition(name)
    table = getattr(obj, "table", None)
    return not is_partition(getattr(table, "name", None))


# A closed run's final projection (UIMessage[] as JSON text), built once.
# Rebuilt when the projector's version changes; deleted with its run by
# prune. No foreign key, for the same reason as `events`: only prune deletes
# runs, and it deletes these rows itself.
run_projections = Table(
    "run_projections",
    metadata,
    Column("run_id", Text, nullable=False),
    Column("normalize", Boolean, nullable=False),
    Column("last_seq", BigInteger, nullable=False),
    Column("projector_version", Text, nullable=False),
    Column("messages", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    PrimaryKeyConstraint("run_id", "normalize", name="run_projections_pkey"),
)

# Durable Streams (revision 0003_durable_streams): what a stream adds to its
# run. A run needs no row here to be read as a stream (it reads as
# `application/json` with no expiry); `agent_replay.log.streams` owns these rows.
streams = Table(
    "streams",
    metadata,
    Column("name", Text, nullable=False),
    Column("run_id", Text, nullable=False),
    Column("content_type", Text, nullable=False),
    Column("ttl_seconds", BigInteger, nullable=True),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    # Sliding TTL: reads and writes move it; expiry is touched_at + ttl_seconds.
    Column("touched_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    # The last Stream-Seq a writer sent (compared byte-wise).
    Column("stream_seq", Text, nullable=True),
    # The producer request that closed the stream, so its retry is a duplicate.
    Column("closed_by", Text, nullable=True),
    # How a fork was asked for (source, offset, sub-offset), for idempotent PUTs.
    Column("fork_spec", Text, nullable=True),
    # Soft-deleted: gone for clients, kept while forks read its prefix.
    Column("deleted", Boolean, nullable=False, server_default=text("false")),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    # Made by `PUT /v1/stream` with its run (revision 0010_stream_deletable): only
    # such a stream may be deleted; runs that have a row for other reasons may not.
    Column("deletable", Boolean, nullable=False, server_default=text("false")),
    PrimaryKeyConstraint("name", name="streams_pkey"),
    UniqueConstraint("run_id", name="streams_run_id_key"),
)

# Idempotent producers' state per run, updated in the append's transaction.
stream_producers = Table(
    "stream_producers",
    metadata,
    Column("run_id", Text, nullable=False),
    Column("producer_id", Text, nullable=False),
    Column("epoch", BigInteger, nullable=False),
    Column("seq", BigInteger, nullable=False),
    PrimaryKeyConstraint("run_id", "producer_id", name="stream_producers_pkey"),
)

# A fork: `run_id`'s seqs up to `fork_seq` are `source_run_id`'s (read from
# there, never copied); its own events start at fork_seq + 1.
run_forks = Table(
    "run_forks",
    metadata,
    Column("run_id", Text, nullable=False),
    Column("source_run_id", Text, nullable=False),
    Column("fork_seq", BigInteger, nullable=False),
    PrimaryKeyConstraint("run_id", name="run_forks_pkey"),
    Index("run_forks_source_idx", "source_run_id"),
)

# Deployment-wide secrets a process creates once and every replica reads (the
# token signing secret when REPLAY_TOKEN_SECRET is unset): the first writer wins.
service_secrets = Table(
    "service_secrets",
    metadata,
    Column("name", Text, nullable=False),
    Column("value", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    PrimaryKeyConstraint("name", name="service_secrets_pkey"),
)

# Who reads a run's live stream, per process (revision 0004_disconnect_policy):
# a row per (run, holder), heartbeated while the holder has a follower of the
# run and deleted when its last one leaves. A row nobody refreshes is a dead
# holder's. No foreign key, as for `events`; prune deletes these with the run.
run_readers = Table(
    "run_readers",
    metadata,
    Column("run_id", Text, nullable=False),
    Column("holder", Text, nullable=False),
    Column("seen_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    PrimaryKeyConstraint("run_id", "holder", name="run_readers_pkey"),
)

# The LISTEN connections of every process, by backend (revision 0009_log_listeners):
# the plain append statements notify only when one of another process is here. A
# row whose backend is gone (`pg_stat_activity`) is a dead listener's, deleted by
# the next registration.
log_listeners = Table(
    "log_listeners",
    metadata,
    Column("pid", Integer, nullable=False),
    Column("backend_start", DateTime(timezone=True), nullable=False),
    Column("process", Text, nullable=False),
    # By process first: the append statements ask for a key other than their own.
    PrimaryKeyConstraint("process", "pid", "backend_start", name="log_listeners_pkey"),
)

# What remains of an erased run (revision 0012_erasure, agent_replay.log.erasure):
# its id, thread, event count and chain head (hex, agent_replay.chain) when it was
# erased, when, by which key (or the CLI's user), and why. Nothing else of the run
# is kept. A trigger on `runs` (in the revision) refuses a run under an erased id or
# on an erased thread.
run_tombstones = Table(
    "run_tombstones",
    metadata,
    Column("run_id", Text, nullable=False),
    Column("thread_id", Text, nullable=True),
    Column("events", BigInteger, nullable=False),
    Column("head", Text, nullable=False),
    Column("erased_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("erased_by", Text, nullable=False),
    Column("reason", Text, nullable=True),
    PrimaryKeyConstraint("run_id", name="run_tombstones_pkey"),
    Index("run_tombstones_thread_idx", "thread_id", "run_id"),
)
