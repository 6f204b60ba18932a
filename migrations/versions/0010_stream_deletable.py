"""Streams made by `PUT /v1/stream`: the only runs `DELETE /v1/stream` may remove.

A run gets a `streams` row in other ways too: the run API's fork, a run first
changed through Durable Streams (`Stream-Seq`, a producer's close), a `PUT` of an
existing run's id. Those runs belong to the run API, which deletes nothing, so
the row now says whether a `PUT` made the run with it.

Rows from before this revision: made by a `PUT` when the stream row and its run
were written in one transaction (the same `now()`) and the run is not hosted. A
fork whose stream is named by its run id may be the run API's, so it is kept
(not deletable) rather than guessed.

Revision ID: 0010_stream_deletable
Revises: 0009_log_listeners
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_stream_deletable"
down_revision: str | None = "0009_log_listeners"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "streams",
        sa.Column("deletable", sa.Boolean(), nullable=False, server_default=sa.text("false")),
    )
    op.execute(
        """
        UPDATE streams s SET deletable = true
        FROM runs r
        WHERE r.run_id = s.run_id AND r.created_at = s.created_at AND r.agent IS NULL
          AND (s.fork_spec IS NULL OR s.name <> s.run_id)
        """
    )


def downgrade() -> None:
    op.drop_column("streams", "deletable")
