-- Every statement the service sends to PostgreSQL, by name (agent_replay.log.sql
-- parses this file once). Each runs as written here: paste one into psql,
-- replace its $n, and it runs the same. The NOTIFY channels are named as psql
-- variables, `:'events_channel'` and `:'readers_channel'`, whose values are
-- agent_replay.log.notifications' CHANNEL and READERS_CHANNEL (their one
-- definition): agent_replay.log.sql fills them in as literals, and psql does
-- once they are `\set`.
--
-- A block starts with `-- name: <name>`; the comment lines right after it say
-- what it does; the statement ends with `;`.


-- name: append
-- One group commit: bump each run's `last_seq`, insert the events numbered
-- from the old value, queue the notification.
--
-- $1 the rows, a jsonb array of [run_id, ord, type, chunk, message_id,
-- tool_call_id, n] (ord counts from 1 per run and is a batch row's last event's,
-- see agent_replay.log.rows), a batch row's chunk null and its place in $2 an eighth
-- element; $2 the batch rows' chunks (text[], null when there are none); $3
-- the requests of the shares with something to record (jsonb keyed by run id,
-- see agent_replay.log.request.RunShare), $4 their run ids; $5-$7 the plain
-- shares (a count and at most an expected seq): their counts (jsonb {run_id:
-- n}), their run ids, and the expected seqs of those that have one (jsonb
-- {run_id: seq}); $8 the committing process (see `note`).
--
-- A group holds one share per run, and most are plain (a token each, from
-- many hosted runs) even when one is not (a tool call, a run's end): those runs
-- take the update of counts and expected seqs alone (`plain`), the others the
-- full one (`rich`), so the one share with something to record does not make
-- every run row of its group pay the full update's lookups. The two touch
-- disjoint run rows; `upd` is both.
--
-- The rows come as one jsonb value rather than seven arrays: binding arrays
-- costs the client per element, and this process's event loop, not the
-- database, is what a busy server runs out of first. A batch row's chunk (many
-- events' JSON joined) goes apart, as text: inside the jsonb every quote in it
-- is escaped by the client and unescaped by the database's jsonb parser, which
-- doubled the database's CPU per event of a large append. A group of any size
-- takes this statement (but for `append_ones`' groups): COPY saved the database
-- less than 15% of its CPU per event at a thousand rows, and cost the client
-- more than twice this (docs/benchmarks.md).
--
-- Each UPDATE finds its runs through `runs`' key only: `(closed_at IS NULL) IS
-- TRUE` is `closed_at IS NULL` in a form no index answers, so the (month,
-- closed_at) index cannot offer to read every open run instead (the commit
-- lanes' connections rule out the other scans: agent_replay.log.writer's
-- COMMIT_SETTINGS).
--
-- The seq is taken under the run row's lock (the UPDATE) and the lock is held
-- to commit, so commit order equals seq order within a run: a reader asking
-- for `seq > N` never skips an event that commits later. `runs` takes part in
-- no join, by design: it is read by its primary key (`run_id = ANY`), the
-- requests looked up from each run row (`$3 -> runs.run_id`). An earlier form
-- joined unnested request arrays with `runs`; a generic plan made while `runs`
-- had no statistics rescanned the arrays once per run row. The rows take their
-- run's base seq from a one-row jsonb map of the updated rows (`bases`), probed
-- per row: a hash join of the rows with the updated rows was cheaper, but the
-- chain's rows are a CTE whose size the planner guesses as one row, and it
-- joined two such sets by a nested loop (rescanning one per row of the other).
--
-- One NOTIFY carries up to 40 runs, a line each (PostgreSQL caps a payload at
-- 8,000 bytes; a line is at most ~150): one per run costs a group dearly. The
-- channel and the line's format are agent_replay.log.notifications'.
--
-- The hash chain (agent_replay.chain, revision 0011_hash_chain): `locked` takes
-- the group's run rows first, in run_id order, and reads their heads and
-- last_seqs as they are once locked (the newest versions); held to commit, those
-- are what the UPDATE below bumps, so `hashed` chains each row from its run's
-- head, numbered as the INSERT numbers it (the window aggregate `chain_rows`,
-- every event of a batch row). The UPDATE takes each run's new head from `heads`
-- (one jsonb map, looked up by key: no join with `runs`); a run without rows in
-- the group (a bare close) keeps its head. A run whose head is
-- NULL is not chained yet: its hashes stay NULL (agent_replay.log.chaining).
WITH locked AS MATERIALIZED (
    SELECT run_id, last_seq, chain_head, run_month FROM runs
    WHERE run_id = ANY($4::text[] || $6::text[]) AND (runs.closed_at IS NULL) IS TRUE
    ORDER BY run_id FOR UPDATE
),
rows_in AS (
    SELECT r ->> 0 AS run_id, (r ->> 1)::bigint AS ord, r ->> 2 AS type,
        coalesce(r ->> 3, ($2::text[])[(r ->> 7)::int]) AS chunk,
        r ->> 4 AS message_id, r ->> 5 AS tool_call_id, (r ->> 6)::int AS n
    FROM jsonb_array_elements($1::jsonb) AS r
),
hashed AS (
    SELECT e.*, l.run_month, chain_rows(l.chain_head, l.last_seq + e.ord, e.chunk, e.n)
        OVER (PARTITION BY e.run_id ORDER BY e.ord ROWS UNBOUNDED PRECEDING) AS hashes
    FROM rows_in e JOIN locked l ON l.run_id = e.run_id
),
heads AS (
    SELECT jsonb_object_agg(run_id, encode(substring(hashes FROM octet_length(hashes) - 31), 'hex'))
        AS m
    FROM (SELECT DISTINCT ON (run_id) run_id, hashes FROM hashed ORDER BY run_id, ord DESC) AS last
),
rich AS (
    UPDATE runs SET
        last_seq = runs.last_seq + (($3::jsonb -> runs.run_id) ->> 'n')::bigint,
        updated_at = now(),
        chain_head = coalesce(decode((SELECT m FROM heads) ->> runs.run_id, 'hex'), runs.chain_head),
        last_terminal = coalesce(($3::jsonb -> runs.run_id) ->> 'terminal', runs.last_terminal),
        error_message = CASE
            WHEN ($3::jsonb -> runs.run_id) ->> 'terminal' = 'RUN_ERROR'
                THEN ($3::jsonb -> runs.run_id) ->> 'error'
            WHEN ($3::jsonb -> runs.run_id) ? 'terminal' THEN NULL
            ELSE runs.error_message END,
        error_code = CASE
            WHEN ($3::jsonb -> runs.run_id) ? 'terminal' THEN ($3::jsonb -> runs.run_id) ->> 'error_code'
            ELSE runs.error_code END,
        closed_at = CASE WHEN ($3::jsonb -> runs.run_id) ? 'close' THEN now() END,
        -- Merged only when a name is new (most calls are of tools the run called
        -- before): the merge is a subquery run per such row.
        tool_names = CASE WHEN ($3::jsonb -> runs.run_id) ? 'tools'
            AND NOT to_jsonb(runs.tool_names) @> (($3::jsonb -> runs.run_id) -> 'tools') THEN ARRAY(
            SELECT DISTINCT t
            FROM unnest(runs.tool_names || ARRAY(
                SELECT jsonb_array_elements_text(($3::jsonb -> runs.run_id) -> 'tools'))) AS t
            ORDER BY t) ELSE runs.tool_names END,
        -- Token sums saturate: one producer's absurd usage must not fail the group.
        prompt_tokens = CASE WHEN ($3::jsonb -> runs.run_id) ? 'prompt_tokens'
            THEN greatest(least(coalesce(runs.prompt_tokens, 0)::numeric
                + (($3::jsonb -> runs.run_id) ->> 'prompt_tokens')::numeric,
                9223372036854775807), -9223372036854775807)::bigint
            ELSE runs.prompt_tokens END,
        completion_tokens = CASE WHEN ($3::jsonb -> runs.run_id) ? 'completion_tokens'
            THEN greatest(least(coalesce(runs.completion_tokens, 0)::numeric
                + (($3::jsonb -> runs.run_id) ->> 'completion_tokens')::numeric,
                9223372036854775807), -9223372036854775807)::bigint
            ELSE runs.completion_tokens END,
        total_tokens = CASE WHEN ($3::jsonb -> runs.run_id) ? 'total_tokens'
            THEN greatest(least(coalesce(runs.total_tokens, 0)::numeric
                + (($3::jsonb -> runs.run_id) ->> 'total_tokens')::numeric,
                9223372036854775807), -9223372036854775807)::bigint
            ELSE runs.total_tokens END,
        status = CASE
            WHEN NOT ($3::jsonb -> runs.run_id) ? 'close' THEN runs.status
            WHEN ($3::jsonb -> runs.run_id) ? 'status' THEN ($3::jsonb -> runs.run_id) ->> 'status'
            WHEN coalesce(($3::jsonb -> runs.run_id) ->> 'terminal', runs.last_terminal) = 'RUN_ERROR'
                THEN 'error'
            ELSE 'finished' END,
        -- Redaction (agent_replay.log.values.Redaction): the matches added per rule, and
        -- the run's held text replaced, in the statement that stores what it redacted.
        redactions = CASE WHEN ($3::jsonb -> runs.run_id) ? 'redactions' THEN (
            SELECT jsonb_object_agg(k, coalesce((runs.redactions ->> k)::bigint, 0)
                + coalesce((($3::jsonb -> runs.run_id) -> 'redactions' ->> k)::bigint, 0))
            FROM jsonb_object_keys(coalesce(runs.redactions, jsonb_build_object())
                || (($3::jsonb -> runs.run_id) -> 'redactions')) AS k)
            ELSE runs.redactions END,
        redaction_hold = CASE WHEN ($3::jsonb -> runs.run_id) ? 'at'
            THEN ($3::jsonb -> runs.run_id) ->> 'hold' ELSE runs.redaction_hold END
    -- Re-checked on the newest row version after waiting for its lock.
    WHERE runs.run_id = ANY($4::text[]) AND (runs.closed_at IS NULL) IS TRUE
      AND (NOT ($3::jsonb -> runs.run_id) ? 'expected'
           OR runs.last_seq = (($3::jsonb -> runs.run_id) ->> 'expected')::bigint - 1)
      -- A redacted append: only onto the run as its hold was read.
      AND (NOT ($3::jsonb -> runs.run_id) ? 'at'
           OR (runs.last_seq = (($3::jsonb -> runs.run_id) ->> 'at')::bigint
               AND runs.redaction_hold IS NOT DISTINCT FROM ($3::jsonb -> runs.run_id) ->> 'was'))
      AND (NOT ($3::jsonb -> runs.run_id) ? 'born'
           OR runs.created_at = (($3::jsonb -> runs.run_id) ->> 'born')::timestamptz)
      -- An idempotent producer's append: only what its stored state admits next, and
      -- only if the run row is as this statement's snapshot saw it (after waiting for
      -- its lock, a changed last_seq means the producer state read below may be old:
      -- every producer change moves last_seq; the caller then asks the guarded path).
      AND (NOT ($3::jsonb -> runs.run_id) ? 'producer' OR (
          runs.last_seq = (SELECT r.last_seq FROM runs r WHERE r.run_id = runs.run_id)
          -- No stored state: only seq 0 starts a producer.
          AND coalesce((
              SELECT CASE
                  WHEN (($3::jsonb -> runs.run_id) -> 'producer' ->> 1)::bigint = p.epoch
                      THEN (($3::jsonb -> runs.run_id) -> 'producer' ->> 2)::bigint = p.seq + 1
                  WHEN (($3::jsonb -> runs.run_id) -> 'producer' ->> 1)::bigint > p.epoch
                      THEN (($3::jsonb -> runs.run_id) -> 'producer' ->> 2)::bigint = 0
                  ELSE false END
              FROM stream_producers p
              WHERE p.run_id = runs.run_id AND p.producer_id = ($3::jsonb -> runs.run_id) -> 'producer' ->> 0
          ), (($3::jsonb -> runs.run_id) -> 'producer' ->> 2)::bigint = 0)))
    RETURNING runs.run_id, runs.last_seq - (($3::jsonb -> runs.run_id) ->> 'n')::bigint AS base,
        runs.last_seq, ($3::jsonb -> runs.run_id) ? 'close' AS close, runs.run_month
),
plain AS (
    UPDATE runs SET
        last_seq = runs.last_seq + ($5::jsonb ->> runs.run_id)::bigint,
        updated_at = now(),
        chain_head = coalesce(decode((SELECT m FROM heads) ->> runs.run_id, 'hex'), runs.chain_head)
    WHERE runs.run_id = ANY($6::text[]) AND (runs.closed_at IS NULL) IS TRUE
      AND (NOT $7::jsonb ? runs.run_id
           OR runs.last_seq = ($7::jsonb ->> runs.run_id)::bigint - 1)
    RETURNING runs.run_id, runs.last_seq - ($5::jsonb ->> runs.run_id)::bigint AS base,
        runs.last_seq, false AS close, runs.run_month
),
upd AS (SELECT * FROM rich UNION ALL SELECT * FROM plain),
bases AS (SELECT jsonb_object_agg(run_id, base) AS m FROM upd),
ins AS (
    -- Each row takes its run's base seq from the run's updated row (`bases`, looked
    -- up by key, as `heads`) and its month (the events' partition key, see
    -- runs.run_month) from its locked row; a run the UPDATE refused (closed, missing,
    -- not at `expected`) has no base, and its rows go nowhere.
    INSERT INTO events (run_id, seq, type, chunk, message_id, tool_call_id, n, run_month, hashes)
    SELECT e.run_id, ((SELECT m FROM bases) ->> e.run_id)::bigint + e.ord, e.type, e.chunk,
        e.message_id, e.tool_call_id, e.n, e.run_month, e.hashes
    FROM hashed AS e
    WHERE (SELECT m FROM bases) ? e.run_id
),
-- The producer's new state, for the runs the UPDATE took (in the same statement).
prod AS (
    INSERT INTO stream_producers (run_id, producer_id, epoch, seq)
    SELECT rich.run_id, s.p ->> 0, (s.p ->> 1)::bigint, (s.p ->> 2)::bigint
    FROM rich, LATERAL (SELECT $3::jsonb -> rich.run_id -> 'producer' AS p) AS s
    WHERE s.p IS NOT NULL
    ON CONFLICT (run_id, producer_id) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq
),
note AS (
    SELECT pg_notify(:'events_channel', string_agg(line, E'\n'))
    FROM (SELECT run_id || ' ' || last_seq || CASE WHEN close THEN ' c' ELSE '' END AS line,
                 (row_number() OVER ()) / 40 AS bucket
          FROM upd) AS l
    -- Only when the group closed a run (every process's close hooks hear of every
    -- close, the committing one's too) or another process listens (see
    -- `listener_lock`); two ranges of the key, as `<>` would scan the table
    -- (which the lanes' settings price out).
    WHERE EXISTS (SELECT FROM rich WHERE close)
       OR EXISTS (SELECT FROM log_listeners WHERE process < $8)
       OR EXISTS (SELECT FROM log_listeners WHERE process > $8)
    GROUP BY bucket
)
SELECT run_id, base, (SELECT count(*) FROM note) AS notes FROM upd;


-- name: append_ones
-- `append` for a group of one chunk for each of at least two runs, a row each,
-- that records nothing but the tools called (a token of each of many runs: a
-- busy log's commonest group, a hosted run's tokens included). Every run's
-- count is one, and the rows come as five columns of delimited text instead of
-- `append`'s jsonb rows: the database then parses no jsonb per row nor looks a
-- count up per run, nor sets up `append`'s full update for no run: the one
-- variant of `append` that saves the database more than 15% of its CPU per
-- event (docs/benchmarks.md), and the client, too, joins five strings instead
-- of encoding a jsonb array.
--
-- A column is its values joined by U+001E; in the two that may be null, a
-- null is U+001F. A chunk's JSON text never holds either raw, and the client
-- sends this statement only when no value holds one (agent_replay.log.request
-- counts them), nor with a single run (`string_to_array` reads an empty text
-- as no element, not as one empty one).
--
-- $1-$5 the run ids, types, chunks, message ids and tool-call ids (a run once
-- each); $6 the expected seqs of the runs that have one (jsonb {run_id: seq});
-- $7 the tools each run called (jsonb {run_id: [name, ...]}, only the runs
-- that called any); $8 the committing process, as `append`'s $8.
--
-- The hash chain as in `append`: each run's one event's hash is its new head.
WITH locked AS MATERIALIZED (
    SELECT run_id, last_seq, chain_head, run_month FROM runs
    WHERE run_id = ANY(string_to_array($1, E'\x1e')) AND (runs.closed_at IS NULL) IS TRUE
    ORDER BY run_id FOR UPDATE
),
hashed AS (
    SELECT e.*, l.run_month,
        sha256(l.chain_head || int8send(l.last_seq + 1) || convert_to(e.chunk, 'UTF8')) AS hash
    FROM unnest(string_to_array($1, E'\x1e'), string_to_array($2, E'\x1e'),
                string_to_array($3, E'\x1e'), string_to_array($4, E'\x1e', E'\x1f'),
                string_to_array($5, E'\x1e', E'\x1f'))
        AS e(run_id, type, chunk, message_id, tool_call_id)
    JOIN locked l ON l.run_id = e.run_id
),
heads AS (
    SELECT jsonb_object_agg(run_id, encode(hash, 'hex')) AS m FROM hashed
),
upd AS (
    UPDATE runs SET
        last_seq = runs.last_seq + 1,
        updated_at = now(),
        chain_head = coalesce(decode((SELECT m FROM heads) ->> runs.run_id, 'hex'), runs.chain_head),
        -- As `append` merges them.
        tool_names = CASE WHEN $7::jsonb ? runs.run_id
            AND NOT to_jsonb(runs.tool_names) @> ($7::jsonb -> runs.run_id) THEN ARRAY(
            SELECT DISTINCT t
            FROM unnest(runs.tool_names || ARRAY(
                SELECT jsonb_array_elements_text($7::jsonb -> runs.run_id))) AS t
            ORDER BY t) ELSE runs.tool_names END
    -- Re-checked on the newest row version after waiting for its lock.
    WHERE runs.run_id = ANY(string_to_array($1, E'\x1e'))
      AND (runs.closed_at IS NULL) IS TRUE
      AND (NOT $6::jsonb ? runs.run_id
           OR runs.last_seq = ($6::jsonb ->> runs.run_id)::bigint - 1)
    RETURNING runs.run_id, runs.last_seq, runs.run_month
),
seqs AS (SELECT jsonb_object_agg(run_id, last_seq) AS m FROM upd),
ins AS (
    -- As `append`'s.
    INSERT INTO events (run_id, seq, type, chunk, message_id, tool_call_id, n, run_month, hashes)
    SELECT e.run_id, ((SELECT m FROM seqs) ->> e.run_id)::bigint, e.type, e.chunk,
        e.message_id, e.tool_call_id, 1, e.run_month, e.hash
    FROM hashed AS e
    WHERE (SELECT m FROM seqs) ? e.run_id
),
note AS (
    SELECT pg_notify(:'events_channel', string_agg(line, E'\n'))
    FROM (SELECT run_id || ' ' || last_seq AS line, (row_number() OVER ()) / 40 AS bucket
          FROM upd) AS l
    -- As `append`'s (no group of this statement closes a run).
    WHERE EXISTS (SELECT FROM log_listeners WHERE process < $8)
       OR EXISTS (SELECT FROM log_listeners WHERE process > $8)
    GROUP BY bucket
)
SELECT run_id, last_seq - 1 AS base, (SELECT count(*) FROM note) AS notes FROM upd;


-- On Citus (agent_replay.log.citus), `append` cannot be one statement on the run's
-- worker: Citus plans a statement of data-modifying CTEs CTE by CTE through the
-- coordinator (each CTE's rows pulled there and pushed back; the pg_notify runs there,
-- and is refused as a void column of an intermediate result), and it refuses STABLE
-- functions applied to a column in an UPDATE (`to_jsonb`, a cast of text to
-- timestamptz), which it cannot evaluate once on the coordinator. So a group of runs
-- of one shard commits as the statements below in one transaction, each touching that
-- shard only: the two UPDATEs, the INSERT of the events numbered from the run rows
-- they updated, the producers' state, and the notification, queued on the coordinator
-- (where every process listens) rather than on the worker the rows went to.

-- name: citus_extension
-- Whether the database has the `citus` extension.
SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus');


-- name: citus_distributed
-- Whether `runs` is distributed (revision 0014_citus); asked only where Citus is, whose
-- catalog this is.
SELECT EXISTS (
    SELECT FROM pg_dist_partition WHERE logicalrelid = to_regclass('runs') AND partmethod = 'h'
);


-- name: citus_shards
-- The shard of each run $1 (Citus's hash of its `run_id`, `runs`' colocation group).
SELECT r AS run_id, get_shard_id_for_distribution_column('runs', r) AS shard
FROM unnest($1::text[]) AS r;


-- name: citus_append_rich
-- `append`'s `rich` UPDATE for Citus, of one run $2: $1 its request (a value of
-- `append`'s $3), $3 its `born` (NULL: none), $4 the tools it called (NULL: none).
-- A run at a time, by `=`, with nothing computed from a column by a function Citus
-- will not evaluate on a worker: a text cast to timestamptz or `to_jsonb` (STABLE),
-- `now()` inside a CASE, a set-returning function over the request in a correlated
-- subquery. The tools merge as `append` merges them.
UPDATE runs SET
    last_seq = runs.last_seq + ($1::jsonb ->> 'n')::bigint,
    updated_at = now(),
    last_terminal = coalesce($1::jsonb ->> 'terminal', runs.last_terminal),
    error_message = CASE
        WHEN $1::jsonb ->> 'terminal' = 'RUN_ERROR'
            THEN $1::jsonb ->> 'error'
        WHEN $1::jsonb ? 'terminal' THEN NULL
        ELSE runs.error_message END,
    error_code = CASE
        WHEN $1::jsonb ? 'terminal' THEN $1::jsonb ->> 'error_code'
        ELSE runs.error_code END,
    -- `now()` outside the CASE: Citus refuses a non-immutable function inside one
    -- (or in a subquery without FROM); plus a NULL interval it is NULL.
    closed_at = now() + CASE WHEN $1::jsonb ? 'close' THEN interval '0' END,
    -- Merged only when a name is new (most calls are of tools the run called
    -- before): the merge is a subquery run per such row.
    tool_names = CASE WHEN $4::text[] IS NOT NULL AND NOT runs.tool_names @> $4::text[]
        THEN ARRAY(SELECT DISTINCT t FROM unnest(runs.tool_names || $4::text[]) AS t ORDER BY t)
        ELSE runs.tool_names END,
    -- Token sums saturate: one producer's absurd usage must not fail the group.
    prompt_tokens = CASE WHEN $1::jsonb ? 'prompt_tokens'
        THEN greatest(least(coalesce(runs.prompt_tokens, 0)::numeric
            + ($1::jsonb ->> 'prompt_tokens')::numeric,
            9223372036854775807), -9223372036854775807)::bigint
        ELSE runs.prompt_tokens END,
    completion_tokens = CASE WHEN $1::jsonb ? 'completion_tokens'
        THEN greatest(least(coalesce(runs.completion_tokens, 0)::numeric
            + ($1::jsonb ->> 'completion_tokens')::numeric,
            9223372036854775807), -9223372036854775807)::bigint
        ELSE runs.completion_tokens END,
    total_tokens = CASE WHEN $1::jsonb ? 'total_tokens'
        THEN greatest(least(coalesce(runs.total_tokens, 0)::numeric
            + ($1::jsonb ->> 'total_tokens')::numeric,
            9223372036854775807), -9223372036854775807)::bigint
        ELSE runs.total_tokens END,
    status = CASE
        WHEN NOT $1::jsonb ? 'close' THEN runs.status
        WHEN $1::jsonb ? 'status' THEN $1::jsonb ->> 'status'
        WHEN coalesce($1::jsonb ->> 'terminal', runs.last_terminal) = 'RUN_ERROR'
            THEN 'error'
        ELSE 'finished' END,
    -- The run's held text, as `append` replaces it (its counts: `append_redactions`).
    redaction_hold = CASE WHEN $1::jsonb ? 'at' THEN $1::jsonb ->> 'hold'
        ELSE runs.redaction_hold END
-- Re-checked on the newest row version after waiting for its lock.
WHERE runs.run_id = $2 AND (runs.closed_at IS NULL) IS TRUE
  AND (NOT $1::jsonb ? 'expected'
       OR runs.last_seq = ($1::jsonb ->> 'expected')::bigint - 1)
  AND (NOT $1::jsonb ? 'at'
       OR (runs.last_seq = ($1::jsonb ->> 'at')::bigint
           AND runs.redaction_hold IS NOT DISTINCT FROM $1::jsonb ->> 'was'))
  AND ($3::timestamptz IS NULL OR runs.created_at = $3::timestamptz)
  -- An idempotent producer's append: only what its stored state admits next, and
  -- only if the run row is as this statement's snapshot saw it (after waiting for
  -- its lock, a changed last_seq means the producer state read below may be old:
  -- every producer change moves last_seq; the caller then asks the guarded path).
  AND (NOT $1::jsonb ? 'producer' OR (
      runs.last_seq = (SELECT r.last_seq FROM runs r WHERE r.run_id = $2)
      -- No stored state: only seq 0 starts a producer.
      AND coalesce((
          SELECT CASE
              WHEN ($1::jsonb -> 'producer' ->> 1)::bigint = p.epoch
                  THEN ($1::jsonb -> 'producer' ->> 2)::bigint = p.seq + 1
              WHEN ($1::jsonb -> 'producer' ->> 1)::bigint > p.epoch
                  THEN ($1::jsonb -> 'producer' ->> 2)::bigint = 0
              ELSE false END
          FROM stream_producers p
          WHERE p.run_id = $2 AND p.producer_id = $1::jsonb -> 'producer' ->> 0
      ), ($1::jsonb -> 'producer' ->> 2)::bigint = 0)))
RETURNING runs.run_id, runs.last_seq - ($1::jsonb ->> 'n')::bigint AS base,
    runs.last_seq, $1::jsonb ? 'close' AS close, runs.run_month;


-- name: citus_append_plain
-- `append`'s `plain` UPDATE for Citus: $1-$3 `append`'s $5-$7.
UPDATE runs SET
    last_seq = runs.last_seq + ($1::jsonb ->> runs.run_id)::bigint,
    updated_at = now()
WHERE runs.run_id = ANY($2::text[]) AND (runs.closed_at IS NULL) IS TRUE
  AND (NOT $3::jsonb ? runs.run_id
       OR runs.last_seq = ($3::jsonb ->> runs.run_id)::bigint - 1)
RETURNING runs.run_id, runs.last_seq - ($1::jsonb ->> runs.run_id)::bigint AS base,
    runs.last_seq, false AS close, runs.run_month;


-- name: citus_append_events
-- The events of a Citus group's runs $4 (those its UPDATEs took, in this transaction),
-- numbered from each run's `last_seq` as updated less its count in $3 (jsonb
-- {run_id: n}): $1 and $2 `append`'s. The rows come from a read of `runs` by its
-- key, so Citus sends the whole statement to the runs' shard (each run's rows
-- joined to it by run id). Computed from the parameters alone, it would plan it
-- "through the coordinator": the rows copied to the worker by other connections
-- than the UPDATE's, and the transaction committed in two phases.
--
-- The hash chain as `append` computes it: the run row holds the head from before the
-- group (the UPDATEs above leave it), the rows numbered as inserted, the same window
-- aggregate (revision 0014_citus puts `chain_rows` on every node), which Citus runs
-- on the worker as its window is partitioned by the distribution column.
-- `citus_append_heads` then moves the heads.
INSERT INTO events (run_id, seq, type, chunk, message_id, tool_call_id, n, run_month, hashes)
SELECT runs.run_id, runs.last_seq - ($3::jsonb ->> runs.run_id)::bigint + e.ord, e.type,
    e.chunk, e.message_id, e.tool_call_id, e.n, runs.run_month,
    chain_rows(runs.chain_head, runs.last_seq - ($3::jsonb ->> runs.run_id)::bigint + e.ord,
               e.chunk, e.n)
        OVER (PARTITION BY runs.run_id ORDER BY e.ord ROWS UNBOUNDED PRECEDING)
FROM runs CROSS JOIN LATERAL (
    SELECT (r ->> 1)::bigint AS ord, r ->> 2 AS type,
        coalesce(r ->> 3, ($2::text[])[(r ->> 7)::int]) AS chunk,
        r ->> 4 AS message_id, r ->> 5 AS tool_call_id, (r ->> 6)::int AS n
    FROM jsonb_array_elements($1::jsonb) AS r
    WHERE r ->> 0 = runs.run_id
) AS e
WHERE runs.run_id = ANY($4::text[]);


-- name: citus_append_heads
-- `append`'s new chain heads for Citus, of runs $1 (those a group's UPDATEs took, after
-- `citus_append_events`): each run's head is the last hash of its row ending at its
-- `last_seq` (a batch row's hashes end with its last event's). A run that row does not
-- hash (not chained yet: NULL) or has no row of its own keeps its head, as in `append`.
-- A join, filtered by $1 on both tables: that is what Citus routes to the runs' one
-- shard (a subquery in SET, or the filter on `runs` alone, reaches every shard).
UPDATE runs SET chain_head = substring(e.hashes FROM octet_length(e.hashes) - 31)
FROM events e
WHERE runs.run_id = ANY($1::text[]) AND e.run_id = ANY($1::text[])
  AND e.run_id = runs.run_id AND e.run_month = runs.run_month AND e.seq = runs.last_seq
  AND e.hashes IS NOT NULL;


-- name: citus_append_producers
-- `append`'s `prod` for Citus: the producers' new state of runs $2 (those
-- `citus_append_rich` updated), from the requests $1; read through `runs` for the
-- same reason as `citus_append_events`.
INSERT INTO stream_producers (run_id, producer_id, epoch, seq)
SELECT runs.run_id, $1::jsonb -> runs.run_id -> 'producer' ->> 0,
    ($1::jsonb -> runs.run_id -> 'producer' ->> 1)::bigint,
    ($1::jsonb -> runs.run_id -> 'producer' ->> 2)::bigint
FROM runs
WHERE runs.run_id = ANY($2::text[]) AND $1::jsonb -> runs.run_id -> 'producer' IS NOT NULL
ON CONFLICT (run_id, producer_id) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq;


-- name: citus_notify
-- A Citus group's notification, on the coordinator: $1 up to 40 lines as `append`'s.
SELECT pg_notify(:'events_channel', $1);


-- name: citus_is_fork
-- Whether run $1 is a fork (its prefix read from its source). On Citus a read whose
-- rows do not start right after its cursor asks this before reading through the
-- fork chain, which Citus cannot run (a recursive CTE over runs of several shards):
-- a run that is no fork simply has nothing there.
SELECT EXISTS (SELECT FROM run_forks WHERE run_id = $1);


-- name: citus_read_events_filtered
-- `read_events_filtered` of a run that is no fork, without the fork chain's recursive
-- CTE (which Citus refuses): the same parameters and columns.
SELECT seq, n, type, chunk, received_at, $2::bigint AS lo, 9223372036854775807::bigint AS hi
FROM events
WHERE run_id = $1 AND run_month = (SELECT run_month FROM runs WHERE run_id = $1) AND seq > $2
  AND (n > 1 OR $4::text[] IS NULL OR type = ANY($4::text[]))
  AND (n > 1 OR $5::text[] IS NULL OR type LIKE ANY($5::text[]))
  AND ($6::timestamptz IS NULL OR received_at >= $6::timestamptz)
  AND ($7::timestamptz IS NULL OR received_at < $7::timestamptz)
ORDER BY seq LIMIT $3;


-- name: citus_read_chained
-- `read_chained` of a run that is no fork, without the fork chain's recursive CTE
-- (which Citus refuses): the same parameters and columns.
SELECT seq, n, chunk, hashes, $2::bigint AS lo, 9223372036854775807::bigint AS hi,
    $1::text AS owner
FROM events
WHERE run_id = $1 AND run_month = (SELECT run_month FROM runs WHERE run_id = $1) AND seq > $2
ORDER BY seq LIMIT $3;


-- name: citus_readers_left
-- `readers_left` without its NOTIFY (Citus cannot run a pg_notify in a statement it
-- plans CTE by CTE): the caller notifies from the coordinator (`citus_notify_readers`).
WITH gone AS (
    DELETE FROM run_readers WHERE holder = $1 AND run_id = ANY($2::text[]) RETURNING run_id
)
UPDATE runs SET reader_left_at = now()
WHERE run_id IN (SELECT run_id FROM gone) AND closed_at IS NULL
  AND NOT EXISTS (
    SELECT 1 FROM run_readers x
    WHERE x.run_id = runs.run_id AND x.holder <> $1
      AND x.seen_at > now() - make_interval(secs => $3))
RETURNING run_id;


-- name: citus_notify_readers
-- The runs nobody reads now, up to 40 lines, on the readers' channel (see `readers_left`).
SELECT pg_notify(:'readers_channel', $1);


-- name: citus_month_state
-- `month_state` on Citus, its check for forks across months apart (`citus_month_forked`):
-- Citus cannot push a subquery of the select list down beside aggregates.
SELECT count(*) AS runs,
       count(*) FILTER (WHERE r.closed_at IS NULL) AS open,
       count(*) FILTER (WHERE r.closed_at >= $2) AS recent,
       coalesce(sum(r.last_seq - coalesce(f.fork_seq, 0)), 0)::bigint AS events,
       min(r.closed_at) AS oldest, max(r.closed_at) AS newest
FROM runs r LEFT JOIN run_forks f ON f.run_id = r.run_id
WHERE r.run_month = $1;


-- name: citus_month_forked
-- `month_state`'s `forked` on Citus: whether a run of another month forks from one of
-- month $1's. The forks of the month's runs first (`run_forks` is on every node, so
-- joined to `runs` by its shard key), then their own months: one join of two runs
-- through `run_forks` would join on other keys than the shards', which Citus runs only
-- by repartitioning every shard (seconds a month).
WITH forks AS (
    SELECT g.run_id FROM run_forks g JOIN runs s ON s.run_id = g.source_run_id
    WHERE s.run_month = $1
)
SELECT EXISTS (
    SELECT 1 FROM runs c WHERE c.run_id IN (SELECT run_id FROM forks) AND c.run_month <> $1
) AS forked;


-- name: run_states
-- Each run's high-water mark, whether it is closed, and when it was made. $1 run ids.
SELECT run_id, last_seq, closed_at IS NOT NULL AS closed, created_at
FROM runs WHERE run_id = ANY($1::text[]);


-- name: stored_range
-- The rows holding seqs $2..$3 of run $1 (a retry's `expected_seq` check).
-- Like every per-run read of `events`, it names the run's month (from its
-- row), so it reads the run's partition only: the subquery is an InitPlan
-- and the executor prunes the other partitions, in generic plans too.
-- A batch row may hold seqs past $3: `seq < $3 + 256` (agent_replay.log.rows.BATCH_MAX)
-- bounds the index range, written with $3 typed bigint (alone, `$3 + 256` makes
-- PostgreSQL take $3 for an integer) and capped so the sum cannot overflow;
-- `seq - n < $3` keeps the rows starting by $3.
SELECT seq, n, chunk FROM events
WHERE run_id = $1 AND seq >= $2 AND seq - n < $3
  AND seq < least($3::bigint, 9223372036854775551) + 256
  AND run_month = (SELECT run_month FROM runs WHERE run_id = $1)
ORDER BY seq;


-- name: create_run_if_missing
-- A run made by its first append. $1 run id, $2 thread id. On a thread, as
-- `create_run` (which says why): under the thread's lock, stamped after it,
-- and announced on the threads channel.
WITH lock AS (
    SELECT pg_advisory_xact_lock(hashtextextended($2, 7340)) WHERE $2::text IS NOT NULL
), made AS (
    INSERT INTO runs (run_id, thread_id, created_at)
    SELECT $1, $2, clock_timestamp() FROM (SELECT count(*) FROM lock) AS locked
    ON CONFLICT (run_id) DO NOTHING
    RETURNING thread_id
)
SELECT pg_notify(:'threads_channel', md5(thread_id)) FROM made WHERE thread_id IS NOT NULL;


-- name: create_run
-- A run made explicitly; returns its id only when this call made it.
-- $6, $7 a hosted run's disconnect policy and grace (NULL: not hosted).
--
-- A run on a thread is made under the thread's advisory lock (held to commit)
-- and its `created_at` is read after the lock is taken (`clock_timestamp()`,
-- not the transaction's start): of two runs of one thread, the one with the
-- earlier `(created_at, run_id)` committed first. So a snapshot that sees a
-- run of a thread sees every run ordered before it, and a thread's stream
-- (agent_replay.stream.thread), reading "the next run after R", never finds one
-- later that sorts before a run it already passed. The made run's thread is
-- announced on the threads channel (agent_replay.log.notifications).
WITH lock AS (
    SELECT pg_advisory_xact_lock(hashtextextended($2, 7340)) WHERE $2::text IS NOT NULL
), made AS (
    INSERT INTO runs (run_id, thread_id, agent, metadata, input, on_disconnect, grace_seconds,
                      created_at)
    SELECT $1, $2, $3, $4::jsonb, $5, $6, $7, clock_timestamp()
    FROM (SELECT count(*) FROM lock) AS locked
    ON CONFLICT (run_id) DO NOTHING
    RETURNING run_id, thread_id
), note AS (
    -- Counted, not selected: Citus plans this statement CTE by CTE on the coordinator
    -- (where the lock and the NOTIFY must be) and refuses a CTE with a void column.
    SELECT count(pg_notify(:'threads_channel', md5(thread_id))::text)
    FROM made WHERE thread_id IS NOT NULL
)
SELECT run_id FROM made, (SELECT count(*) FROM note) AS noted;


-- name: get_run
-- A run's row, as agent_replay.log.eventlog.Run holds it. $1 run id.
SELECT run_id, thread_id, agent, status, last_seq, closed_at IS NOT NULL AS closed,
       created_at, updated_at, closed_at, metadata::text AS metadata, last_terminal,
       error_message, error_code, lease_owner, lease_expires_at, tool_names, prompt_tokens,
       completion_tokens, total_tokens, on_disconnect, grace_seconds, reader_left_at,
       redactions::text AS redactions
FROM runs WHERE run_id = $1;


-- name: read_hold
-- Run $1's redaction hold (agent_replay.log.values.Held) with its last seq, from the
-- primary: what the run's next redacted append is redacted from and guarded by.
SELECT last_seq, closed_at IS NOT NULL AS closed, redaction_hold FROM runs WHERE run_id = $1;


-- name: append_redactions
-- Adds an append's matches per rule to run $1's counts ($2, a JSON object {rule: n}), in
-- the append's transaction, where the append is not `append`: a Citus group's part,
-- after `citus_append_rich` took the run (Citus refuses this set-returning function over
-- a column inside that UPDATE).
UPDATE runs SET redactions = (
    SELECT jsonb_object_agg(k, coalesce((r.redactions ->> k)::bigint, 0)
                               + coalesce(($2::jsonb ->> k)::bigint, 0))
    FROM jsonb_object_keys(coalesce(r.redactions, jsonb_build_object()) || $2::jsonb) AS k
)
FROM runs r
WHERE runs.run_id = $1 AND r.run_id = $1;


-- name: run_input
-- The RunAgentInput a hosted run was started with (JSON text), to tell a retry of the
-- same start from another request under its id. $1 run id.
SELECT input FROM runs WHERE run_id = $1;


-- name: read_events
-- A page of run $1's rows holding events with seq > $2, at most $3 rows (the
-- caller cuts the events, agent_replay.log.rows).
SELECT seq, n, type, chunk, received_at FROM events
WHERE run_id = $1 AND seq > $2 AND run_month = (SELECT run_month FROM runs WHERE run_id = $1)
  -- Only the rows holding seqs up to $2 + $3 (a run's rows are contiguous).
  AND seq - n < least($2, 9223370937343148031) + $3 AND seq < least($2, 9223370937343148031) + $3 + 256
ORDER BY seq LIMIT $3;


-- name: read_page
-- The stream's read: run $1's state and its events after $2 (at most $3) from
-- one snapshot, so every event up to the `last_seq` it reports is visible in
-- it. No row: no such run; one row with a NULL seq: nothing after $2 yet.
SELECT r.last_seq, r.closed, e.seq, e.n, e.chunk
FROM (SELECT last_seq, closed_at IS NOT NULL AS closed, run_month FROM runs WHERE run_id = $1) AS r
LEFT JOIN LATERAL (
    SELECT seq, n, chunk FROM events
    WHERE run_id = $1 AND run_month = r.run_month AND seq > $2 AND seq <= r.last_seq
      -- Only the rows holding seqs up to $2 + $3 (a run's rows are contiguous).
      AND seq - n < least($2, 9223370937343148031) + $3 AND seq < least($2, 9223370937343148031) + $3 + 256
    ORDER BY seq LIMIT $3
) AS e ON true;


-- name: schema_version
-- The migration the schema is at (NULL before the first).
SELECT max(version_num) FROM alembic_version WHERE to_regclass('alembic_version') IS NOT NULL;


-- name: listener_lock_timeout
-- How long a registration waits for `listener_lock` (the append statements in
-- flight take far less) before it fails and is tried again on a new connection.
SET LOCAL lock_timeout = '5s';


-- name: listener_lock
-- The first step of a listener's registration, in its transaction: waits until
-- no append statement that reads `log_listeners` is in flight, and holds off
-- new ones until the registration commits. So an append either committed
-- before the registration did (and the listener's re-check after it reads its
-- events) or reads the registration (and notifies): no commit falls between.
-- A statement takes its locks before it takes its snapshot, so one held off
-- here sees the row once it goes on.
LOCK TABLE log_listeners IN ACCESS EXCLUSIVE MODE;


-- name: listener_register
-- This connection, which LISTENs, hears the log for process $1; the rows of
-- listeners whose backend is gone (a process that died, a dropped connection)
-- are deleted. After `listener_lock`, in the same transaction.
WITH gone AS (
    DELETE FROM log_listeners AS l
    WHERE NOT EXISTS (SELECT FROM pg_stat_activity AS a
                      WHERE a.pid = l.pid AND a.backend_start = l.backend_start)
)
INSERT INTO log_listeners (pid, backend_start, process)
SELECT pid, backend_start, $1 FROM pg_stat_activity WHERE pid = pg_backend_pid()
ON CONFLICT DO NOTHING;


-- name: listener_unregister
-- This connection no longer listens (it is about to close).
DELETE FROM log_listeners WHERE pid = pg_backend_pid();


-- name: probe
-- Does this connection still answer (a LISTEN connection can die silently)?
SELECT 1;


-- name: insert_secret
-- A deployment-wide secret, stored by the first process that needs it (the
-- token signing secret): returns $2 when this call stored it, no row when one
-- was there. $1 name, $2 candidate value.
INSERT INTO service_secrets (name, value) VALUES ($1, $2)
ON CONFLICT (name) DO NOTHING RETURNING value;


-- name: get_secret
-- The stored secret $1. A statement of its own after a lost insert: that one
-- waited for the winner's commit, and only a later snapshot sees its row.
SELECT value FROM service_secrets WHERE name = $1;


-- Leases on hosted runs. A claim is one UPDATE with its condition in the
-- WHERE clause, so two processes never both win. $1 run id, $2 owner,
-- $3 lease seconds.

-- name: claim_lease
-- Take a run's lease if it is free, already ours, or expired.
UPDATE runs SET lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3)
WHERE run_id = $1 AND closed_at IS NULL
  AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at < now())
RETURNING run_id;


-- name: claim_expired_lease
-- Take over a run whose driver's lease ran out (its process died).
UPDATE runs SET lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3)
WHERE run_id = $1 AND closed_at IS NULL AND lease_expires_at < now()
RETURNING run_id;


-- name: renew_lease
-- Extend our lease; no row: the run was closed or taken over.
UPDATE runs SET lease_expires_at = now() + make_interval(secs => $3)
WHERE run_id = $1 AND lease_owner = $2 AND closed_at IS NULL
RETURNING run_id;


-- name: renew_leases
-- `renew_lease` for every run one process drives, in one statement, skipping
-- the run rows locked now (an append committing): it never waits on a lock, so
-- it can be in no deadlock with appends, which lock runs in their own order.
-- The runs returned were renewed; the caller renews each other one alone
-- (`renew_lease`: closed or taken over, or only locked for the moment).
WITH mine AS (
    SELECT run_id FROM runs
    WHERE run_id = ANY($1::text[]) AND lease_owner = $2 AND closed_at IS NULL
    FOR UPDATE SKIP LOCKED
)
UPDATE runs SET lease_expires_at = now() + make_interval(secs => $3)
FROM mine WHERE runs.run_id = mine.run_id
RETURNING runs.run_id;


-- name: expired_leases
-- Open runs whose driver's lease ran out, oldest first; at most $1.
SELECT run_id FROM runs
WHERE closed_at IS NULL AND lease_owner IS NOT NULL AND lease_expires_at < now()
ORDER BY lease_expires_at LIMIT $1;


-- name: orphaned_leases
-- Open runs leased by an earlier life of this instance: owner prefix $1, not owner $2.
SELECT run_id FROM runs
WHERE closed_at IS NULL AND lease_owner LIKE $1 || '%' AND lease_owner <> $2;


-- name: take_over_lease
-- Take an orphan's lease from an earlier life of this instance (owner prefix $4).
UPDATE runs SET lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3)
WHERE run_id = $1 AND closed_at IS NULL AND lease_owner LIKE $4 || '%'
RETURNING run_id;


-- Readers of hosted runs (agent_replay.log.readers): a row per (run, holder
-- process) while the holder has a follower of the run, heartbeated; only runs
-- whose policy watches readers (not `continue`) and still open get one.
-- $1 holder, $2 run ids, $3 how long a heartbeat keeps a row fresh (seconds).

-- name: readers_heartbeat
-- The holder still has followers of runs $2 (or has just got them).
INSERT INTO run_readers (run_id, holder, seen_at)
SELECT r.run_id, $1, now() FROM runs r
WHERE r.run_id = ANY($2::text[]) AND r.closed_at IS NULL
  AND r.on_disconnect IN ('cancel', 'cancel_after')
ON CONFLICT (run_id, holder) DO UPDATE SET seen_at = excluded.seen_at
RETURNING run_id;


-- name: readers_left
-- The holder's last follower of runs $2 left: its rows go, and a run nobody
-- else reads (no fresh row of another holder) records when its last reader left.
-- The UPDATE sees the rows as they were before the DELETE: hence `holder <> $1`.
-- The runs nobody reads now are told to every process on their own channel
-- (agent_replay.log.notifications.READERS_CHANNEL), 40 to a NOTIFY like appends',
-- so their drivers judge at once rather than at their next poll.
WITH gone AS (
    DELETE FROM run_readers WHERE holder = $1 AND run_id = ANY($2::text[]) RETURNING run_id
), unread AS (
    UPDATE runs SET reader_left_at = now()
    WHERE run_id IN (SELECT run_id FROM gone) AND closed_at IS NULL
      AND NOT EXISTS (
        SELECT 1 FROM run_readers x
        WHERE x.run_id = runs.run_id AND x.holder <> $1
          AND x.seen_at > now() - make_interval(secs => $3))
    RETURNING run_id
), note AS (
    SELECT pg_notify(:'readers_channel', string_agg(run_id, E'\n'))
    FROM (SELECT run_id, (row_number() OVER ()) / 40 AS bucket FROM unread) AS l
    GROUP BY bucket
)
SELECT run_id, (SELECT count(*) FROM note) AS notes FROM unread;


-- name: reader_absence
-- Does anyone read run $1, and if not since when? A dead holder's row (not
-- refreshed for $2 seconds) is removed, its last heartbeat taken as the time
-- its reader left. `absent_seconds` counts from the last leave or, for a run
-- never read, from its start.
WITH stale AS (
    DELETE FROM run_readers
    WHERE run_id = $1 AND seen_at <= now() - make_interval(secs => $2)
    RETURNING seen_at
), fresh AS (
    SELECT count(*) AS n FROM run_readers
    WHERE run_id = $1 AND seen_at > now() - make_interval(secs => $2)
), settled AS (
    UPDATE runs SET reader_left_at = (SELECT max(seen_at) FROM stale)
    WHERE run_id = $1 AND (SELECT n FROM fresh) = 0 AND EXISTS (SELECT 1 FROM stale)
      AND (reader_left_at IS NULL OR reader_left_at < (SELECT max(seen_at) FROM stale))
    RETURNING reader_left_at
)
SELECT (SELECT n FROM fresh) AS readers, r.closed_at IS NOT NULL AS closed,
       coalesce((SELECT reader_left_at FROM settled), r.reader_left_at) AS left_at,
       extract(epoch FROM now() - coalesce(
           (SELECT reader_left_at FROM settled), r.reader_left_at, r.created_at))::float8
           AS absent_seconds
FROM runs r WHERE r.run_id = $1;


-- Import (agent_replay.log.bulk): all or nothing, locks in run_id order like the
-- append's, so a load and a group commit never deadlock.

-- name: lock_runs
-- The stored fields of runs $1 an import compares, locked.
SELECT run_id, thread_id, agent, status, created_at, closed_at, last_seq, error_message,
       error_code, metadata::text AS metadata, input
FROM runs WHERE run_id = ANY($1::text[]) ORDER BY run_id FOR UPDATE;


-- name: run_chunks
-- All of run $1's rows, in seq order, with their receive times.
SELECT seq, n, type, chunk, received_at FROM events
WHERE run_id = $1 AND run_month = (SELECT run_month FROM runs WHERE run_id = $1) ORDER BY seq;


-- name: insert_run
-- An imported run with its maintained columns, chain head ($18, its events'
-- hashes computed by agent_replay.log.bulk) and the import's redaction counts
-- ($19, NULL: none); returns its month (its events'
-- partition key: the month of its created_at, as agent_replay.log.partitions.month_of
-- has it) unless it existed.
INSERT INTO runs (run_id, thread_id, agent, status, created_at, updated_at, closed_at, last_seq,
                  error_message, metadata, input, last_terminal, tool_names,
                  prompt_tokens, completion_tokens, total_tokens, error_code, run_month, chain_head,
                  redactions)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $13, $14, $15, $16, $17,
        (date_trunc('month', $5::timestamptz AT TIME ZONE 'UTC'))::date, $18, $19::jsonb)
ON CONFLICT (run_id) DO NOTHING
RETURNING run_month;


-- Retention (agent_replay.log.retention): closed runs older than $1, in small
-- transactions, oldest first via the partial index on `closed_at`.

-- name: pick_prunable
-- The next $2 closed runs to delete, with their sizes.
-- A run that forks still read (agent_replay.log.streams) is kept until they go.
SELECT run_id, last_seq FROM runs
WHERE closed_at IS NOT NULL AND closed_at < $1
  AND NOT EXISTS (SELECT 1 FROM run_forks f WHERE f.source_run_id = runs.run_id)
ORDER BY closed_at, run_id LIMIT $2;


-- name: count_prunable
-- What a prune would delete.
SELECT count(*) AS runs, coalesce(sum(last_seq), 0)::bigint AS events,
       min(closed_at) AS oldest, max(closed_at) AS newest
FROM runs WHERE closed_at IS NOT NULL AND closed_at < $1
  AND NOT EXISTS (SELECT 1 FROM run_forks f WHERE f.source_run_id = runs.run_id);


-- name: delete_event_range
-- A big run's rows up to seq $2, ahead of its run row; returns the events they
-- held (a batch row holding seqs past $2 goes with a later range).
WITH gone AS (
    DELETE FROM events
    WHERE run_id = $1 AND seq <= $2 AND run_month = (SELECT run_month FROM runs WHERE run_id = $1)
    RETURNING n
)
SELECT coalesce(sum(n), 0)::bigint FROM gone;


-- name: delete_runs
-- Runs $1 (still closed before $2), their projections and remaining events.
WITH gone AS (
    DELETE FROM runs WHERE run_id = ANY($1::text[]) AND closed_at < $2 RETURNING run_id, run_month
), projections AS (
    DELETE FROM run_projections WHERE run_id IN (SELECT run_id FROM gone)
), evs AS (
    -- The batch's months as an array (an InitPlan): only their partitions are read.
    DELETE FROM events
    WHERE run_id IN (SELECT run_id FROM gone)
      AND run_month = ANY(ARRAY(SELECT DISTINCT run_month FROM gone))
    RETURNING n
), stream_rows AS (
    -- A Durable Stream's settings, producers and fork link go with its run.
    DELETE FROM streams WHERE run_id IN (SELECT run_id FROM gone)
), producer_rows AS (
    DELETE FROM stream_producers WHERE run_id IN (SELECT run_id FROM gone)
), fork_rows AS (
    DELETE FROM run_forks WHERE run_id IN (SELECT run_id FROM gone)
), reader_rows AS (
    DELETE FROM run_readers WHERE run_id IN (SELECT run_id FROM gone)
)
SELECT (SELECT count(*) FROM gone) AS runs, (SELECT coalesce(sum(n), 0) FROM evs)::bigint AS events;


-- Partitions (agent_replay.log.partitions): `events` is partitioned by its run's
-- month, a partition a month (`events_YYYY_MM`). The DDL that creates,
-- detaches and drops them names a table, so it is built there, not here.

-- name: event_partitions
-- `events`' partitions, and whether one is left half-detached (an interrupted
-- DETACH ... CONCURRENTLY, to be finalized).
SELECT c.relname AS name, i.inhdetachpending AS detaching
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'events'::regclass;

-- name: detached_partitions
-- Tables named as partitions of `events` but detached from it (a prune
-- interrupted between its DETACH and its DROP).
SELECT c.relname AS name FROM pg_class c
WHERE c.relkind = 'r' AND NOT c.relispartition AND c.relname ~ '^events_[0-9][0-9][0-9][0-9]_[0-9][0-9]$'
  AND c.relnamespace = current_schema()::regnamespace;

-- name: run_months
-- The months of runs $1 (their events' partitions).
SELECT DISTINCT run_month FROM runs WHERE run_id = ANY($1::text[]);

-- name: database_month
-- The database's current month, as a new run row gets it.
SELECT (date_trunc('month', now() AT TIME ZONE 'UTC'))::date;

-- name: month_state
-- The runs of month $1: how many, how many still open or closed at or after $2
-- (retention's date), their own events, and whether a run of another month
-- forks from one of them (its prefix is read from this month's partition).
SELECT count(*) AS runs,
       count(*) FILTER (WHERE r.closed_at IS NULL) AS open,
       count(*) FILTER (WHERE r.closed_at >= $2) AS recent,
       coalesce(sum(r.last_seq - coalesce(f.fork_seq, 0)), 0)::bigint AS events,
       min(r.closed_at) AS oldest, max(r.closed_at) AS newest,
       EXISTS (
           SELECT 1 FROM run_forks g
           JOIN runs s ON s.run_id = g.source_run_id
           JOIN runs c ON c.run_id = g.run_id
           WHERE s.run_month = $1 AND c.run_month <> $1
       ) AS forked
FROM runs r LEFT JOIN run_forks f ON f.run_id = r.run_id
WHERE r.run_month = $1;

-- name: delete_month_runs
-- Up to $3 runs of month $1 (closed before $2) with everything but their
-- events, which go with the month's partition: dropped whole once its runs
-- are gone (no per-row WAL, no dead tuples). Runs first: an event a read
-- could reach is never gone before its run.
WITH gone AS (
    DELETE FROM runs WHERE run_id IN (
        SELECT run_id FROM runs WHERE run_month = $1 AND closed_at < $2 LIMIT $3
    ) RETURNING run_id
), projections AS (
    DELETE FROM run_projections WHERE run_id IN (SELECT run_id FROM gone)
), stream_rows AS (
    DELETE FROM streams WHERE run_id IN (SELECT run_id FROM gone)
), producer_rows AS (
    DELETE FROM stream_producers WHERE run_id IN (SELECT run_id FROM gone)
), fork_rows AS (
    DELETE FROM run_forks WHERE run_id IN (SELECT run_id FROM gone)
), reader_rows AS (
    DELETE FROM run_readers WHERE run_id IN (SELECT run_id FROM gone)
)
SELECT count(*) AS runs FROM gone;

-- name: month_has_runs
-- Whether any run of month $1 is there (one imported while its month was dropped).
SELECT EXISTS (SELECT 1 FROM runs WHERE run_month = $1);


-- Durable Streams (agent_replay.log.streams): a stream is a run; its `streams`
-- row holds only what the protocol adds, forks live in `run_forks`, idempotent
-- producers in `stream_producers`.

-- name: stream_lookup
-- A Durable Stream by name, with its run's state: $1 the name, $2 the name as a
-- run id (NULL when it is not a valid one: a run with no `streams` row reads
-- as an application/json stream), $3 touch: a read or write slides a TTL
-- stream's expiry (not a HEAD). A data-modifying CTE runs whether or not the
-- query reads it, and the SELECT sees the row as it was: expiry is judged
-- before the touch. The run's created_at tells one life of a name from the next
-- (a name deleted and created again keeps its run id).
WITH touch AS (
    UPDATE streams s SET touched_at = now()
    WHERE $3 AND s.name = $1 AND s.ttl_seconds IS NOT NULL AND NOT (
    (s.expires_at IS NOT NULL AND s.expires_at <= now())
    OR (s.ttl_seconds IS NOT NULL AND s.touched_at + s.ttl_seconds * interval '1 second' <= now())
)
    RETURNING 1
)
SELECT 
    r.run_id, r.last_seq, r.closed_at IS NOT NULL AS closed,
    s.name IS NOT NULL AS stored, s.content_type, s.ttl_seconds, s.expires_at, s.stream_seq,
    s.closed_by, s.fork_spec, coalesce(s.deleted, false) AS deleted,
    coalesce((
    (s.expires_at IS NOT NULL AND s.expires_at <= now())
    OR (s.ttl_seconds IS NOT NULL AND s.touched_at + s.ttl_seconds * interval '1 second' <= now())
), false) AS expired,
    EXISTS (SELECT 1 FROM run_forks f WHERE f.source_run_id = r.run_id) AS forked,
    (SELECT f.fork_seq FROM run_forks f WHERE f.run_id = r.run_id) AS fork_seq,
    r.created_at
 FROM streams s JOIN runs r ON r.run_id = s.run_id WHERE s.name = $1
UNION ALL
SELECT 
    r.run_id, r.last_seq, r.closed_at IS NOT NULL AS closed,
    s.name IS NOT NULL AS stored, s.content_type, s.ttl_seconds, s.expires_at, s.stream_seq,
    s.closed_by, s.fork_spec, coalesce(s.deleted, false) AS deleted,
    coalesce((
    (s.expires_at IS NOT NULL AND s.expires_at <= now())
    OR (s.ttl_seconds IS NOT NULL AND s.touched_at + s.ttl_seconds * interval '1 second' <= now())
), false) AS expired,
    EXISTS (SELECT 1 FROM run_forks f WHERE f.source_run_id = r.run_id) AS forked,
    (SELECT f.fork_seq FROM run_forks f WHERE f.run_id = r.run_id) AS fork_seq,
    r.created_at

FROM runs r LEFT JOIN streams s ON false
WHERE r.run_id = $2 AND NOT EXISTS (SELECT 1 FROM streams t WHERE t.run_id = $2 OR t.name = $1);

-- name: stream_lock
-- A stream and its run, locked for a change in this transaction. $1 name.
SELECT 
    r.run_id, r.last_seq, r.closed_at IS NOT NULL AS closed,
    s.name IS NOT NULL AS stored, s.content_type, s.ttl_seconds, s.expires_at, s.stream_seq,
    s.closed_by, s.fork_spec, coalesce(s.deleted, false) AS deleted,
    coalesce((
    (s.expires_at IS NOT NULL AND s.expires_at <= now())
    OR (s.ttl_seconds IS NOT NULL AND s.touched_at + s.ttl_seconds * interval '1 second' <= now())
), false) AS expired,
    EXISTS (SELECT 1 FROM run_forks f WHERE f.source_run_id = r.run_id) AS forked,
    (SELECT f.fork_seq FROM run_forks f WHERE f.run_id = r.run_id) AS fork_seq,
    r.created_at, s.deletable
 FROM streams s JOIN runs r ON r.run_id = s.run_id WHERE s.name = $1
FOR UPDATE OF s, r;

-- name: stream_lock_run
-- A run and its stream settings (if any) and its redaction hold, the run row locked.
-- $1 run id.
SELECT 
    r.run_id, r.last_seq, r.closed_at IS NOT NULL AS closed,
    s.name IS NOT NULL AS stored, s.content_type, s.ttl_seconds, s.expires_at, s.stream_seq,
    s.closed_by, s.fork_spec, coalesce(s.deleted, false) AS deleted,
    coalesce((
    (s.expires_at IS NOT NULL AND s.expires_at <= now())
    OR (s.ttl_seconds IS NOT NULL AND s.touched_at + s.ttl_seconds * interval '1 second' <= now())
), false) AS expired,
    EXISTS (SELECT 1 FROM run_forks f WHERE f.source_run_id = r.run_id) AS forked,
    (SELECT f.fork_seq FROM run_forks f WHERE f.run_id = r.run_id) AS fork_seq,
    r.created_at, r.redaction_hold
 FROM runs r LEFT JOIN streams s ON s.run_id = r.run_id WHERE r.run_id = $1
FOR UPDATE OF r;

-- name: stream_insert_stream
-- A stream's settings; nothing when the name (or its run) is taken.
INSERT INTO streams (name, run_id, content_type, ttl_seconds, expires_at, fork_spec)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT DO NOTHING
RETURNING 1;

-- name: stream_adopt_run
-- A run first changed as a stream (its Stream-Seq, a producer's close) gets
-- its `streams` row: application/json, named by its run id.
INSERT INTO streams (name, run_id, content_type) VALUES ($1, $1, 'application/json')
ON CONFLICT DO NOTHING;

-- name: stream_insert_run
-- A stream's run: $2 its last_seq to start from (a fork's point), $3 thread. A
-- fork of $4 is always on its source's thread, as "retry from here" is: its
-- prefix is the source's events, which must not be readable on another thread.
-- On a thread, made as `create_run` makes one (which says why): under the
-- thread's lock (held to the transaction's commit), stamped after it, announced.
WITH thread AS (
    SELECT CASE WHEN $4::text IS NULL THEN $3::text
                ELSE (SELECT thread_id FROM runs WHERE run_id = $4) END AS id
), lock AS (
    SELECT pg_advisory_xact_lock(hashtextextended(id, 7340)) FROM thread WHERE id IS NOT NULL
), made AS (
    INSERT INTO runs (run_id, last_seq, thread_id, created_at)
    SELECT $1, $2, thread.id, clock_timestamp()
    FROM thread, (SELECT count(*) FROM lock) AS locked
    ON CONFLICT (run_id) DO NOTHING RETURNING thread_id
), note AS (
    SELECT pg_notify(:'threads_channel', md5(thread_id)) FROM made WHERE thread_id IS NOT NULL
)
SELECT 1 FROM made, (SELECT count(*) FROM note) AS noted;

-- name: stream_set_thread
-- A run created empty (PUT) takes its thread from its first RUN_STARTED, as a
-- run created by its first append does; never a fork, whose thread is its source's.
-- It joins the thread as a run made now would (`create_run`): under the thread's
-- lock, its `created_at` the moment it joined, announced.
WITH lock AS (
    SELECT pg_advisory_xact_lock(hashtextextended($2, 7340))
), joined AS (
    UPDATE runs SET thread_id = $2, created_at = clock_timestamp()
    FROM (SELECT count(*) FROM lock) AS locked
    WHERE run_id = $1 AND thread_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM run_forks f WHERE f.run_id = $1)
    RETURNING thread_id
)
SELECT pg_notify(:'threads_channel', md5(thread_id)) FROM joined;

-- name: stream_set_deletable
-- The stream a PUT made together with its run: DELETE may remove it.
UPDATE streams SET deletable = true WHERE name = $1;

-- name: stream_source_thread
-- A fork source's thread. $1 run id.
SELECT thread_id FROM runs WHERE run_id = $1;

-- name: stream_run_exists
-- Whether run $1 exists (a DELETE of a name with no stream row).
SELECT EXISTS (SELECT 1 FROM runs WHERE run_id = $1);

-- name: stream_insert_fork
-- Run $1's seqs up to $3 are run $2's.
INSERT INTO run_forks (run_id, source_run_id, fork_seq) VALUES ($1, $2, $3);

-- name: stream_set_stream_seq
-- The last Stream-Seq a writer sent.
UPDATE streams SET stream_seq = $2 WHERE run_id = $1;

-- name: stream_set_closed_by
-- The producer request that closed the stream (its retry is a duplicate).
UPDATE streams SET closed_by = $2 WHERE run_id = $1;

-- name: stream_soft_delete
-- Gone for clients, kept while forks read its prefix.
UPDATE streams SET deleted = true WHERE run_id = $1;

-- name: stream_producer
-- An idempotent producer's state on a run.
SELECT epoch, seq FROM stream_producers WHERE run_id = $1 AND producer_id = $2;

-- name: stream_set_producer
-- An idempotent producer's state after an accepted append.
INSERT INTO stream_producers (run_id, producer_id, epoch, seq) VALUES ($1, $2, $3, $4)
ON CONFLICT (run_id, producer_id) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq;

-- name: stream_delete_run
-- Everything a run is, gone; returns the run it forked from, if any.
WITH runs_gone AS (DELETE FROM runs WHERE run_id = $1),
events_gone AS (
    DELETE FROM events WHERE run_id = $1 AND run_month = (SELECT run_month FROM runs WHERE run_id = $1)
),
producers_gone AS (DELETE FROM stream_producers WHERE run_id = $1),
projections_gone AS (DELETE FROM run_projections WHERE run_id = $1),
stream_gone AS (DELETE FROM streams WHERE run_id = $1),
fork_gone AS (DELETE FROM run_forks WHERE run_id = $1 RETURNING source_run_id)
SELECT source_run_id FROM fork_gone;

-- name: stream_orphaned
-- A soft-deleted source whose last fork went: to be deleted too.
SELECT 1 FROM streams s
WHERE s.run_id = $1 AND s.deleted
  AND NOT EXISTS (SELECT 1 FROM run_forks f WHERE f.source_run_id = $1);

-- name: stream_last_seq
-- A run's high-water mark.
SELECT last_seq FROM runs WHERE run_id = $1;

-- name: stream_read
-- Run $1's events after $2 up to $3, at most $4, a fork's inherited prefix
-- read from its source (and its source's source): each segment of the chain is
-- a run's own events above its fork point (lo), up to its child's (hi; or the
-- child's own bound, when the child forked inside its inherited prefix). A
-- source's batch row may hold seqs past its child's fork point: each row comes
-- with the bounds of its segment (`lo` < seq <= `hi`), cut by agent_replay.log.rows,
-- and the rows are in the order of their first seqs.
WITH RECURSIVE chain(run_id, lo, hi, month) AS (
    SELECT $1::text, coalesce((SELECT fork_seq FROM run_forks WHERE run_id = $1), 0),
        9223372036854775807::bigint, (SELECT run_month FROM runs WHERE run_id = $1)
  UNION ALL
    SELECT f.source_run_id,
        coalesce((SELECT g.fork_seq FROM run_forks g WHERE g.run_id = f.source_run_id), 0),
        least(c.lo, c.hi),
        (SELECT s.run_month FROM runs s WHERE s.run_id = f.source_run_id)
    FROM chain c JOIN run_forks f ON f.run_id = c.run_id
    WHERE c.lo > $2
)
SELECT e.seq, e.n, e.chunk, greatest(c.lo, $2) AS lo, least(c.hi, $3) AS hi
FROM chain c CROSS JOIN LATERAL (
    SELECT seq, n, chunk FROM events
    WHERE events.run_id = c.run_id AND events.run_month = c.month AND seq > greatest(c.lo, $2)
      AND seq < least(c.hi, $3, 9223372036854775551) + 256 AND seq - n < least(c.hi, $3)
      -- Only the rows holding seqs up to $2 + $4 (a run's rows are contiguous).
      AND seq - n < least($2, 9223370937343148031) + $4 AND seq < least($2, 9223370937343148031) + $4 + 256
    ORDER BY seq LIMIT $4
) AS e
ORDER BY e.seq - e.n LIMIT $4;

-- name: stream_read_own
-- Run $1's own rows holding events after $2 up to $3, at most $4 rows (a run that
-- is no fork; the caller cuts the events, agent_replay.log.rows).
SELECT seq, n, chunk FROM events
WHERE run_id = $1 AND seq > $2 AND seq - n < $3
  AND seq < least($3::bigint, 9223372036854775551) + 256
  AND run_month = (SELECT run_month FROM runs WHERE run_id = $1)
  -- Only the rows holding seqs up to $2 + $4 (a run's rows are contiguous).
  AND seq - n < least($2, 9223370937343148031) + $4 AND seq < least($2, 9223370937343148031) + $4 + 256
ORDER BY seq LIMIT $4;

-- name: stream_read_one
-- The row holding seq $3 of run $1 ($2 = $3 - 1), through the fork chain.
WITH RECURSIVE chain(run_id, lo, hi, month) AS (
    SELECT $1::text, coalesce((SELECT fork_seq FROM run_forks WHERE run_id = $1), 0),
        9223372036854775807::bigint, (SELECT run_month FROM runs WHERE run_id = $1)
  UNION ALL
    SELECT f.source_run_id,
        coalesce((SELECT g.fork_seq FROM run_forks g WHERE g.run_id = f.source_run_id), 0),
        least(c.lo, c.hi),
        (SELECT s.run_month FROM runs s WHERE s.run_id = f.source_run_id)
    FROM chain c JOIN run_forks f ON f.run_id = c.run_id
    WHERE c.lo > $2
)
SELECT e.seq, e.n, e.chunk FROM chain c CROSS JOIN LATERAL (
    SELECT seq, n, chunk FROM events
    WHERE events.run_id = c.run_id AND events.run_month = c.month AND seq > greatest(c.lo, $2)
      AND seq < least(c.hi, $3, 9223372036854775551) + 256 AND seq - n < least(c.hi, $3)
    ORDER BY seq LIMIT 1
) AS e
ORDER BY e.seq - e.n LIMIT 1;

-- name: read_events_stitched
-- `read_events` of a fork: run $1's events after $2 (at most $3), its inherited
-- prefix read from its source chain (see stream_read); a run that is no fork
-- reads as with `read_events`. Rows come with their segment's bounds, as in
-- stream_read.
WITH RECURSIVE chain(run_id, lo, hi, month) AS (
    SELECT $1::text, coalesce((SELECT fork_seq FROM run_forks WHERE run_id = $1), 0),
        9223372036854775807::bigint, (SELECT run_month FROM runs WHERE run_id = $1)
  UNION ALL
    SELECT f.source_run_id,
        coalesce((SELECT g.fork_seq FROM run_forks g WHERE g.run_id = f.source_run_id), 0),
        least(c.lo, c.hi),
        (SELECT s.run_month FROM runs s WHERE s.run_id = f.source_run_id)
    FROM chain c JOIN run_forks f ON f.run_id = c.run_id
    WHERE c.lo > $2
)
SELECT e.seq, e.n, e.type, e.chunk, e.received_at, greatest(c.lo, $2) AS lo, c.hi
FROM chain c CROSS JOIN LATERAL (
    SELECT seq, n, type, chunk, received_at FROM events
    WHERE events.run_id = c.run_id AND events.run_month = c.month AND seq > greatest(c.lo, $2)
      AND seq < least(c.hi, 9223372036854775551) + 256 AND seq - n < c.hi
      -- Only the rows holding seqs up to $2 + $3 (a run's rows are contiguous).
      AND seq - n < least($2, 9223370937343148031) + $3 AND seq < least($2, 9223370937343148031) + $3 + 256
    ORDER BY seq LIMIT $3
) AS e
ORDER BY e.seq - e.n LIMIT $3;

-- name: stream_read_own_json
-- A JSON stream's catch-up as one row: the messages after $2 up to $3 (from at
-- most $4 rows, and no more than $5 bytes past the first row) joined with
-- commas, their count and last seq. One text value instead of a record per
-- message: the response body is built in PostgreSQL. A run that is no fork.
-- A batch row (agent_replay.log.rows) is its messages joined with newlines: whole,
-- its newlines become commas; cut by $2 or $3, its part is sliced out.
SELECT coalesce(sum(k), 0)::bigint AS n, max(last) AS last,
    coalesce(string_agg(body, ',' ORDER BY last), '') AS body
FROM (
    SELECT last, k, body, sum(octet_length(body)) OVER (ORDER BY last) - octet_length(body) AS before
    FROM (
        SELECT least(seq, $3) AS last, least(seq, $3) - greatest(seq - n, $2) AS k,
            CASE WHEN n = 1 THEN chunk
                WHEN seq - n >= $2 AND seq <= $3 THEN replace(chunk, E'\n', ',')
                ELSE array_to_string((string_to_array(chunk, E'\n'))
                    [greatest(seq - n, $2) - (seq - n) + 1 : least(seq, $3) - (seq - n)], ',')
            END AS body
        FROM events
        WHERE run_id = $1 AND seq > $2 AND seq - n < $3
          AND seq < least($3::bigint, 9223372036854775551) + 256
          AND run_month = (SELECT run_month FROM runs WHERE run_id = $1)
          -- Only the rows holding seqs up to $2 + $4 (a run's rows are contiguous).
          AND seq - n < least($2, 9223370937343148031) + $4 AND seq < least($2, 9223370937343148031) + $4 + 256
        ORDER BY seq LIMIT $4
    ) AS page
) AS sized
WHERE before < $5;

-- name: stream_read_json
-- `stream_read_own_json` of a fork: the prefix from its source chain (see
-- stream_read), each row cut by its segment's bounds.
WITH RECURSIVE chain(run_id, lo, hi, month) AS (
    SELECT $1::text, coalesce((SELECT fork_seq FROM run_forks WHERE run_id = $1), 0),
        9223372036854775807::bigint, (SELECT run_month FROM runs WHERE run_id = $1)
  UNION ALL
    SELECT f.source_run_id,
        coalesce((SELECT g.fork_seq FROM run_forks g WHERE g.run_id = f.source_run_id), 0),
        least(c.lo, c.hi),
        (SELECT s.run_month FROM runs s WHERE s.run_id = f.source_run_id)
    FROM chain c JOIN run_forks f ON f.run_id = c.run_id
    WHERE c.lo > $2
)
SELECT coalesce(sum(k), 0)::bigint AS n, max(last) AS last,
    coalesce(string_agg(body, ',' ORDER BY last), '') AS body
FROM (
    SELECT last, k, body, sum(octet_length(body)) OVER (ORDER BY last) - octet_length(body) AS before
    FROM (
        SELECT least(e.seq, e.hi) AS last, least(e.seq, e.hi) - greatest(e.seq - e.n, e.lo) AS k,
            CASE WHEN e.n = 1 THEN e.chunk
                WHEN e.seq - e.n >= e.lo AND e.seq <= e.hi THEN replace(e.chunk, E'\n', ',')
                ELSE array_to_string((string_to_array(e.chunk, E'\n'))
                    [greatest(e.seq - e.n, e.lo) - (e.seq - e.n) + 1 : least(e.seq, e.hi) - (e.seq - e.n)], ',')
            END AS body
        FROM chain c CROSS JOIN LATERAL (
            SELECT seq, n, chunk, greatest(c.lo, $2) AS lo, least(c.hi, $3) AS hi FROM events
            WHERE events.run_id = c.run_id AND events.run_month = c.month AND seq > greatest(c.lo, $2)
              AND seq < least(c.hi, $3, 9223372036854775551) + 256 AND seq - n < least(c.hi, $3)
              -- Only the rows holding seqs up to $2 + $4 (a run's rows are contiguous).
              AND seq - n < least($2, 9223370937343148031) + $4 AND seq < least($2, 9223370937343148031) + $4 + 256
            ORDER BY seq LIMIT $4
        ) AS e
        ORDER BY e.seq - e.n LIMIT $4
    ) AS page
) AS sized
WHERE before < $5;


-- Expiry (agent_replay.log.expiry): streams past their TTL or Stream-Expires-At,
-- and soft-deleted ones no fork reads any more, deleted with their runs. A
-- source that forks still read is kept (it answers 404 meanwhile) until its
-- last fork goes; the next sweep takes it then.

-- name: stream_sweepable
-- Up to $1 streams the sweep may delete now, not in $2 (ones that failed this
-- sweep), each with its own events' count (a fork's inherited prefix is not
-- its own), locked. SKIP LOCKED: a stream another sweep or a request holds is
-- left for the next pass, so sweeps never queue behind each other or writers.
SELECT s.run_id, r.last_seq - coalesce(f.fork_seq, 0) AS events
FROM streams s JOIN runs r ON r.run_id = s.run_id
LEFT JOIN run_forks f ON f.run_id = s.run_id
WHERE (
    s.deleted
    OR (s.expires_at IS NOT NULL AND s.expires_at <= now())
    OR (s.ttl_seconds IS NOT NULL AND s.touched_at + s.ttl_seconds * interval '1 second' <= now())
  )
  AND NOT EXISTS (SELECT 1 FROM run_forks g WHERE g.source_run_id = s.run_id)
  AND NOT s.run_id = ANY($2::text[])
ORDER BY s.run_id
LIMIT $1
FOR UPDATE OF s, r SKIP LOCKED;

-- name: stream_sweepable_count
-- What a sweep would delete now (a dry run): streams and their own events.
SELECT count(*) AS streams, coalesce(sum(r.last_seq - coalesce(f.fork_seq, 0)), 0)::bigint AS events
FROM streams s JOIN runs r ON r.run_id = s.run_id
LEFT JOIN run_forks f ON f.run_id = s.run_id
WHERE (
    s.deleted
    OR (s.expires_at IS NOT NULL AND s.expires_at <= now())
    OR (s.ttl_seconds IS NOT NULL AND s.touched_at + s.ttl_seconds * interval '1 second' <= now())
  )
  AND NOT EXISTS (SELECT 1 FROM run_forks g WHERE g.source_run_id = s.run_id);


-- Audit and archive reads (agent_replay.log.lookups): a run's export record, a
-- thread's runs, a run's events filtered by type and receive time, and the cache
-- of closed runs' projections. (The run listing's statement is composed there:
-- its filters pick the index, which one generic plan could not.)

-- name: run_record
-- Run $1's stored fields, as an export describes it.
SELECT run_id, thread_id, agent, status, created_at, updated_at, closed_at, last_seq,
       error_message, error_code, metadata::text AS metadata, input
FROM runs WHERE run_id = $1;

-- name: thread_runs
-- The stream of thread $1: its runs ordered after the position ($2, $3) (all of
-- them when $2 is NULL), by `(created_at, run_id)` (`create_run` says why that
-- order holds), at most $4, each with its state. From the primary: a follower must
-- not miss a run a replica has not replayed.
SELECT run_id, last_seq, closed_at IS NOT NULL AS closed, created_at
FROM runs
WHERE thread_id = $1
  AND ($2::timestamptz IS NULL OR (created_at, run_id) > ($2::timestamptz, $3::text))
ORDER BY created_at, run_id LIMIT $4;

-- name: thread_records
-- `run_record` of each run of thread $1, oldest first.
SELECT run_id, thread_id, agent, status, created_at, updated_at, closed_at, last_seq,
       error_message, error_code, metadata::text AS metadata, input
FROM runs WHERE thread_id = $1 ORDER BY created_at, run_id;

-- name: read_events_filtered
-- Run $1's rows holding events after $2, at most $3, through its fork chain (see
-- stream_read), that may pass the filters: types $4 (exact, NULL: any), LIKE
-- patterns $5 (NULL: any) and receive times $6 <= received_at < $7 (NULL: unbounded).
-- A batch row's types are its events' joined: it is let through the type filters,
-- and its events are tested one by one (agent_replay.log.lookups). The scan stays
-- in the run's primary key range, whatever the filters: no index on `type`, which
-- every append would pay.
WITH RECURSIVE chain(run_id, lo, hi, month) AS (
    SELECT $1::text, coalesce((SELECT fork_seq FROM run_forks WHERE run_id = $1), 0),
        9223372036854775807::bigint, (SELECT run_month FROM runs WHERE run_id = $1)
  UNION ALL
    SELECT f.source_run_id,
        coalesce((SELECT g.fork_seq FROM run_forks g WHERE g.run_id = f.source_run_id), 0),
        least(c.lo, c.hi),
        (SELECT s.run_month FROM runs s WHERE s.run_id = f.source_run_id)
    FROM chain c JOIN run_forks f ON f.run_id = c.run_id
    WHERE c.lo > $2
)
SELECT e.seq, e.n, e.type, e.chunk, e.received_at, greatest(c.lo, $2) AS lo, c.hi
FROM chain c CROSS JOIN LATERAL (
    SELECT seq, n, type, chunk, received_at FROM events
    WHERE events.run_id = c.run_id AND events.run_month = c.month AND seq > greatest(c.lo, $2)
      AND seq < least(c.hi, 9223372036854775551) + 256 AND seq - n < c.hi
      AND (n > 1 OR $4::text[] IS NULL OR type = ANY($4::text[]))
      AND (n > 1 OR $5::text[] IS NULL OR type LIKE ANY($5::text[]))
      AND ($6::timestamptz IS NULL OR received_at >= $6::timestamptz)
      AND ($7::timestamptz IS NULL OR received_at < $7::timestamptz)
    ORDER BY seq LIMIT $3
) AS e
ORDER BY e.seq - e.n LIMIT $3;

-- name: cached_projections
-- The cached projections of runs $1 made with normalization $2 by projector version $3.
SELECT run_id, last_seq, messages FROM run_projections
WHERE run_id = ANY($1::text[]) AND normalize = $2 AND projector_version = $3;

-- name: store_projection
-- A closed run's projection: run $1, normalization $2, at last_seq $3, by projector
-- version $4, the messages $5 (replacing one made before). Not for a run erased
-- since its events were read (agent_replay.log.erasure).
INSERT INTO run_projections (run_id, normalize, last_seq, projector_version, messages)
SELECT $1::text, $2::boolean, $3::bigint, $4::text, $5::text
WHERE NOT EXISTS (SELECT 1 FROM run_tombstones WHERE run_id = $1)
ON CONFLICT (run_id, normalize) DO UPDATE
SET last_seq = excluded.last_seq, projector_version = excluded.projector_version,
    messages = excluded.messages, created_at = excluded.created_at;


-- The hash chain (agent_replay.chain, revision 0011_hash_chain): verification reads
-- (agent_replay.log.reading, agent_replay.log.integrity) and the backfill of runs
-- stored before it (agent_replay.log.chaining).

-- name: chain_state
-- Run $1's high-water mark and chain head (NULL: not chained yet).
SELECT last_seq, chain_head FROM runs WHERE run_id = $1;


-- name: read_chained
-- Run $1's rows holding events after $2 (at most $3 rows) with their hashes, a
-- fork's inherited prefix read from its source chain, as `read_events_stitched`
-- reads them (each row with its segment's bounds and its run). Not bounded by the run's
-- last_seq: a row stored past it is what a verification must see.
WITH RECURSIVE chain(run_id, lo, hi, month) AS (
    SELECT $1::text, coalesce((SELECT fork_seq FROM run_forks WHERE run_id = $1), 0),
        9223372036854775807::bigint, (SELECT run_month FROM runs WHERE run_id = $1)
  UNION ALL
    SELECT f.source_run_id,
        coalesce((SELECT g.fork_seq FROM run_forks g WHERE g.run_id = f.source_run_id), 0),
        least(c.lo, c.hi),
        (SELECT s.run_month FROM runs s WHERE s.run_id = f.source_run_id)
    FROM chain c JOIN run_forks f ON f.run_id = c.run_id
    WHERE c.lo > $2
)
SELECT e.seq, e.n, e.chunk, e.hashes, greatest(c.lo, $2) AS lo, c.hi, c.run_id AS owner
FROM chain c CROSS JOIN LATERAL (
    SELECT seq, n, chunk, hashes FROM events
    WHERE events.run_id = c.run_id AND events.run_month = c.month AND seq > greatest(c.lo, $2)
      AND seq < least(c.hi, 9223372036854775551) + 256 AND seq - n < c.hi
    ORDER BY seq LIMIT $3
) AS e
ORDER BY e.seq - e.n, e.seq LIMIT $3;


-- name: set_chain_head
-- Run $1's chain head, $2 (a fork's: its source's hash at the fork point).
UPDATE runs SET chain_head = $2 WHERE run_id = $1;


-- name: unchained_runs
-- Up to $1 runs not chained yet, locked for the backfill, in run_id order (as the
-- append statements and imports lock theirs: none waits on another in a cycle). A
-- run an append holds is waited for (one group commit); re-checked once locked.
SELECT run_id, last_seq FROM runs WHERE chain_head IS NULL
ORDER BY run_id LIMIT $1 FOR UPDATE;


-- name: count_unchained
-- How many runs the backfill has left.
SELECT count(*) FROM runs WHERE chain_head IS NULL;


-- name: set_row_hashes
-- The backfill's hashes for run $1's rows: $2 their seqs, $3 their hashes.
UPDATE events SET hashes = h.hashes
FROM unnest($2::bigint[], $3::bytea[]) AS h(seq, hashes)
WHERE events.run_id = $1 AND events.seq = h.seq
  AND events.run_month = (SELECT run_month FROM runs WHERE run_id = $1);


-- Erasure (agent_replay.log.erasure): a thread's runs deleted in one
-- transaction, a tombstone left for each (revision 0012_erasure).

-- name: erase_lock_thread
-- The thread's advisory lock, as the statements that put a run on a thread take it
-- (`create_run`): held to commit, so no run joins the thread while it is erased.
SELECT pg_advisory_xact_lock(hashtextextended($1, 7340));

-- name: erase_pick
-- The runs of thread $1 and the forks reading from them (a fork's prefix is its
-- source's events), each run row locked in run id order: an append holding one
-- commits first (and is erased), one after waits and then finds no run.
WITH RECURSIVE erased(run_id) AS (
    SELECT run_id FROM runs WHERE thread_id = $1
  UNION
    SELECT f.run_id FROM run_forks f JOIN erased e ON f.source_run_id = e.run_id
)
SELECT r.run_id, r.thread_id, r.last_seq FROM runs r
WHERE r.run_id IN (SELECT run_id FROM erased)
ORDER BY r.run_id
FOR UPDATE OF r;

-- name: erase_run
-- Run $1 and everything of it (events in its month's partition, projections,
-- Durable Streams rows, producers, fork link, readers) deleted; its tombstone
-- ($2 events, $3 chain head, by $4, reason $5) written; its followers on every
-- process told it is closed (they read, find no run and end) and its thread's that
-- the thread changed. Both notifications are queued to commit.
WITH gone AS (
    DELETE FROM runs WHERE run_id = $1 RETURNING run_id, thread_id, last_seq, run_month
), evs AS (
    DELETE FROM events
    WHERE run_id = $1 AND run_month = (SELECT run_month FROM runs WHERE run_id = $1)
    RETURNING n
), projections AS (
    DELETE FROM run_projections WHERE run_id = $1
), stream_rows AS (
    DELETE FROM streams WHERE run_id = $1
), producer_rows AS (
    DELETE FROM stream_producers WHERE run_id = $1
), fork_rows AS (
    DELETE FROM run_forks WHERE run_id = $1
), reader_rows AS (
    DELETE FROM run_readers WHERE run_id = $1
), tomb AS (
    INSERT INTO run_tombstones (run_id, thread_id, events, head, erased_by, reason)
    SELECT run_id, thread_id, $2, $3, $4, $5 FROM gone
    RETURNING run_id
), note AS (
    SELECT pg_notify(:'events_channel', run_id || ' ' || last_seq || ' c') FROM gone
), thread_note AS (
    SELECT pg_notify(:'threads_channel', md5(thread_id)) FROM gone WHERE thread_id IS NOT NULL
)
SELECT (SELECT count(*) FROM tomb) AS runs, (SELECT coalesce(sum(n), 0) FROM evs)::bigint AS events,
       (SELECT count(*) FROM note) + (SELECT count(*) FROM thread_note) AS notes;

-- name: tombstones_of_thread
-- The tombstones of thread $1's erased runs, in run id order.
SELECT run_id, thread_id, events, head, erased_at, erased_by, reason
FROM run_tombstones WHERE thread_id = $1 ORDER BY run_id;

-- name: tombstones_of_runs
-- The tombstones of runs $1 (those erased), in run id order.
SELECT run_id, thread_id, events, head, erased_at, erased_by, reason
FROM run_tombstones WHERE run_id = ANY($1::text[]) ORDER BY run_id;
