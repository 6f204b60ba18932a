"""Citus: the log sharded by run id, when the database has the `citus` extension.

On plain PostgreSQL (no `citus` extension in the database) this revision does
nothing. On a Citus coordinator, every table a run owns rows of is distributed
by `run_id`, co-located with `runs` (a run's rows, whatever their table, live
on one shard of one worker, so every per-run statement is a single-shard one):
`runs`, `events` (with its monthly partitions), `run_projections`,
`stream_producers`, `run_readers`. The tables read beside them by other keys
become reference tables (a copy on every node, so a statement joining them with
one run's rows stays on that run's worker): `streams` (unique by name),
`run_forks` (looked up by its source) and `service_secrets`. `log_listeners`
stays a table of the coordinator: it names the coordinator's LISTEN backends, and
on Citus no append reads it (agent_replay.log.citus notifies from the coordinator).

Every earlier revision runs on the coordinator's local tables, as on plain
PostgreSQL, so this one applies to a database migrated before Citus was added to
it as well as to a new one: `create_distributed_table` copies the rows there are
to the workers (run it in a maintenance window sized by the log, as 0006).
Every unique key of the distributed tables already holds `run_id`
(docs/scale-out.md), so no constraint changes.

Downgrade turns every table back into a local table of the coordinator
(`undistribute_table` copies the rows back).

Revision ID: 0014_citus
Revises: 0013_redaction
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_citus"
down_revision: str | None = "0013_redaction"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As agent_replay.log.citus when this was written; a migration keeps its own copy.
_DISTRIBUTED = ("runs", "events", "run_projections", "stream_producers", "run_readers")
_REFERENCE = ("streams", "run_forks", "service_secrets", "run_tombstones")
# The hash chain's aggregate and its step (revision 0011_hash_chain): the append
# statements run it on the run's worker, so every node must have them.
_FUNCTIONS = (
    "chain_rows_step(bytea, bytea, bigint, text, integer)",
    "chain_rows(bytea, bigint, text, integer)",
)


def _citus() -> bool:
    found = op.get_bind().execute(
        sa.text("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
    )
    return bool(found.scalar())


def _is_citus_table(table: str) -> bool:
    found = op.get_bind().execute(
        sa.text(
            "SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = CAST(:t AS regclass))"
        ),
        {"t": table},
    )
    return bool(found.scalar())


def upgrade() -> None:
    if not _citus():
        return
    bind = op.get_bind()
    # Each table's copy to the workers runs over its own connections; Citus wants them
    # sequential within one transaction that has already written on the coordinator.
    bind.execute(sa.text("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'"))
    # Citus distributes no table with a trigger; the erasure's refusal of new runs
    # (revision 0012_erasure) cannot stay on `runs`, and erasure is refused on Citus
    # (agent_replay.log.erasure) rather than leaving an erased thread open to new runs.
    bind.execute(sa.text("DROP TRIGGER IF EXISTS runs_refuse_erased ON runs"))
    for function in _FUNCTIONS:
        bind.execute(
            sa.text("SELECT create_distributed_function(CAST(:f AS regprocedure))"),
            {"f": function},
        )
    for table in _DISTRIBUTED:
        if not _is_citus_table(table):
            colocate = "none" if table == "runs" else "runs"
            bind.execute(
                sa.text(
                    "SELECT create_distributed_table(CAST(:t AS regclass), 'run_id',"
                    " colocate_with => :c)"
                ),
                {"t": table, "c": colocate if table != "runs" else "default"},
            )
    for table in _REFERENCE:
        if not _is_citus_table(table):
            bind.execute(
                sa.text("SELECT create_reference_table(CAST(:t AS regclass))"), {"t": table}
            )


def downgrade() -> None:
    if not _citus():
        return
    for table in (*_REFERENCE, *reversed(_DISTRIBUTED)):
        if _is_citus_table(table):
            op.get_bind().execute(
                sa.text("SELECT undistribute_table(CAST(:t AS regclass))"), {"t": table}
            )
    # As revision 0012_erasure made it, once `runs` is a local table again.
    op.execute(
        """
        CREATE TRIGGER runs_refuse_erased BEFORE INSERT OR UPDATE OF thread_id ON runs
        FOR EACH ROW EXECUTE FUNCTION replay_refuse_erased()
        """
    )
