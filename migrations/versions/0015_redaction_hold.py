"""Redaction hold: the text redaction holds back for a run's open messages, kept with the run.

`runs.redaction_hold` is what a pushed append's redaction could not release yet (the
possible start of a secret, at most the longest rule's window per open message), written
by the append statement that stored the rest and read back by whichever replica takes
the run's next append (agent_replay.ingest.held). NULL for a run holding nothing. A
column of `runs`: it goes with the run row, so erasure and retention delete it with the
run, and on Citus it lives on the run's shard.

Revision ID: 0015_redaction_hold
Revises: 0014_citus
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_redaction_hold"
down_revision: str | None = "0014_citus"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("redaction_hold", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "redaction_hold")
