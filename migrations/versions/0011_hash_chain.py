"""A hash chain per run (agent_replay.chain): each event's hash, and the run's head.

`runs.chain_head` is the hash of the run's last event (agent_replay.chain.GENESIS
for a run without events); `events.hashes` a row's events' hashes, 32 bytes each in
seq order (one for a row per event, `n` for a batch row, agent_replay.log.rows), so
a verification names the first altered event inside a batch row too.

A run whose head is NULL is not chained yet: this revision leaves every existing
run so, and its appends leave their hashes NULL too (`chain_rows` gives NULL from
a NULL head), until the backfill (agent_replay.log.chaining, run by `agent-replay
migrate` after alembic) chains the run under its row's lock, all of its events at
once. Runs created from here on start at the genesis hash (the column's default,
set after the column is added, so existing rows keep NULL).

`chain_rows` is the append statements' window aggregate: fed a run's new rows in
seq order (the run's head before them, each row's last seq, chunk and count), it
yields each row's hashes, starting from the head, then from the previous row's
last hash. A batch row's chunk is its events' chunks joined by newlines.

Revision ID: 0011_hash_chain
Revises: 0010_stream_deletable
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_hash_chain"
down_revision: str | None = "0010_stream_deletable"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GENESIS = "'\\x" + "00" * 32 + "'::bytea"


def upgrade() -> None:
    op.add_column("runs", sa.Column("chain_head", sa.LargeBinary(), nullable=True))
    op.execute(f"ALTER TABLE runs ALTER COLUMN chain_head SET DEFAULT {GENESIS}")
    op.add_column("events", sa.Column("hashes", sa.LargeBinary(), nullable=True))
    op.execute(
        r"""
        CREATE FUNCTION chain_rows_step(state bytea, head bytea, last bigint, chunk text, n integer)
        RETURNS bytea LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
        DECLARE
            h bytea;
            hashes bytea := '';
            parts text[];
        BEGIN
            IF head IS NULL THEN
                RETURN NULL;
            END IF;
            h := CASE WHEN state IS NULL THEN head
                      ELSE substring(state FROM octet_length(state) - 31) END;
            IF n = 1 THEN
                RETURN sha256(h || int8send(last) || convert_to(chunk, 'UTF8'));
            END IF;
            parts := string_to_array(chunk, E'\n');
            FOR i IN 1..n LOOP
                h := sha256(h || int8send(last - n + i) || convert_to(parts[i], 'UTF8'));
                hashes := hashes || h;
            END LOOP;
            RETURN hashes;
        END
        $$
        """
    )
    op.execute(
        "CREATE AGGREGATE chain_rows(bytea, bigint, text, integer) "
        "(SFUNC = chain_rows_step, STYPE = bytea)"
    )


def downgrade() -> None:
    op.execute("DROP AGGREGATE chain_rows(bytea, bigint, text, integer)")
    op.execute("DROP FUNCTION chain_rows_step(bytea, bytea, bigint, text, integer)")
    op.drop_column("events", "hashes")
    op.drop_column("runs", "chain_head")
