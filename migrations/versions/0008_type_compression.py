"""Type compression: `events.type` is compressed with lz4 too, where the server has it.

A batch row's `type` is its events' types joined with newlines (revision
0007_event_batches): several kilobytes for a full row, so PostgreSQL compresses
it, with pglz unless told otherwise. pglz took more of the database's CPU per
large append than lz4 did for the far larger chunks beside it. As 0007 does for
`chunk`: on `events` and each existing partition (a partition does not take it
from its parent; agent_replay.log.partitions copies it into new ones). Values
already stored keep their compression; downgrade gives the column back the
server's default.

Revision ID: 0008_type_compression
Revises: 0007_event_batches
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_type_compression"
down_revision: str | None = "0007_event_batches"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


_TABLES = (
    "SELECT 'events' UNION ALL"
    " SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'events'::regclass"
)


def _compress_types(method: str) -> None:
    bind = op.get_bind()
    for (table,) in bind.execute(sa.text(_TABLES)).all():
        op.execute(f"ALTER TABLE {table} ALTER COLUMN type SET COMPRESSION {method}")


def upgrade() -> None:
    lz4 = op.get_bind().execute(
        sa.text(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
    )
    if lz4.scalar():
        _compress_types("lz4")


def downgrade() -> None:
    _compress_types("default")
