"""The event log: runs and events.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.Text(), primary_key=True),
        sa.Column("thread_id", sa.Text(), nullable=True),
        sa.Column("agent", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False, server_default=sa.text("'running'")),
        sa.Column("last_seq", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column("last_terminal", sa.Text(), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column(
            "metadata",
            postgresql.JSONB(),
            nullable=False,
            server_default=sa.text("'{}'::jsonb"),
        ),
        sa.Column("input", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "tool_names",
            postgresql.ARRAY(sa.Text()),
            nullable=False,
            server_default=sa.text("'{}'::text[]"),
        ),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=True),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=True),
        sa.Column("total_tokens", sa.BigInteger(), nullable=True),
    )
    op.create_index("runs_thread_created_idx", "runs", ["thread_id", "created_at"])
    op.create_index("runs_status_created_idx", "runs", ["status", "created_at"])
    op.create_index("runs_agent_created_idx", "runs", ["agent", "created_at"])
    op.create_index("runs_tool_names_idx", "runs", ["tool_names"], postgresql_using="gin")
    op.create_index("runs_created_idx", "runs", ["created_at"])
    op.create_index(
        "runs_open_lease_idx",
        "runs",
        ["lease_expires_at"],
        postgresql_where=sa.text("closed_at IS NULL AND lease_owner IS NOT NULL"),
    )
    op.create_table(
        "events",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("chunk", sa.Text(), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=True),
        sa.Column("tool_call_id", sa.Text(), nullable=True),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name="events_pkey"),
    )


def downgrade() -> None:
    op.drop_table("events")
    op.drop_index("runs_open_lease_idx", table_name="runs")
    op.drop_index("runs_created_idx", table_name="runs")
    op.drop_index("runs_tool_names_idx", table_name="runs")
    op.drop_index("runs_agent_created_idx", table_name="runs")
    op.drop_index("runs_status_created_idx", table_name="runs")
    op.drop_index("runs_thread_created_idx", table_name="runs")
    op.drop_table("runs")
