"""Partitioned events: `events` partitioned by its run's creation month.

`runs.run_month` (the UTC month the run row was created in: its
`created_at`'s for the runs there are, `now()`'s from here on) is copied into
`events.run_month` by every append; `events` is partitioned by range of it, a
partition a month (`events_YYYY_MM`), so retention drops a month whole instead
of deleting its rows (agent_replay.log.partitions). The primary key gains the
partition key: (run_id, seq, run_month).

Upgrade rewrites `events`: every row goes to the partition of its run's month
(an event whose run row is gone, which no read reaches, to its receive month),
the primary key is built once per partition after the load. The current and
next month's partitions are created too. Downgrade puts every row back in one
plain table. Both hold `events` locked for the copy: run them in a
maintenance window sized by the table (README, Operations).

Revision ID: 0006_partitioned_events
Revises: 0005_error_code
Create Date: 2026-12-01
"""

from collections.abc import Sequence
from datetime import date

import sqlalchemy as sa
from alembic import op

revision: str = "0006_partitioned_events"
down_revision: str | None = "0005_error_code"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As agent_replay.log.partitions when this was written; a migration keeps its own copy.
_MONTH_OF = "(date_trunc('month', {} AT TIME ZONE 'UTC'))::date"

_COLUMNS = "run_id, seq, type, chunk, message_id, tool_call_id, received_at"


def _next(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def _partition(month: date) -> str:
    return f"events_{month.year:04d}_{month.month:02d}"


def upgrade() -> None:
    op.execute("ALTER TABLE runs ADD COLUMN run_month date")
    op.execute(f"UPDATE runs SET run_month = {_MONTH_OF.format('created_at')}")
    op.execute(f"ALTER TABLE runs ALTER COLUMN run_month SET DEFAULT {_MONTH_OF.format('now()')}")
    op.execute("ALTER TABLE runs ALTER COLUMN run_month SET NOT NULL")
    # Retention's look at a month's runs (all closed? since when?).
    op.create_index("runs_month_closed_idx", "runs", ["run_month", "closed_at"])
    op.execute("ALTER TABLE events RENAME TO events_unpartitioned")
    op.execute(
        "ALTER TABLE events_unpartitioned"
        " RENAME CONSTRAINT events_pkey TO events_unpartitioned_pkey"
    )
    op.execute(
        """
        CREATE TABLE events (
            run_id text NOT NULL,
            seq bigint NOT NULL,
            type text NOT NULL,
            chunk text NOT NULL,
            message_id text,
            tool_call_id text,
            received_at timestamptz NOT NULL DEFAULT now(),
            run_month date NOT NULL
        ) PARTITION BY RANGE (run_month)
        """
    )
    bind = op.get_bind()
    month_of_event = _MONTH_OF.format("e.received_at")
    months = {
        row[0]
        for row in bind.execute(
            sa.text(
                f"""
                SELECT DISTINCT run_month FROM runs
                UNION SELECT {_MONTH_OF.format("now()")}
                UNION SELECT ({_MONTH_OF.format("now()")} + interval '1 month')::date
                UNION SELECT DISTINCT {month_of_event} FROM events_unpartitioned e
                    WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = e.run_id)
                """
            )
        )
    }
    for month in sorted(months):
        op.execute(
            f"CREATE TABLE {_partition(month)} PARTITION OF events"
            f" FOR VALUES FROM ('{month.isoformat()}') TO ('{_next(month).isoformat()}')"
        )
    op.execute(
        f"""
        INSERT INTO events ({_COLUMNS}, run_month)
        SELECT e.run_id, e.seq, e.type, e.chunk, e.message_id, e.tool_call_id, e.received_at,
               coalesce(r.run_month, {month_of_event})
        FROM events_unpartitioned e LEFT JOIN runs r ON r.run_id = e.run_id
        """
    )
    op.execute("DROP TABLE events_unpartitioned")
    # Built once per partition over its rows, cheaper than maintained through the load.
    op.execute("ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (run_id, seq, run_month)")


def downgrade() -> None:
    op.execute(
        """
        CREATE TABLE events_unpartitioned (
            run_id text NOT NULL,
            seq bigint NOT NULL,
            type text NOT NULL,
            chunk text NOT NULL,
            message_id text,
            tool_call_id text,
            received_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(f"INSERT INTO events_unpartitioned ({_COLUMNS}) SELECT {_COLUMNS} FROM events")
    # Partitions detached by an interrupted prune were being dropped: they go too.
    bind = op.get_bind()
    detached = [
        row[0]
        for row in bind.execute(
            sa.text(
                """
                SELECT c.relname FROM pg_class c
                WHERE c.relkind = 'r' AND c.relname ~ '^events_[0-9]{4}_[0-9]{2}$'
                  AND NOT c.relispartition
                  AND c.relnamespace = current_schema()::regnamespace
                """
            )
        )
    ]
    op.execute("DROP TABLE events")
    for name in detached:
        op.execute(f"DROP TABLE {name}")
    op.execute("ALTER TABLE events_unpartitioned RENAME TO events")
    op.execute("ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (run_id, seq)")
    op.execute("ALTER TABLE runs DROP COLUMN run_month")
