"""Error codes: the code of a run's last terminal RUN_ERROR, kept on the run row.

Appends keep it from here on; runs that ended in a RUN_ERROR before this
revision get theirs from that event, read back once here. The chunk text is
parsed in Python, not cast to jsonb: a stored chunk may hold `\\u0000` or a
lone surrogate, which jsonb refuses.

Revision ID: 0005_error_code
Revises: 0004_disconnect_policy
Create Date: 2026-12-01
"""

import json
import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0005_error_code"
down_revision: str | None = "0004_disconnect_policy"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As agent_replay.log.chunks.MAX_ERROR_CODE_CHARS when this was written; a migration
# keeps its own copy so it means the same whatever the service becomes.
_MAX_CODE_CHARS = 200
_BATCH = 500
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

_LAST_ERRORS = sa.text(
    """
    SELECT DISTINCT ON (e.run_id) e.run_id, e.chunk
    FROM runs r JOIN events e ON e.run_id = r.run_id AND e.type = 'RUN_ERROR'
    WHERE r.last_terminal = 'RUN_ERROR' AND r.error_code IS NULL
    ORDER BY e.run_id, e.seq DESC
    """
)
_SET = sa.text("UPDATE runs SET error_code = :code WHERE run_id = :run_id")


def _code(text: str) -> str | None:
    try:
        chunk: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(chunk, dict):
        return None
    code = chunk.get("code")
    if not isinstance(code, str):
        error = chunk.get("error")
        code = error.get("code") if isinstance(error, dict) else None
    if not isinstance(code, str) or not code:
        return None
    # What PostgreSQL text cannot hold becomes U+FFFD, as agent_replay.log.chunks.storable does.
    return _UNSTORABLE.sub("\ufffd", code[:_MAX_CODE_CHARS])


def upgrade() -> None:
    op.add_column("runs", sa.Column("error_code", sa.Text(), nullable=True))
    bind = op.get_bind()
    rows = bind.execute(_LAST_ERRORS).fetchall()
    updates = [
        {"run_id": run_id, "code": code}
        for run_id, chunk in rows
        if (code := _code(chunk)) is not None
    ]
    for start in range(0, len(updates), _BATCH):
        bind.execute(_SET, updates[start : start + _BATCH])
    op.create_index(
        "runs_error_code_created_idx",
        "runs",
        ["error_code", "created_at"],
        postgresql_where=sa.text("error_code IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("runs_error_code_created_idx", table_name="runs")
    op.drop_column("runs", "error_code")
