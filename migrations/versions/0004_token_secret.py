"""Service secrets: the token signing secret every replica shares.

Revision ID: 0004_token_secret
Revises: 0003_durable_streams
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_token_secret"
down_revision: str | None = "0003_durable_streams"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "service_secrets",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.PrimaryKeyConstraint("name", name="service_secrets_pkey"),
    )


def downgrade() -> None:
    op.drop_table("service_secrets")
