"""kill -9 of the service in the middle of a 10,000-event append: the batch is wholly in
the log or wholly absent, and the producer's retry with expected_seq stores it once."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import IO

import asyncpg
import httpx

from agent_replay.client import Ack, Producer
from tests.faults.conftest import chunk, replica, stored, until

EVENTS = 10_000
ATTEMPTS = 5


async def _writing_backends(conn: asyncpg.Connection) -> list[int]:
    """The service's backends inside a transaction that has written something."""
    rows = await conn.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL"
    )
    return [r["pid"] for r in rows]


async def _gone(conn: asyncpg.Connection, pids: list[int]) -> None:
    """Wait until the killed service's backends have ended (their transactions aborted)."""

    async def ended() -> bool:
        query = "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = ANY($1::int[])"
        return bool(await conn.fetchval(query, pids))

    await until(ended)


async def test_service_killed_9_mid_append_of_10000_then_all_or_nothing_and_retry_once(
    database: str, server_log: IO[bytes]
) -> None:
    conn = await asyncpg.connect(database)
    try:
        for attempt in range(ATTEMPTS):
            run_id = f"big-{attempt}"
            events = [chunk(run_id, n) for n in range(1, EVENTS + 1)]
            with replica(database, server_log) as (base, proc):
                async with httpx.AsyncClient(timeout=60) as http:
                    post = asyncio.create_task(
                        http.post(
                            f"{base}/v1/runs/{run_id}/events",
                            json={"events": events, "expected_seq": 1},
                        )
                    )
                    writing: list[int] = []
                    while not post.done() and not writing:
                        writing = await _writing_backends(conn)
                    if writing:
                        os.kill(proc.pid, signal.SIGKILL)
                        proc.wait()
                    try:
                        answer = await post
                    except httpx.TransportError:
                        answer = None
            if writing:
                await _gone(conn, writing)
            # Events, not rows: a batch row holds `n` of them (agent_replay.log.rows).
            count = await conn.fetchval(
                "SELECT coalesce(sum(n), 0) FROM events WHERE run_id = $1", run_id
            )
            last_seq = await conn.fetchval("SELECT last_seq FROM runs WHERE run_id = $1", run_id)
            # All or nothing, and the run row agrees with its events.
            assert (count, last_seq or 0) in {(0, 0), (EVENTS, EVENTS)}
            if not writing:
                assert answer is not None and answer.status_code == 200
                continue  # committed before we saw it write: try again, faster
            # A new process; the producer retries the very same batch at expected_seq 1.
            with replica(database, server_log) as (base, _):
                async with Producer(base, run_id, next_seq=1, max_batch_events=EVENTS) as p:
                    assert await p.send(*events) == Ack(1, EVENTS)
                async with httpx.AsyncClient(timeout=60) as http:
                    log = await stored(http, base, run_id)
            assert [s for s, _ in log] == list(range(1, EVENTS + 1))
            assert [c for _, c in log] == events
            print(
                f"FIGURES kill -9: the batch was {'stored' if count else 'absent'} after the "
                f"kill; the retry {'found it stored' if count else 'stored it'}, once"
            )
            return
        raise AssertionError(f"no kill landed mid-append in {ATTEMPTS} attempts")
    finally:
        await conn.close()
