"""Erasure: what remains of a thread's runs once they are erased, and the refusal of
new runs under an erased run's id or on an erased thread.

`run_tombstones` holds a row per erased run (its id, thread, event count, chain
head, when, by whom, why); everything else of the run is deleted
(agent_replay.log.erasure).

The refusal is a trigger rather than a condition in the statements that make
runs: those take the thread's advisory lock inside their one statement, after
their snapshot was taken, so a condition there could not see an erasure that
committed while they waited for the lock. A PL/pgSQL function's queries take a
fresh snapshot each (READ COMMITTED), and `FOR KEY SHARE` on the run's row waits
out an erasure holding it: a run made while the thread is erased either commits
first (and is erased with it) or is refused once the tombstones are visible.

Revision ID: 0012_erasure
Revises: 0011_hash_chain
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_erasure"
down_revision: str | None = "0011_hash_chain"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_tombstones",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Text(), nullable=True),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("head", sa.Text(), nullable=False),
        sa.Column(
            "erased_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")
        ),
        sa.Column("erased_by", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name="run_tombstones_pkey"),
    )
    op.create_index("run_tombstones_thread_idx", "run_tombstones", ["thread_id", "run_id"])
    op.execute(
        """
        CREATE FUNCTION replay_refuse_erased() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            -- Waits for an erasure holding the run's row (a re-creation racing it).
            PERFORM 1 FROM runs WHERE run_id = NEW.run_id FOR KEY SHARE;
            IF EXISTS (SELECT 1 FROM run_tombstones WHERE run_id = NEW.run_id)
               OR (NEW.thread_id IS NOT NULL
                   AND EXISTS (SELECT 1 FROM run_tombstones WHERE thread_id = NEW.thread_id))
            THEN
                RAISE EXCEPTION 'run % or its thread was erased', NEW.run_id
                    USING ERRCODE = 'RE410';
            END IF;
            RETURN NEW;
        END $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER runs_refuse_erased BEFORE INSERT OR UPDATE OF thread_id ON runs
        FOR EACH ROW EXECUTE FUNCTION replay_refuse_erased()
        """
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER runs_refuse_erased ON runs")
    op.execute("DROP FUNCTION replay_refuse_erased()")
    op.drop_index("run_tombstones_thread_idx", table_name="run_tombstones")
    op.drop_table("run_tombstones")
