"""The SQL of Durable Streams over the log (see `service.log.streams`), in one place.

A stream is a run: its events are the stream's messages (JSON mode) or its
appends (bytes). The `streams` row holds only what the protocol adds (content
type, expiry, writer and producer state, how a fork was asked for); a run with
no such row reads as an `application/json` stream.
"""

_EXPIRED = """(
    (s.expires_at IS NOT NULL AND s.expires_at <= now())
    OR (s.ttl_seconds IS NOT NULL AND s.touched_at + s.ttl_seconds * interval '1 second' <= now())
)"""

_COLUMNS = f"""
    r.run_id, r.last_seq, r.closed_at IS NOT NULL AS closed,
    s.name IS NOT NULL AS stored, s.content_type, s.ttl_seconds, s.expires_at, s.stream_seq,
    s.closed_by, s.fork_spec, coalesce(s.deleted, false) AS deleted,
    coalesce({_EXPIRED}, false) AS expired,
    EXISTS (SELECT 1 FROM run_forks f WHERE f.source_run_id = r.run_id) AS forked,
    (SELECT f.fork_seq FROM run_forks f WHERE f.run_id = r.run_id) AS fork_seq
"""

# $1 the name, $2 the name as a run id (NULL when it is not a valid one), $3 touch:
# a read or write slides a TTL stream's expiry (not a HEAD). A data-modifying
# CTE runs whether or not the query reads it, and the SELECT sees the row as
# it was: expiry is judged before the touch.
LOOKUP = f"""
WITH touch AS (
    UPDATE streams s SET touched_at = now()
    WHERE $3 AND s.name = $1 AND s.ttl_seconds IS NOT NULL AND NOT {_EXPIRED}
    RETURNING 1
)
SELECT {_COLUMNS} FROM streams s JOIN runs r ON r.run_id = s.run_id WHERE s.name = $1
UNION ALL
SELECT {_COLUMNS}
FROM runs r LEFT JOIN streams s ON false
WHERE r.run_id = $2 AND NOT EXISTS (SELECT 1 FROM streams t WHERE t.run_id = $2 OR t.name = $1)
"""

LOCK = f"""
SELECT {_COLUMNS} FROM streams s JOIN runs r ON r.run_id = s.run_id WHERE s.name = $1
FOR UPDATE OF s, r
"""

LOCK_RUN = f"""
SELECT {_COLUMNS} FROM runs r LEFT JOIN streams s ON s.run_id = r.run_id WHERE r.run_id = $1
FOR UPDATE OF r
"""

INSERT_STREAM = """
INSERT INTO streams (name, run_id, content_type, ttl_seconds, expires_at, fork_spec)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT DO NOTHING
RETURNING 1
"""

ADOPT_RUN = """
INSERT INTO streams (name, run_id, content_type) VALUES ($1, $1, 'application/json')
ON CONFLICT DO NOTHING
"""

INSERT_RUN = """
INSERT INTO runs (run_id, last_seq, thread_id) VALUES ($1, $2, $3)
ON CONFLICT (run_id) DO NOTHING RETURNING 1
"""

# A run created empty (PUT) takes its thread from its first RUN_STARTED, as a
# run created by its first append does.
SET_THREAD = "UPDATE runs SET thread_id = $2 WHERE run_id = $1 AND thread_id IS NULL"

INSERT_FORK = "INSERT INTO run_forks (run_id, source_run_id, fork_seq) VALUES ($1, $2, $3)"

SET_STREAM_SEQ = "UPDATE streams SET stream_seq = $2 WHERE run_id = $1"

SET_CLOSED_BY = "UPDATE streams SET closed_by = $2 WHERE run_id = $1"

SOFT_DELETE = "UPDATE streams SET deleted = true WHERE run_id = $1"

PRODUCER = "SELECT epoch, seq FROM stream_producers WHERE run_id = $1 AND producer_id = $2"

SET_PRODUCER = """
INSERT INTO stream_producers (run_id, producer_id, epoch, seq) VALUES ($1, $2, $3, $4)
ON CONFLICT (run_id, producer_id) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq
"""

# Everything a run is, gone; returns the run it forked from, if any.
DELETE_RUN = """
WITH runs_gone AS (DELETE FROM runs WHERE run_id = $1),
events_gone AS (DELETE FROM events WHERE run_id = $1),
producers_gone AS (DELETE FROM stream_producers WHERE run_id = $1),
projections_gone AS (DELETE FROM run_projections WHERE run_id = $1),
stream_gone AS (DELETE FROM streams WHERE run_id = $1),
fork_gone AS (DELETE FROM run_forks WHERE run_id = $1 RETURNING source_run_id)
SELECT source_run_id FROM fork_gone
"""

# A soft-deleted source whose last fork went: collect it too.
ORPHANED = """
SELECT 1 FROM streams s
WHERE s.run_id = $1 AND s.deleted
  AND NOT EXISTS (SELECT 1 FROM run_forks f WHERE f.source_run_id = $1)
"""

LAST_SEQ = "SELECT last_seq FROM runs WHERE run_id = $1"

FORK_OF = "SELECT source_run_id, fork_seq FROM run_forks WHERE run_id = $1"

# A run's events after $2 up to $3, at most $4, a fork's inherited prefix
# read from its source (and its source's source): the chain's segments are
# (own events above lo, up to the child's fork point hi).
READ = """
WITH RECURSIVE chain(run_id, lo, hi) AS (
    SELECT $1::text, coalesce((SELECT fork_seq FROM run_forks WHERE run_id = $1), 0),
        9223372036854775807::bigint
  UNION ALL
    SELECT f.source_run_id,
        coalesce((SELECT g.fork_seq FROM run_forks g WHERE g.run_id = f.source_run_id), 0), c.lo
    FROM chain c JOIN run_forks f ON f.run_id = c.run_id
    WHERE c.lo > $2
)
SELECT e.seq, e.chunk FROM chain c CROSS JOIN LATERAL (
    SELECT seq, chunk FROM events
    WHERE events.run_id = c.run_id AND seq > greatest(c.lo, $2) AND seq <= least(c.hi, $3)
    ORDER BY seq LIMIT $4
) AS e
ORDER BY e.seq LIMIT $4
"""

# A run that is no fork reads its own rows: the plain statement, no chain.
READ_OWN = """
SELECT seq, chunk FROM events WHERE run_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4
"""

# The one row at a seq, through the fork chain (a sub-offset fork slices it).
READ_ONE = READ.replace("$4", "1")
