"""Redaction counts: how many matches of each rule were replaced in a run, never the text.

`runs.redactions` is a JSON object {rule: count}, NULL for a run nothing was redacted in;
the partial index serves `GET /v1/runs?redacted=true` newest first.

Revision ID: 0013_redaction
Revises: 0012_erasure
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013_redaction"
down_revision: str | None = "0012_erasure"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("redactions", postgresql.JSONB(), nullable=True))
    op.create_index(
        "runs_redacted_created_idx",
        "runs",
        ["created_at"],
        postgresql_where=sa.text("redactions IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("runs_redacted_created_idx", table_name="runs")
    op.drop_column("runs", "redactions")
