"""`GET /v1/runs/{id}/verify` and `GET /v1/threads/{id}/verify` over a real socket: runs
appended over HTTP (rows, batch rows, a fork) verify; a chunk changed with plain SQL is
named by seq; an unknown run or thread is a 404 in the one error shape."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

import asyncpg
import httpx

from agent_replay.chain import fold
from agent_replay.config import asyncpg_dsn

MANUAL = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "integrity.md"


def _manuals_chain_head() -> Callable[[Iterable[tuple[int, str]]], bytes]:
    """The manual's standard-library `chain_head`, as an auditor would copy it."""
    (block,) = re.findall(r"```python\n(.*?)```", MANUAL.read_text("utf-8"), re.S)
    scope: dict[str, object] = {}
    exec(block, scope)
    head = scope["chain_head"]
    assert callable(head)
    return head  # type: ignore[return-value]


async def test_verify_when_runs_and_a_fork_appended_over_http_then_each_and_the_thread_ok(
    client: httpx.AsyncClient,
) -> None:
    started = {"type": "RUN_STARTED", "threadId": "th-vh", "runId": "vh-1"}
    await client.post("/v1/runs/vh-1/events", json={"events": [started]})
    await client.post(
        "/v1/runs/vh-1/events", json={"events": [{"type": "M", "i": i} for i in range(40)]}
    )
    await client.post("/v1/runs/vh-1/events", json={"events": [{"type": "M", "i": 40}]})
    fork = await client.post("/v1/runs/vh-1/fork", json={"run_id": "vh-fork", "at_seq": 10})
    assert fork.status_code == 201, fork.text
    await client.post("/v1/runs/vh-fork/events", json={"events": [{"type": "F"}]})
    for run_id, count in (("vh-1", 42), ("vh-fork", 11)):
        r = await client.get(f"/v1/runs/{run_id}/verify")
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["ok"], body["events"], body["first_bad_seq"], body["reason"]) == (
            True, count, None, None)  # fmt: skip
    thread = (await client.get("/v1/threads/th-vh/verify")).json()
    assert thread["thread_id"] == "th-vh" and thread["ok"] is True
    assert {r["run_id"] for r in thread["runs"]} == {"vh-1", "vh-fork"}


async def test_verify_when_a_chunk_changed_by_sql_then_not_ok_naming_its_seq(
    client: httpx.AsyncClient, database_url: str
) -> None:
    await client.post(
        "/v1/runs/vh-2/events", json={"events": [{"type": "M", "i": i} for i in range(3)]}
    )
    intact = (await client.get("/v1/runs/vh-2/verify")).json()
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        rows = await conn.fetch("SELECT seq, chunk FROM events WHERE run_id = 'vh-2'")
        texts = [t for r in sorted(rows) for t in r["chunk"].split("\n")]
        assert intact["head"] == fold(enumerate(texts, start=1)).hex()
        await conn.execute(
            "UPDATE events SET chunk = replace(chunk, '\"i\":2', '\"i\":7') WHERE run_id = 'vh-2'"
        )
    finally:
        await conn.close()
    body = (await client.get("/v1/runs/vh-2/verify")).json()
    assert body == {"ok": False, "events": 2, "head": intact["head"], "first_bad_seq": 3,
                    "reason": "hash_mismatch"}  # fmt: skip


async def test_verify_when_run_or_thread_unknown_then_404_in_the_error_shape(
    client: httpx.AsyncClient,
) -> None:
    for path, code in (("/v1/runs/vh-none/verify", "run_not_found"),
                       ("/v1/threads/th-none/verify", "thread_not_found")):  # fmt: skip
        r = await client.get(path)
        assert (r.status_code, r.json()["error"]["code"]) == (404, code)


async def test_manuals_script_when_run_on_stored_chunks_then_agrees_with_the_services_head(
    client: httpx.AsyncClient, database_url: str
) -> None:
    """Rows and a batch row, unicode and escapes: the manual's few lines give the head the
    service answers, from the chunks as stored."""
    chunks = [{"type": "M", "t": 'é\u2028 "q"', "i": i} for i in range(6)]
    await client.post("/v1/runs/vh-doc/events", json={"events": chunks[:1]})
    await client.post("/v1/runs/vh-doc/events", json={"events": chunks[1:]})
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        rows = await conn.fetch("SELECT seq, n, chunk FROM events WHERE run_id = 'vh-doc'")
    finally:
        await conn.close()
    # A stored chunk never holds a raw newline: a batch row's are its separators.
    texts = [t for r in sorted(rows) for t in r["chunk"].split("\n")]
    assert len(texts) == 6
    body = (await client.get("/v1/runs/vh-doc/verify")).json()
    assert body["ok"] is True
    assert _manuals_chain_head()(enumerate(texts, start=1)).hex() == body["head"]
