"""Audit: projection cache, indexes for run listings and retention.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_projections",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("normalize", sa.Boolean(), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("projector_version", sa.Text(), nullable=False),
        sa.Column("messages", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.PrimaryKeyConstraint("run_id", "normalize", name="run_projections_pkey"),
    )
    # (created_at, run_id) is the listing's keyset order; created_at alone
    # leaves ties to a filter.
    op.create_index("runs_created_run_idx", "runs", ["created_at", "run_id"])
    op.create_index(
        "runs_error_created_idx",
        "runs",
        ["created_at"],
        postgresql_where=sa.text("error_message IS NOT NULL"),
    )
    op.create_index(
        "runs_closed_idx", "runs", ["closed_at"], postgresql_where=sa.text("closed_at IS NOT NULL")
    )


def downgrade() -> None:
    op.drop_index("runs_closed_idx", table_name="runs")
    op.drop_index("runs_error_created_idx", table_name="runs")
    op.drop_index("runs_created_run_idx", table_name="runs")
    op.drop_table("run_projections")
