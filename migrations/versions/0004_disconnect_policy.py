"""Disconnect policies: a hosted run's policy, when its last reader left, who reads it.

Revision ID: 0004_disconnect_policy
Revises: 0004_token_secret
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_disconnect_policy"
down_revision: str | None = "0004_token_secret"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("on_disconnect", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("grace_seconds", sa.Float(), nullable=True))
    op.add_column("runs", sa.Column("reader_left_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "run_readers",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column(
            "seen_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")
        ),
        sa.PrimaryKeyConstraint("run_id", "holder", name="run_readers_pkey"),
    )


def downgrade() -> None:
    op.drop_table("run_readers")
    op.drop_column("runs", "reader_left_at")
    op.drop_column("runs", "grace_seconds")
    op.drop_column("runs", "on_disconnect")
