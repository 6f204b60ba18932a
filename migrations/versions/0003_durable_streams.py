"""Durable Streams: stream settings, idempotent producers, forks of runs.

Revision ID: 0003_durable_streams
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_durable_streams"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "streams",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("content_type", sa.Text(), nullable=False),
        sa.Column("ttl_seconds", sa.BigInteger(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "touched_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.Column("stream_seq", sa.Text(), nullable=True),
        sa.Column("closed_by", sa.Text(), nullable=True),
        sa.Column("fork_spec", sa.Text(), nullable=True),
        sa.Column("deleted", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.PrimaryKeyConstraint("name", name="streams_pkey"),
        sa.UniqueConstraint("run_id", name="streams_run_id_key"),
    )
    op.create_table(
        "stream_producers",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("producer_id", sa.Text(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "producer_id", name="stream_producers_pkey"),
    )
    op.create_table(
        "run_forks",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("source_run_id", sa.Text(), nullable=False),
        sa.Column("fork_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="run_forks_pkey"),
    )
    op.create_index("run_forks_source_idx", "run_forks", ["source_run_id"])


def downgrade() -> None:
    op.drop_index("run_forks_source_idx", table_name="run_forks")
    op.drop_table("run_forks")
    op.drop_table("stream_producers")
    op.drop_table("streams")
