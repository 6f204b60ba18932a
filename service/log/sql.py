"""The log's SQL, in one place, so the statements can be read (and tuned) together.

The append is one statement: bump each run's `last_seq` (the UPDATE takes the
run row's lock), insert the events numbered from the old value, and queue a
NOTIFY per run. Because the seq is taken under the run row's lock and the lock
is held to commit, commit order equals seq order within a run, so a reader
asking for `seq > N` can never skip an event that commits later. Different
runs append in parallel; two groups that share runs (only across processes:
within one, a run is in one lane at a time) can deadlock, and are retried.

No joins, by design. The group's per-run requests arrive as one JSON object
keyed by run id, looked up from each run row, and the events find their run's
base seq in a one-row map. An earlier form joined `unnest`ed request arrays
with `runs`: a generic plan made while `runs` looked tiny (no statistics yet,
and `closed_at IS NULL` guessed at 0.5%) rescanned the arrays once per run
row, and appends fell to a third of their rate as the table grew. Without
joins there is no join order to get wrong: `runs` is read by its primary key
(`run_id = ANY`), the events arrays once.

A request is `{"n": events, "expected": seq, "close": true, "status": s,
"terminal": type, "error": text, "tools": [names], "prompt_tokens": n, ...}`;
absent keys mean "no", "none" or "unchanged".
"""

from service.log.summary import BIGINT_MAX


def _upd(requests: int, run_ids: int) -> str:
    """Bump the runs in `$run_ids` by the requests in `$requests` (jsonb)."""
    r = f"(${requests}::jsonb -> runs.run_id)"

    def tokens(column: str) -> str:
        # Saturating: a producer's absurd usage must not fail everyone's group.
        return (
            f"{column} = CASE WHEN {r} ? '{column}' THEN greatest(least("
            f"coalesce(runs.{column}, 0)::numeric + ({r} ->> '{column}')::numeric, {BIGINT_MAX}),"
            f" -{BIGINT_MAX})::bigint ELSE runs.{column} END"
        )

    return f"""upd AS (
    UPDATE runs SET
        last_seq = runs.last_seq + ({r} ->> 'n')::bigint,
        updated_at = now(),
        last_terminal = coalesce({r} ->> 'terminal', runs.last_terminal),
        error_message = CASE
            WHEN {r} ->> 'terminal' = 'RUN_ERROR' THEN {r} ->> 'error'
            WHEN {r} ? 'terminal' THEN NULL
            ELSE runs.error_message END,
        closed_at = CASE WHEN {r} ? 'close' THEN now() END,
        tool_names = CASE WHEN {r} ? 'tools' THEN ARRAY(
            SELECT DISTINCT t
            FROM unnest(runs.tool_names || ARRAY(SELECT jsonb_array_elements_text({r} -> 'tools')))
                AS t
            ORDER BY t) ELSE runs.tool_names END,
        {tokens("prompt_tokens")},
        {tokens("completion_tokens")},
        {tokens("total_tokens")},
        status = CASE
            WHEN NOT {r} ? 'close' THEN runs.status
            WHEN {r} ? 'status' THEN {r} ->> 'status'
            WHEN coalesce({r} ->> 'terminal', runs.last_terminal) = 'RUN_ERROR' THEN 'error'
            ELSE 'finished' END
    -- Re-checked on the newest row version after waiting for its lock.
    WHERE runs.run_id = ANY(${run_ids}::text[]) AND runs.closed_at IS NULL
      AND (NOT {r} ? 'expected' OR runs.last_seq = ({r} ->> 'expected')::bigint - 1)
    RETURNING runs.run_id, runs.last_seq - ({r} ->> 'n')::bigint AS base, runs.last_seq,
        {r} ? 'close' AS close
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
# $1-$6 the events' columns (each event names its run), $7 the requests, $8 their run ids.
APPEND = f"""
WITH {_upd(7, 8)},
bases AS (SELECT jsonb_object_agg(run_id, base) AS m FROM upd),
ins AS (
    -- A run the UPDATE refused (closed, missing, not at `expected`) has no base.
    INSERT INTO events (run_id, seq, type, chunk, message_id, tool_call_id)
    SELECT e.run_id, ((SELECT m FROM bases) ->> e.run_id)::bigint + e.ord,
        e.type, e.chunk, e.message_id, e.tool_call_id
    FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[])
        AS e(run_id, ord, type, chunk, message_id, tool_call_id)
    WHERE (SELECT m FROM bases) ? e.run_id
),
{_NOTIFY_ALL}
SELECT run_id, base, (SELECT count(*) FROM note) AS notes FROM upd
"""

# Large groups, in one transaction: BUMP the runs (queueing their NOTIFY, sent
# at commit), then COPY the events: PostgreSQL's bulk path, cheaper per row
# than unnesting arrays.
BUMP = f"""
WITH {_upd(1, 2)},
{_NOTIFY_ALL}
SELECT run_id, base, (SELECT count(*) FROM note) AS notes FROM upd
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
