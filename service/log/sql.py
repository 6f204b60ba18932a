"""The log's SQL, in one place, so the statements can be read (and tuned) together.

The append is one statement: bump each run's `last_seq` (the UPDATE takes the
run row's lock), insert the events numbered from the old value, and queue a
NOTIFY per run. The writer passes a group's runs sorted by run_id and the plan
walks them in that order (unnest, then the primary key), so two groups lock
their common runs in the same order; a deadlock the planner might still make
is retried. (A separate `SELECT ... ORDER BY ... FOR UPDATE` step made the
order explicit but cost 40% of the statement's time.) Because the
seq is taken under the run row's lock and the lock is held to commit, commit
order equals seq order within a run, so a reader asking for `seq > N` can never
skip an event that commits later. Different runs append in parallel.
"""


def _add_tokens(column: str) -> str:
    """Sum usage across RUN_FINISHED chunks; NULL until some chunk reports it."""
    return (
        f"{column} = CASE WHEN req.{column} IS NULL THEN runs.{column} "
        f"ELSE coalesce(runs.{column}, 0) + req.{column} END"
    )


def _req(first: int) -> str:
    """The group's per-run requests, one row each; parameters $first.. in order."""
    p = [f"${first + i}" for i in range(11)]
    return f"""req AS (
    SELECT * FROM unnest(
        {p[0]}::text[], {p[1]}::bigint[], {p[2]}::bigint[], {p[3]}::bool[], {p[4]}::text[],
        {p[5]}::text[], {p[6]}::text[], {p[7]}::bigint[], {p[8]}::bigint[], {p[9]}::bigint[],
        {p[10]}::text[]
    ) WITH ORDINALITY AS r(
        run_id, n, expected, close, terminal, error_message,
        tools, prompt_tokens, completion_tokens, total_tokens, close_status, idx
    )
)"""


_UPD = f"""upd AS (
    UPDATE runs SET
        last_seq = runs.last_seq + req.n,
        updated_at = now(),
        last_terminal = coalesce(req.terminal, runs.last_terminal),
        error_message = CASE
            WHEN req.terminal = 'RUN_ERROR' THEN req.error_message
            WHEN req.terminal IS NOT NULL THEN NULL
            ELSE runs.error_message END,
        closed_at = CASE WHEN req.close THEN now() END,
        -- tools: this group's new names, joined by U+001F (one text per run).
        tool_names = CASE WHEN req.tools IS NULL THEN runs.tool_names ELSE ARRAY(
            SELECT DISTINCT t FROM unnest(runs.tool_names || string_to_array(req.tools, E'\x1f')) t
            ORDER BY t) END,
        {_add_tokens("prompt_tokens")},
        {_add_tokens("completion_tokens")},
        {_add_tokens("total_tokens")},
        status = CASE
            WHEN NOT req.close THEN runs.status
            WHEN req.close_status IS NOT NULL THEN req.close_status
            WHEN coalesce(req.terminal, runs.last_terminal) = 'RUN_ERROR' THEN 'error'
            ELSE 'finished' END
    FROM req
    -- Re-checked on the newest row version after waiting for its lock.
    WHERE runs.run_id = req.run_id AND runs.closed_at IS NULL
      AND (req.expected IS NULL OR runs.last_seq = req.expected - 1)
    RETURNING req.idx, runs.run_id, runs.last_seq - req.n AS base, runs.last_seq, req.close
)"""

_NOTIFY_PAYLOAD = "run_id || ' ' || last_seq || CASE WHEN close THEN ' c' ELSE '' END"

# One NOTIFY carries up to 40 runs, a line each (PostgreSQL caps a payload at
# 8,000 bytes; a line is at most ~150): one per run costs a group commit 15%.
_NOTIFY_ALL = f"""note AS (
    SELECT pg_notify('replay_events', string_agg(line, E'\\n'))
    FROM (SELECT {_NOTIFY_PAYLOAD} AS line, (row_number() OVER ()) / 40 AS bucket FROM upd) AS l
    GROUP BY bucket
)"""

# Small groups: everything in one statement (one round trip, one commit).
# Parameters: $1-$6 the events' columns, $7-$17 the requests (see _req).
APPEND = f"""
WITH {_req(7)},
{_UPD},
ins AS (
    -- Events name their run by its position in req: an int per row, not the id.
    INSERT INTO events (run_id, seq, type, chunk, message_id, tool_call_id)
    SELECT upd.run_id, upd.base + e.ord, e.type, e.chunk, e.message_id, e.tool_call_id
    FROM unnest($1::int[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[])
        AS e(idx, ord, type, chunk, message_id, tool_call_id)
    JOIN upd ON upd.idx = e.idx
),
{_NOTIFY_ALL}
SELECT idx, run_id, base, (SELECT count(*) FROM note) AS notes FROM upd
"""

# Large groups, in one transaction: BUMP the runs, COPY the events (PostgreSQL's
# bulk path, cheaper per row than unnesting arrays), then NOTIFY.
BUMP = f"""
WITH {_req(1)},
{_UPD}
SELECT idx, run_id, base, {_NOTIFY_PAYLOAD} AS payload FROM upd
"""

NOTIFY = """
SELECT pg_notify('replay_events', string_agg(line, E'\\n'))
FROM (
    SELECT line, (n - 1) / 40 AS bucket FROM unnest($1::text[]) WITH ORDINALITY AS u(line, n)
) AS l
GROUP BY bucket
"""

EVENT_COLUMNS = ("run_id", "seq", "type", "chunk", "message_id", "tool_call_id")


RUN_STATES = """
SELECT run_id, last_seq, closed_at IS NOT NULL AS closed FROM runs WHERE run_id = ANY($1::text[])
"""

STORED_RANGE = """
SELECT chunk FROM events WHERE run_id = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq
"""

CREATE_RUN_IF_MISSING = """
INSERT INTO runs (run_id, thread_id) VALUES ($1, $2) ON CONFLICT (run_id) DO NOTHING
"""

CREATE_RUN = """
INSERT INTO runs (run_id, thread_id, agent, metadata, input)
VALUES ($1, $2, $3, $4::jsonb, $5)
ON CONFLICT (run_id) DO NOTHING
RETURNING run_id
"""

RUN_COLUMNS = """
run_id, thread_id, agent, status, last_seq, closed_at IS NOT NULL AS closed,
created_at, updated_at, closed_at, metadata::text AS metadata, last_terminal, error_message,
lease_owner, lease_expires_at, tool_names, prompt_tokens, completion_tokens, total_tokens
"""

GET_RUN = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1"

READ_EVENTS = """
SELECT seq, type, chunk, received_at FROM events
WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3
"""
