"""The log on Citus: detected, and appends committed a shard at a time.

A database with the `citus` extension is a Citus coordinator, whose log revision
0014_citus distributed by `run_id` (docs/scale-out.md). The log detects it when it
opens (`installed`); nothing is configured. Everything but the group commit runs
the statements of `queries.sql` as on plain PostgreSQL: each per-run statement
reaches one shard.

The group commit changes in two ways (`Sharded`):

* a group is split by shard (Citus's own hash of each run id, cached) and each
  part commits in a transaction of its own, so a transaction writes on one shard
  and Citus commits it there, never by two-phase commit. Not by worker: Citus
  commits any transaction that modified two shards in two phases, even two shards
  of one worker over one connection (measured, docs/scale-out.md);
* each part runs `citus_append_*` in place of the one `append` statement, which
  Citus cannot run on the run's worker (`queries.sql` says why), and queues its
  notification with `citus_notify` on the coordinator, where every process's
  LISTEN connection is: a `pg_notify` in a statement Citus routes to a worker
  runs on that worker, which no listener hears.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import asyncpg
import orjson

from agent_replay.log import sql
from agent_replay.log.request import Group

__all__ = ["Sharded", "installed"]

_EXTENSION = sql.QUERIES["citus_extension"]
_DISTRIBUTED = sql.QUERIES["citus_distributed"]
_SHARDS = sql.QUERIES["citus_shards"]
_RICH = sql.QUERIES["citus_append_rich"]
_PLAIN = sql.QUERIES["citus_append_plain"]
_EVENTS = sql.QUERIES["citus_append_events"]
_HEADS = sql.QUERIES["citus_append_heads"]
_PRODUCERS = sql.QUERIES["citus_append_producers"]
_REDACTIONS = sql.QUERIES["append_redactions"]
_NOTIFY = sql.QUERIES["citus_notify"]

# Runs per NOTIFY payload, as `append`'s (PostgreSQL caps a payload's size).
_LINES_PER_NOTE = 40
# Runs whose shard is remembered. A run's shard (the hash range its id falls in) stays
# when a rebalance moves shards between workers; only splitting a shard changes it, and
# then a stale entry puts two shards into one part, which Citus commits correctly, in
# two phases.
_CACHED = 100_000

Querier = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy | asyncpg.Pool
T = TypeVar("T")


async def installed(conn: Querier) -> bool:
    """Whether the log is distributed on Citus: the database has the `citus` extension
    and `runs` is a distributed table (revision 0014_citus). Before that revision the
    tables are the coordinator's own and the log uses them as on PostgreSQL."""
    return bool(await conn.fetchval(_EXTENSION)) and bool(await conn.fetchval(_DISTRIBUTED))


class Sharded:
    """The group commit's Citus side: each run's shard, and a part's statements."""

    def __init__(self) -> None:
        self._shards: dict[str, int] = {}

    async def split(self, conn: Querier, appends: Mapping[str, T]) -> list[dict[str, T]]:
        """`appends` (keyed by run id) as one mapping per shard, in their order."""
        missing = [run for run in appends if run not in self._shards]
        if missing:
            if len(self._shards) + len(missing) > _CACHED:
                self._shards.clear()
            for row in await conn.fetch(_SHARDS, missing):
                self._shards[row["run_id"]] = row["shard"]
        parts: dict[int, dict[str, T]] = {}
        for run, value in appends.items():
            parts.setdefault(self._shards[run], {})[run] = value
        return list(parts.values())

    @staticmethod
    async def commit(
        conn: Querier, group: Group, statement_seconds: float | None = None
    ) -> list[tuple[str, int]]:
        """One shard's part, in a transaction of its own (or the caller's): each run's
        (run_id, base) as `append` returns them, for the runs it updated."""
        assert not isinstance(conn, asyncpg.Pool)
        _, (rows, chunks, rich, rich_runs, counts, plain_runs, expected, _) = group.general()
        async with conn.transaction():
            updated: list[Any] = []
            for run in rich_runs:
                share = group.shares[run]
                updated += await conn.fetch(
                    _RICH,
                    orjson.dumps(share.to_json()).decode(),
                    run,
                    share.born,
                    list(share.tools) if share.tools else None,
                    timeout=statement_seconds,
                )
            if plain_runs:
                updated += await conn.fetch(
                    _PLAIN, counts, plain_runs, expected, timeout=statement_seconds
                )
            if not updated:
                return []
            taken = [r["run_id"] for r in updated]
            counts_taken = {run: group.shares[run].count for run in taken}
            await conn.execute(
                _EVENTS,
                rows,
                chunks,
                orjson.dumps(counts_taken).decode(),
                taken,
                timeout=statement_seconds,
            )
            await conn.execute(_HEADS, taken, timeout=statement_seconds)
            producers = [
                r["run_id"] for r in updated if group.shares[r["run_id"]].producer is not None
            ]
            if producers:
                await conn.execute(_PRODUCERS, rich, producers, timeout=statement_seconds)
            for run in taken:
                # A run's matches count in the transaction that stores its redacted text.
                redaction = group.shares[run].redaction
                if redaction is not None and redaction.counts:
                    counts_json = orjson.dumps(dict(redaction.counts)).decode()
                    await conn.execute(_REDACTIONS, run, counts_json, timeout=statement_seconds)
            for payload in _payloads(updated):
                await conn.execute(_NOTIFY, payload, timeout=statement_seconds)
        return [(r["run_id"], r["base"]) for r in updated]


def _payloads(updated: Sequence[Any]) -> list[str]:
    # As `append`'s lines (agent_replay.log.notifications reads them).
    lines = [f"{r['run_id']} {r['last_seq']}{' c' if r['close'] else ''}" for r in updated]
    return [
        "\n".join(lines[i : i + _LINES_PER_NOTE]) for i in range(0, len(lines), _LINES_PER_NOTE)
    ]
