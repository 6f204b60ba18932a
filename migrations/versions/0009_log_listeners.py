"""Log listeners: which LISTEN connections hear the log's commits, by process.

The plain append statements (`append_plain`, `append_tools` in
agent_replay/log/queries.sql) queue their NOTIFY only when a process other than the
committing one listens: a lone process hears its own commits in-process, and
the notification cost the database more per group than anything else those
statements add to the insert. A listener registers here after its LISTEN, under
a lock that waits out the statements in flight (agent_replay.log.listener), so no
commit falls between what it re-reads and what it is told.

Revision ID: 0009_log_listeners
Revises: 0008_type_compression
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009_log_listeners"
down_revision: str | None = "0008_type_compression"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE log_listeners (
            pid integer NOT NULL,
            backend_start timestamptz NOT NULL,
            process text NOT NULL,
            CONSTRAINT log_listeners_pkey PRIMARY KEY (process, pid, backend_start)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE log_listeners")
