"""Event batches: one `events` row may hold a batch of a run's events.

`events.n` counts the events a row holds (1 for every row written before). A
row's `seq` is its last event's; a batch row's `chunk` and `type` are its
events' joined with newlines (agent_replay.log.rows says why that is lossless).
Adding a column with a constant default rewrites nothing.

The chunk column is compressed with lz4 from here on where the server has it
(a batch row is a large value, and lz4 compresses it at a fraction of pglz's
CPU): on `events` and each existing partition (a partition does not take it
from its parent; agent_replay.log.partitions copies it into new ones). Values
already stored keep their compression.

Downgrade splits every batch row back into a row per event (the layout
before), then drops the column.

Revision ID: 0007_event_batches
Revises: 0006_partitioned_events
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_event_batches"
down_revision: str | None = "0006_partitioned_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


_TABLES = (
    "SELECT 'events' UNION ALL"
    " SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'events'::regclass"
)


def _compress_chunks(method: str) -> None:
    bind = op.get_bind()
    for (table,) in bind.execute(sa.text(_TABLES)).all():
        op.execute(f"ALTER TABLE {table} ALTER COLUMN chunk SET COMPRESSION {method}")


def upgrade() -> None:
    op.execute("ALTER TABLE events ADD COLUMN n integer NOT NULL DEFAULT 1")
    lz4 = op.get_bind().execute(
        sa.text(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
    )
    if lz4.scalar():
        _compress_chunks("lz4")


def downgrade() -> None:
    # One statement: the batch rows go and their events come back under the same
    # keys (the last event's seq is its row's), which only a data-modifying CTE
    # allows. Their message and tool call ids stay NULL, as nothing reads them.
    op.execute(
        """
        WITH batches AS (DELETE FROM events WHERE n > 1 RETURNING *)
        INSERT INTO events (run_id, seq, type, chunk, received_at, run_month, n)
        SELECT b.run_id, b.seq - b.n + x.k, (string_to_array(b.type, E'\\n'))[x.k], x.chunk,
            b.received_at, b.run_month, 1
        FROM batches b
        CROSS JOIN LATERAL unnest(string_to_array(b.chunk, E'\\n')) WITH ORDINALITY AS x(chunk, k)
        """
    )
    op.execute("ALTER TABLE events DROP COLUMN n")
    _compress_chunks("default")
