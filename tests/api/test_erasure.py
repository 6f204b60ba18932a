"""Erasing a thread (`DELETE /v1/threads/{id}`) on one of two replicas sharing a database,
with followers live on both and an append racing the erasure.

Afterwards nothing of the thread's runs is left in any table that has a `run_id` column
but their tombstones (the tables are found in the catalog, so a new per-run table is
checked too), each tombstone's count and chain head are what the test folds itself over
the events it read before (and the appends acknowledged during), every read of the runs
answers 410 erased, the followers have ended, and nothing of another thread changed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from agent_replay import chain
from agent_replay.log import EventLog
from tests.support.servers import Replicas, serve_replicas

KEY = "erasure-admin-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
JSON_TYPE = {"Content-Type": "application/json"}
DEADLINE = 60.0
AGUI = {
    "messages": [{"id": "u-1", "role": "user", "content": "hi"}],
    "tools": [], "context": [], "state": {}, "forwardedProps": {},
}  # fmt: skip


@pytest.fixture(scope="module")
def replicas(database_url: str) -> Iterator[Replicas]:
    with serve_replicas(database_url, {"REPLAY_API_KEYS": f"{KEY}:admin"}) as both:
        yield both


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30, headers=AUTH) as client:
        yield client


def _chunk(run: str, i: int) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{run}", "delta": f"{run}/{i}"}


def _text(run: str, i: int) -> str:
    """The chunk's text as the log stores an object sent compact (checked on the runs'
    first events before it is relied on for the raced ones)."""
    return json.dumps(_chunk(run, i), separators=(",", ":"))


async def _make(http: httpx.AsyncClient, base: str, thread: str, run: str, n: int) -> None:
    r = await http.put(f"{base}/v1/runs/{run}", json={"thread_id": thread})
    assert r.status_code == 201, r.text
    for start in range(0, n, 7):
        events = [_chunk(run, i) for i in range(start, min(n, start + 7))]
        r = await http.post(f"{base}/v1/runs/{run}/events", json={"events": events})
        assert r.status_code == 200, r.text


async def _rows(db: asyncpg.Connection, tables: list[str], runs: list[str]) -> dict[str, Any]:
    """Every row of every per-run table that names one of `runs`, as text, sorted."""
    out = {}
    for table in tables:
        rows = await db.fetch(f"SELECT t::text FROM {table} t WHERE run_id = ANY($1::text[])", runs)
        out[table] = sorted(r[0] for r in rows)
    return out


async def _per_run_tables(db: asyncpg.Connection) -> list[str]:
    """The tables (not `events`' partitions: the parent reads them) with a run id."""
    rows = await db.fetch(
        "SELECT c.table_name FROM information_schema.columns c "
        "JOIN pg_class p ON p.relname = c.table_name "
        "WHERE c.table_schema = 'public' AND c.column_name = 'run_id' AND NOT p.relispartition"
    )
    return sorted(r[0] for r in rows)


async def _follow(
    http: httpx.AsyncClient, url: str, started: asyncio.Event, *, sse: bool = False
) -> list[str]:
    """A follower: what it was sent until its stream ended (NDJSON lines, or SSE frames'
    `data:` joined with their `id:` as the NDJSON line would hold them)."""
    lines: list[str] = []
    accept = "text/event-stream" if sse else "application/x-ndjson"
    async with http.stream("GET", url, headers={"Accept": accept}) as r:
        assert r.status_code == 200
        frame: dict[str, str] = {}
        async for line in r.aiter_lines():
            if sse:
                field, _, value = line.partition(": ")
                if field in ("id", "data"):
                    frame[field] = value
                elif not line and "data" in frame:
                    data = json.loads(frame["data"])
                    key = "run" if "run_id" in data and len(data) == 1 else "chunk"
                    lines.append(json.dumps({"id": frame.get("id", ""), key: data}))
                    started.set()
                if not line:
                    frame = {}
            elif line.strip():
                lines.append(line)
                started.set()
    return lines


async def _race(
    http: httpx.AsyncClient,
    base: str,
    run: str,
    first: int,
    acked: list[int],
    enough: asyncio.Event,
) -> httpx.Response:
    """Appends one at a time until one is refused; the refusal."""
    i = first
    while True:
        r = await http.post(f"{base}/v1/runs/{run}/events", json={"events": [_chunk(run, i)]})
        if r.status_code != 200:
            return r
        acked.append(i)
        if len(acked) >= 3:
            enough.set()
        i += 1


async def test_erase_when_followed_on_two_replicas_and_raced_then_only_exact_tombstones_remain(
    replicas: Replicas, http: httpx.AsyncClient, database_url: str
) -> None:
    a, b = replicas.a, replicas.b
    thread, other = "th-erase", "th-keep"
    gone = [f"{thread}:0", f"{thread}:1", f"{thread}:2", f"{thread}:ds"]
    kept = [f"{other}:0", f"{other}:1"]
    await _make(http, a, thread, gone[0], 30)
    await _make(http, b, thread, gone[1], 5)  # left open: the raced run
    await _make(http, a, thread, gone[2], 300)
    for run, base in zip(kept, (a, b), strict=True):
        await _make(http, base, other, run, 12)
    for run in (gone[0], gone[2], kept[0]):
        r = await http.post(f"{a}/v1/runs/{run}/close", headers=JSON_TYPE)
        assert r.status_code == 200, r.text
        # A closed run's projection is cached (`run_projections`): erased with its run.
        assert (await http.get(f"{a}/v1/runs/{run}/messages")).status_code == 200
    # A Durable Stream joining the thread by its RUN_STARTED: `streams` rows go too.
    r = await http.put(f"{b}/v1/stream/{gone[3]}", headers=JSON_TYPE)
    assert r.status_code == 201, r.text
    started = {"type": "RUN_STARTED", "threadId": thread, "runId": gone[3]}
    r = await http.post(f"{b}/v1/stream/{gone[3]}", json=[started], headers=JSON_TYPE)
    assert r.status_code == 204, r.text

    db = await asyncpg.connect(database_url)
    log = await EventLog.open(database_url)
    try:
        tables = await _per_run_tables(db)
        assert {"runs", "events", "run_projections", "streams", "run_tombstones"} <= set(tables)
        before_gone = await _rows(db, tables, gone)
        assert before_gone["streams"] and before_gone["run_projections"], before_gone
        before_kept = await _rows(db, tables, kept)
        read = {run: await log.read_events(run, 0, 10_000) for run in gone}
        assert [e.chunk for e in read[gone[1]]] == [_text(gone[1], i) for i in range(5)]

        # Followers live on both replicas: the raced run's, a closed-and-delivered
        # thread's (waiting for a next run), and the thread's.
        live = [asyncio.Event() for _ in range(4)]
        followers = [
            asyncio.create_task(_follow(http, f"{a}/v1/runs/{gone[1]}/stream", live[0])),
            asyncio.create_task(_follow(http, f"{b}/v1/runs/{gone[1]}/stream", live[1], sse=True)),
            asyncio.create_task(
                _follow(http, f"{a}/v1/threads/{thread}/stream", live[2], sse=True)
            ),
            asyncio.create_task(_follow(http, f"{b}/v1/threads/{thread}/stream", live[3])),
        ]
        async with asyncio.timeout(DEADLINE):
            for event in live:
                await event.wait()

        acked: list[int] = []
        enough = asyncio.Event()
        racer = asyncio.create_task(_race(http, b, gone[1], 5, acked, enough))
        async with asyncio.timeout(DEADLINE):
            await enough.wait()
        erased = await http.delete(f"{a}/v1/threads/{thread}", params={"reason": "asked, art. 17"})
        assert erased.status_code == 200, erased.text
        async with asyncio.timeout(DEADLINE):
            refused = await racer
            sent = await asyncio.gather(*followers)
        assert refused.status_code == 410 and refused.json()["error"]["code"] == "erased"

        # The tombstones: exact, and nothing else of the thread's runs anywhere.
        body = erased.json()
        expected = {
            run: (len(events), chain.fold((e.seq, e.chunk) for e in events).hex())
            for run, events in read.items()
        }
        raced = [(e.seq, e.chunk) for e in read[gone[1]]]
        raced += [(6 + n, _text(gone[1], i)) for n, i in enumerate(acked)]
        expected[gone[1]] = (len(raced), chain.fold(raced).hex())
        key_id = "key:" + hashlib.sha256(KEY.encode()).hexdigest()[:16]
        assert body["thread_id"] == thread
        assert {t["run_id"]: (t["events"], t["head"]) for t in body["runs"]} == expected
        assert [t["run_id"] for t in body["runs"]] == sorted(gone)
        assert {(t["thread_id"], t["erased_by"], t["reason"]) for t in body["runs"]} == {
            (thread, key_id, "asked, art. 17")
        }
        after_gone = await _rows(db, tables, gone)
        assert {t: rows for t, rows in after_gone.items() if rows and t != "run_tombstones"} == {}
        assert len(after_gone["run_tombstones"]) == len(gone)
        assert await _rows(db, tables, kept) == before_kept

        # The followers ended (the gather returned); each got a prefix of what was stored.
        for lines in sent[:2]:
            deltas = [json.loads(line)["chunk"]["delta"] for line in lines]
            assert deltas == [f"{gone[1]}/{i}" for i in range(len(deltas))]
        for lines in sent[2:]:
            ids = [json.loads(line).get("id", "") for line in lines]
            assert f"{gone[0]}:0" in ids, ids[:5]

        # Every read answers 410 erased, on both replicas; creation on the thread too.
        for base in (a, b):
            for path in (
                f"/v1/runs/{gone[1]}", f"/v1/runs/{gone[1]}/events", f"/v1/runs/{gone[1]}/stream",
                f"/v1/runs/{gone[0]}/messages", f"/v1/runs/{gone[0]}/transcript",
                f"/v1/runs/{gone[0]}/export", f"/v1/threads/{thread}/messages",
                f"/v1/threads/{thread}/transcript", f"/v1/threads/{thread}/stream",
                f"/v1/stream/{gone[3]}?offset=-1", f"/v1/chat/demo?runId={gone[1]}&offset=-1",
                f"/v1/ai-sdk/demo/{thread}/stream", f"/v1/ai-sdk/demo/{thread}/messages",
            ):  # fmt: skip
                r = await http.get(base + path)
                assert (r.status_code, r.json()["error"]["code"]) == (410, "erased"), (path, r.text)
            for run, body_ in ((f"{thread}:new", {"thread_id": thread}), (gone[0], {})):
                r = await http.put(f"{base}/v1/runs/{run}", json=body_)
                assert (r.status_code, r.json()["error"]["code"]) == (410, "erased"), r.text
            r = await http.post(
                f"{base}/v1/runs/{gone[2]}/events", json={"events": [_chunk(gone[2], 0)]}
            )
            assert (r.status_code, r.json()["error"]["code"]) == (410, "erased"), r.text
            # AG-UI: a reconnect to an erased run, and a new run on the erased thread.
            for run, headers in ((gone[1], {"Last-Event-ID": "1"}), (f"{thread}:agui", {})):
                r = await http.post(
                    f"{base}/v1/agents/demo/ag-ui",
                    json={"threadId": thread, "runId": run, **AGUI},
                    headers=headers,
                )
                assert (r.status_code, r.json()["error"]["code"]) == (410, "erased"), r.text
        # A Durable Stream cannot join the erased thread either (and nothing of it is kept).
        r = await http.put(f"{a}/v1/stream/{thread}:ds-new", headers=JSON_TYPE)
        assert r.status_code == 201, r.text
        joining = {"type": "RUN_STARTED", "threadId": thread, "runId": f"{thread}:ds-new"}
        r = await http.post(f"{b}/v1/stream/{thread}:ds-new", json=[joining], headers=JSON_TYPE)
        assert (r.status_code, r.json()["error"]["code"]) == (410, "erased"), r.text
        r = await http.get(f"{a}/v1/stream/{thread}:ds-new?offset=-1")
        assert r.status_code == 200 and r.json() == [], r.text
        # Listed by thread: no run, the tombstones as erased.
        r = await http.get(f"{b}/v1/runs", params={"thread_id": thread})
        assert (r.json()["runs"], r.json()["erased"]) == ([], body["runs"]), r.text
        # Verify answers erased, with the count and head the run had (computed above).
        r = await http.get(f"{a}/v1/runs/{gone[0]}/verify")
        assert r.status_code == 200, r.text
        events, head = expected[gone[0]]
        assert r.json() == {
            "ok": False,
            "events": events,
            "head": head,
            "first_bad_seq": None,
            "reason": "erased",
        }
        r = await http.get(f"{b}/v1/threads/{thread}/verify")
        assert r.status_code == 200 and r.json()["ok"] is False, r.text
        assert {v["run_id"]: (v["reason"], v["events"], v["head"]) for v in r.json()["runs"]} == {
            run: ("erased", *counted) for run, counted in expected.items()
        }
        # Nothing came back by any of those.
        assert await _rows(db, tables, [*gone, f"{thread}:new"]) == after_gone

        # Again, on the other replica: the same answer, nothing changed.
        again = await http.delete(f"{b}/v1/threads/{thread}", params={"reason": "twice"})
        assert (again.status_code, again.json()) == (200, body)
        assert await _rows(db, tables, gone) == after_gone
        assert await _rows(db, tables, kept) == before_kept
        r = await http.get(f"{a}/v1/runs/{kept[1]}/events")
        assert r.status_code == 200 and len(r.json()["events"]) == 12, r.text
    finally:
        await log.close()
        await db.close()


async def test_erase_when_thread_unknown_then_404_thread_not_found(
    replicas: Replicas, http: httpx.AsyncClient
) -> None:
    r = await http.delete(f"{replicas.a}/v1/threads/th-never-made")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "thread_not_found"), r.text
