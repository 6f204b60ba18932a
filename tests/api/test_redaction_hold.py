"""Redaction across pushed requests, on two replicas sharing a database: the text a
request leaves held back is kept with the run (`runs.redaction_hold`) and the next
request, on either replica, is redacted from it.

A secret split into any number of deltas sent as separate POSTs (alternating replicas and
bodies, JSON, NDJSON and `?format=ai-sdk`) is in no stored row (read by SQL, the hold
included), no stream encoding, no export and no transcript; clean text is stored as sent;
after every append the run's counts are exactly the markers in its stored rows.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.log import EventLog
from agent_replay.log.streams import NewStream, StreamStore
from tests.agents.conftest import follow
from tests.agents.test_redaction import (
    _everything_served,
    _message_text,
    _no_trace,
    _run_events,
)
from tests.ingest.secrets import FILLER, SECRETS
from tests.support.servers import Replicas, serve_replicas

pytestmark = pytest.mark.asyncio

KEY = "hold-admin-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
NDJSON = {"Content-Type": "application/x-ndjson"}
MARKER = re.compile(r"\[REDACTED:([a-z0-9_]+)\]")
# An OpenAI key's start: what a request ending with it leaves held.
KEY_VALUE = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8t"


def _letters() -> str:
    """A unique id with no digit: a hex one may hold a run of digits that passes Luhn, which
    the `card` rule would then redact wherever the id is content (a run's input)."""
    return uuid.uuid4().hex.translate(_NO_DIGITS)


_NO_DIGITS = str.maketrans("0123456789", "ghijklmnop")


@pytest.fixture(scope="module")
def replicas(database_url: str) -> Iterator[Replicas]:
    agents = {"scripted": "python:tests.agents.pyagents:scripted"}
    extra = {
        "REPLAY_REDACT": "default",
        "REPLAY_API_KEYS": f"{KEY}:admin",
        "REPLAY_AGENTS": json.dumps(agents),
    }
    with serve_replicas(database_url, extra) as both:
        yield both


@pytest.fixture
async def http(replicas: Replicas) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=replicas.a, timeout=30, headers=AUTH) as client:
        yield client


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def _rows_and_counts(db: asyncpg.Connection, run_id: str) -> tuple[str, dict[str, int]]:
    """The run's stored chunks and its counts, read in one snapshot."""
    row = await db.fetchrow(
        "SELECT (SELECT coalesce(string_agg(chunk, E'\\n' ORDER BY seq), '') FROM events"
        " WHERE run_id = $1) AS chunks, redactions::text AS counts FROM runs WHERE run_id = $1",
        run_id,
    )
    assert row is not None
    return row["chunks"], json.loads(row["counts"] or "{}")


async def _hold(db: asyncpg.Connection, run_id: str) -> str | None:
    held: str | None = await db.fetchval(
        "SELECT redaction_hold FROM runs WHERE run_id = $1", run_id
    )
    return held


async def _counted(db: asyncpg.Connection, run_id: str) -> None:
    """The run's counts are the markers in its stored rows: no count late, none short."""
    chunks, counts = await _rows_and_counts(db, run_id)
    assert Counter(MARKER.findall(chunks)) == Counter(counts)


async def _metric(base: str, rule: str) -> float:
    async with httpx.AsyncClient(timeout=10, headers=AUTH) as client:
        text = (await client.get(f"{base}/metrics")).text
    found = re.search(rf'^replay_redactions_total\{{rule="{rule}"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


async def _post(
    http: httpx.AsyncClient, url: str, events: list[dict[str, Any]], ndjson: bool, **query: Any
) -> dict[str, Any]:
    if ndjson:
        body = "\n".join(json.dumps(e) for e in events)
        answer = await http.post(url, content=body, headers=NDJSON, params=query)
    else:
        answer = await http.post(url, json={"events": events, **query})
    assert answer.status_code == 200, answer.text
    out: dict[str, Any] = answer.json()
    return out


@pytest.mark.parametrize("rule", sorted(SECRETS))
@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(FILLER, st.data())
async def test_a_secret_split_over_requests_to_two_replicas_is_stored_nowhere(
    http: httpx.AsyncClient,
    db: asyncpg.Connection,
    replicas: Replicas,
    rule: str,
    clean: str,
    data: st.DataObject,
) -> None:
    value = data.draw(SECRETS[rule])
    run_id = f"r-{_letters()}"
    events = _run_events(value, clean, data, run_id)
    at, turn, last_seq = 0, 0, 0
    while at < len(events):
        size = data.draw(st.integers(1, 3))
        part, at = events[at : at + size], at + size
        base = (replicas.a, replicas.b)[turn % 2]
        turn += 1
        query: dict[str, Any] = {}
        if data.draw(st.booleans()):
            query["expected_seq"] = last_seq + 1
        answer = await _post(http, f"{base}/v1/runs/{run_id}/events", part, turn % 3 == 0, **query)
        last_seq = answer["last_seq"]
        await _counted(db, run_id)
        chunks, _ = await _rows_and_counts(db, run_id)
        assert value not in chunks
    closed = await http.post(f"{replicas.b}/v1/runs/{run_id}/close", json={})
    assert closed.status_code == 200, closed.text

    assert await _hold(db, run_id) is None  # the run's end released everything
    chunks, counts = await _rows_and_counts(db, run_id)
    _no_trace(chunks, value)
    _no_trace(await _everything_served(http, run_id, f"th-{run_id}"), value)
    streamed = await follow(http, run_id)
    assert _message_text(streamed, "m1") == f"it is [REDACTED:{rule}] ok"
    assert _message_text(streamed, "m2") == clean  # byte for byte
    args = "".join(e["delta"] for e in streamed if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"query": f"find [REDACTED:{rule}] now", "n": 1}
    assert all(e.get("delta") != "" for e in streamed)
    assert counts == {rule: 4}


async def test_a_secret_split_over_ai_sdk_appends_is_redacted_whole(
    http: httpx.AsyncClient, db: asyncpg.Connection, replicas: Replicas
) -> None:
    run_id = f"r-{_letters()}"
    said = f"my key is {KEY_VALUE} ok"
    url = "/v1/runs/{}/events?format=ai-sdk"
    first = [{"type": "start"}, {"type": "text-start", "id": "t1"}]
    parts = [said[i : i + 5] for i in range(0, len(said), 5)]
    bodies = [first, *([{"type": "text-delta", "id": "t1", "delta": p}] for p in parts)]
    bodies.append([{"type": "text-end", "id": "t1"}, {"type": "finish"}])
    for turn, body in enumerate(bodies):
        base = (replicas.a, replicas.b)[turn % 2]
        answer = await http.post(base + url.format(run_id), json={"events": body})
        assert answer.status_code == 200, answer.text
        await _counted(db, run_id)
    chunks, counts = await _rows_and_counts(db, run_id)
    assert KEY_VALUE not in chunks and "sk-proj" not in chunks
    assert counts == {"openai_key": 1}
    deltas = [json.loads(c) for c in chunks.splitlines()]
    text = "".join(d["delta"] for d in deltas if d["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "my key is [REDACTED:openai_key] ok"
    assert await _hold(db, run_id) is None


async def test_a_retried_last_append_after_its_hold_moved_adds_nothing_and_answers_the_same(
    http: httpx.AsyncClient, db: asyncpg.Connection, replicas: Replicas
) -> None:
    run_id = f"r-{_letters()}"
    url = f"/v1/runs/{run_id}/events"
    start = [{"type": "RUN_STARTED", "threadId": f"th-{run_id}", "runId": run_id},
             {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "key sk-pr"}]  # fmt: skip
    first = await _post(http, replicas.a + url, start, False, expected_seq=1)
    hold = await _hold(db, run_id)
    assert hold is not None and "sk-pr" in hold  # held, with the run
    assert first == {"run_id": run_id, "first_seq": 1, "last_seq": 2}  # "key " went out
    # Appends that store nothing (all they send held) leave the seq where it was: the next
    # comes at the same expected seq, and one with the same chunks is no retry of it.
    held_whole = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "oj-Ab3"}]
    second = await _post(http, replicas.b + url, held_whole, True, expected_seq=3)
    assert second == {"run_id": run_id, "first_seq": None, "last_seq": 2}
    moved = await _hold(db, run_id)
    assert moved != hold
    again = await _post(http, replicas.a + url, held_whole, False, expected_seq=3)
    assert again == second
    assert await _hold(db, run_id) not in (hold, moved)
    # One that releases what the earlier ones held, retried on each replica.
    rest = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "dEf6hIj9kLm2nOp5qRs8t !"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"}]  # fmt: skip
    third = await _post(http, replicas.b + url, rest, False, expected_seq=3)
    assert third["first_seq"] == 3
    stored_then = await _rows_and_counts(db, run_id)
    for base in (replicas.a, replicas.b):
        retried = await _post(http, base + url, rest, True, expected_seq=3)
        assert retried == third
        assert await _rows_and_counts(db, run_id) == stored_then
    chunks, counts = stored_then
    assert counts == {"openai_key": 1}
    text = "".join(
        json.loads(c).get("delta", "") for c in chunks.splitlines() if '"messageId":"m"' in c
    )
    assert text == "key [REDACTED:openai_key] !"
    # The same seq with another body is not a retry.
    other = await http.post(replicas.a + url, json={"events": rest[:1], "expected_seq": 3})
    assert other.status_code == 409 and other.json()["error"]["code"] == "seq_conflict"
    assert await _rows_and_counts(db, run_id) == stored_then


async def test_concurrent_appends_to_one_run_from_two_replicas_are_all_stored_and_redacted(
    http: httpx.AsyncClient, db: asyncpg.Connection, replicas: Replicas
) -> None:
    run_id = f"r-{_letters()}"
    url = f"/v1/runs/{run_id}/events"
    await _post(http, replicas.a + url, [{"type": "RUN_STARTED", "threadId": "th",
                                          "runId": run_id}], False)  # fmt: skip
    said = {f"m{i}": f"mail {i} is bob{i}@example.com, key {KEY_VALUE}{i} end" for i in range(6)}

    async def send(message: str, text: str, shift: int) -> None:
        for n, start in enumerate(range(0, len(text), 4)):
            delta = {"type": "TEXT_MESSAGE_CONTENT", "messageId": message,
                     "delta": text[start : start + 4]}  # fmt: skip
            base = (replicas.a, replicas.b)[(n + shift) % 2]
            await _post(http, base + url, [delta], n % 2 == 0)
        end = {"type": "TEXT_MESSAGE_END", "messageId": message}
        await _post(http, (replicas.a, replicas.b)[shift % 2] + url, [end], False)

    await asyncio.gather(*(send(m, t, i) for i, (m, t) in enumerate(said.items())))
    chunks, counts = await _rows_and_counts(db, run_id)
    assert counts == {"email": 6, "openai_key": 6}
    assert Counter(MARKER.findall(chunks)) == Counter(counts)
    events = [json.loads(c) for c in chunks.splitlines()]
    for message in said:
        text = "".join(e.get("delta", "") for e in events if e.get("messageId") == message)
        i = message[1:]
        assert text == f"mail {i} is [REDACTED:email], key [REDACTED:openai_key] end"
    assert "example.com" not in chunks and "sk-proj" not in chunks
    assert await _hold(db, run_id) is None


async def test_held_text_then_close_is_released_stored_and_counted(
    http: httpx.AsyncClient, db: asyncpg.Connection, replicas: Replicas
) -> None:
    run_id = f"r-{_letters()}"
    url = f"/v1/runs/{run_id}/events"
    await _post(http, replicas.a + url, [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m",
                                          "delta": f"here: {KEY_VALUE}"}], False)  # fmt: skip
    assert await _hold(db, run_id) is not None
    chunks, counts = await _rows_and_counts(db, run_id)
    assert "sk-proj" not in chunks and not counts
    before = await _metric(replicas.b, "openai_key")
    closed = await http.post(f"{replicas.b}/v1/runs/{run_id}/close", json={})
    assert closed.status_code == 200, closed.text
    assert closed.json()["closed"] is True
    assert closed.json()["redactions"] == {"openai_key": 1}
    assert await _hold(db, run_id) is None
    await _counted(db, run_id)
    chunks, counts = await _rows_and_counts(db, run_id)
    text = "".join(json.loads(c)["delta"] for c in chunks.splitlines())
    assert text == "here: [REDACTED:openai_key]"
    assert await _metric(replicas.b, "openai_key") == before + 1
    # Closing again: a no-op, nothing released twice.
    again = await http.post(f"{replicas.a}/v1/runs/{run_id}/close", json={})
    assert again.status_code == 200
    assert await _rows_and_counts(db, run_id) == (chunks, counts)


async def test_held_text_then_close_true_on_the_append_is_released_before_the_close(
    http: httpx.AsyncClient, db: asyncpg.Connection, replicas: Replicas
) -> None:
    run_id = f"r-{_letters()}"
    url = f"/v1/runs/{run_id}/events"
    head = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"a {KEY_VALUE[:10]}"}
    await _post(http, replicas.a + url, [head], False)
    tail = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": KEY_VALUE[10:]}
    last = await _post(http, replicas.b + url, [tail], True, close="true")
    chunks, counts = await _rows_and_counts(db, run_id)
    assert counts == {"openai_key": 1} and "sk-proj" not in chunks
    assert last["last_seq"] == len(chunks.splitlines())
    assert await _hold(db, run_id) is None
    assert (await http.get(f"/v1/runs/{run_id}")).json()["closed"] is True


async def test_a_refused_append_counts_nothing_on_the_run_or_in_metrics(
    http: httpx.AsyncClient, db: asyncpg.Connection, replicas: Replicas
) -> None:
    run_id = f"r-{_letters()}"
    url = f"/v1/runs/{run_id}/events"
    await _post(http, replicas.a + url, [{"type": "RUN_STARTED", "threadId": "t",
                                          "runId": run_id}], False)  # fmt: skip
    before = await _metric(replicas.a, "email")
    said = [{"type": "CUSTOM", "name": "n", "value": "bob@example.com"}]
    refused = await http.post(replicas.a + url, json={"events": said, "expected_seq": 9})
    assert refused.status_code == 409
    assert await _metric(replicas.a, "email") == before
    assert (await _rows_and_counts(db, run_id))[1] == {}
    await _post(http, replicas.a + url, said, False, expected_seq=2)
    assert await _metric(replicas.a, "email") == before + 1
    await _counted(db, run_id)


async def test_erasure_and_prune_leave_no_hold(
    http: httpx.AsyncClient, db: asyncpg.Connection, replicas: Replicas, database_url: str
) -> None:
    erased, pruned = f"r-{_letters()}", f"r-{_letters()}"
    held = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"x {KEY_VALUE}"}]
    for run_id in (erased, pruned):
        made = await http.put(f"/v1/runs/{run_id}", json={"thread_id": f"th-{run_id}"})
        assert made.status_code == 201, made.text
        await _post(http, f"/v1/runs/{run_id}/events", held, False, expected_seq=1)
        assert await _hold(db, run_id) is not None
    gone = await http.delete(f"{replicas.b}/v1/threads/th-{erased}", params={"reason": "test"})
    assert gone.status_code == 200, gone.text
    assert await db.fetchval("SELECT count(*) FROM runs WHERE run_id = $1", erased) == 0
    # The pruned run closed (what it held released) with the producer's retry key kept.
    await _post(http, f"/v1/runs/{pruned}/events", [], False, expected_seq=2, close=True)
    assert await _hold(db, pruned) is not None
    log = await EventLog.open(database_url)
    try:
        await log.prune(datetime.now(UTC) + timedelta(seconds=1), whole_months=False)
    finally:
        await log.close()
    assert await db.fetchval("SELECT count(*) FROM runs WHERE run_id = $1", pruned) == 0
    # Nothing of the held text in any table.
    for table in await db.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        " AND table_type = 'BASE TABLE'"
    ):
        name = table["table_name"]
        query = f'SELECT count(*) FROM "{name}" t WHERE t::text LIKE $1'
        rows = await db.fetchval(query, "%sk-proj%")
        assert rows == 0, name


async def test_durable_streams_json_messages_count_in_the_append_that_stores_them(
    http: httpx.AsyncClient, db: asyncpg.Connection, replicas: Replicas
) -> None:
    name = f"ds-{_letters()}"
    json_type = {"Content-Type": "application/json"}
    made = await http.put(f"{replicas.a}/v1/stream/{name}", headers=json_type)
    assert made.status_code == 201, made.text
    said = [{"type": "CUSTOM", "name": "n", "value": "mail bob@example.com"}, {"type": "X"}]
    before = [await _metric(base, "email") for base in (replicas.a, replicas.b)]
    plain = await http.post(f"{replicas.a}/v1/stream/{name}", headers=json_type, json=said)
    assert plain.status_code == 204, plain.text
    await _counted(db, name)
    # A producer's append (the guarded path on a replica that does not know the stream yet,
    # the group commit on one that does), then its retry: counted once.
    send = {**json_type, "Producer-Id": "p", "Producer-Epoch": "0"}
    for seq, base in enumerate((replicas.b, replicas.a)):
        headers = {**send, "Producer-Seq": str(seq)}
        first = await http.post(f"{base}/v1/stream/{name}", headers=headers, json=said)
        assert first.status_code == 200, first.text
        again = await http.post(f"{base}/v1/stream/{name}", headers=headers, json=said)
        assert again.status_code == 204, again.text
        await _counted(db, name)
    chunks, counts = await _rows_and_counts(db, name)
    assert counts == {"email": 3}
    assert "bob@example.com" not in chunks
    after = [await _metric(base, "email") for base in (replicas.a, replicas.b)]
    assert sum(after) - sum(before) == 3


async def _stream_messages(http: httpx.AsyncClient, name: str) -> list[dict[str, Any]]:
    """Every message the stream serves, read from its start."""
    messages: list[dict[str, Any]] = []
    offset = "-1"
    while True:
        page = await http.get(f"/v1/stream/{name}", params={"offset": offset})
        assert page.status_code == 200, page.text
        messages += page.json()
        offset = page.headers["Stream-Next-Offset"]
        if page.headers.get("Stream-Up-To-Date") == "true":
            return messages


@pytest.mark.parametrize("producer", [False, True], ids=["plain", "producer"])
@pytest.mark.parametrize("rule", sorted(SECRETS))
@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(FILLER, st.data())
async def test_a_secret_split_over_durable_streams_appends_to_two_replicas_is_stored_nowhere(
    http: httpx.AsyncClient,
    db: asyncpg.Connection,
    replicas: Replicas,
    rule: str,
    producer: bool,
    clean: str,
    data: st.DataObject,
) -> None:
    value = data.draw(SECRETS[rule])
    name = f"ds-{_letters()}"
    json_type = {"Content-Type": "application/json"}
    made = await http.put(f"{replicas.b}/v1/stream/{name}", headers=json_type)
    assert made.status_code == 201, made.text
    events = _run_events(value, clean, data, name)
    close_with_body = data.draw(st.booleans())
    at, seq = 0, 0
    while at < len(events):
        size = data.draw(st.integers(1, 3))
        part, at = events[at : at + size], at + size
        last = at >= len(events)
        sent = dict(json_type)
        if last and close_with_body:
            sent["Stream-Closed"] = "true"
        if producer:
            sent |= {"Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": str(seq)}
        base = (replicas.a, replicas.b)[seq % 2]
        answer = await http.post(f"{base}/v1/stream/{name}", headers=sent, json=part)
        assert answer.status_code == (200 if producer else 204), answer.text
        seq += 1
        await _counted(db, name)
        stored = await _rows_and_counts(db, name)
        hold = await _hold(db, name)
        assert value not in stored[0]  # held text (the run's hold) is not stored yet
        if producer and data.draw(st.booleans()):
            # The producer's retry, on the other replica: a duplicate, nothing added.
            other = (replicas.b, replicas.a)[(seq - 1) % 2]
            again = await http.post(f"{other}/v1/stream/{name}", headers=sent, json=part)
            assert again.status_code == 204, again.text
            assert again.headers["Producer-Seq"] == str(seq - 1)
            assert await _rows_and_counts(db, name) == stored
            assert await _hold(db, name) == hold
    if not close_with_body:
        closing = {"Stream-Closed": "true"}
        if producer:
            closing |= {"Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": str(seq)}
        closed = await http.post(f"{replicas.a}/v1/stream/{name}", headers=closing)
        assert closed.status_code == 204, closed.text
        assert closed.headers["Stream-Closed"] == "true"

    assert await _hold(db, name) is None  # the close released everything
    await _counted(db, name)
    chunks, counts = await _rows_and_counts(db, name)
    _no_trace(chunks, value)
    served = await _stream_messages(http, name)
    assert value not in json.dumps(served, ensure_ascii=False)
    assert _message_text(served, "m1") == f"it is [REDACTED:{rule}] ok"
    assert _message_text(served, "m2") == clean  # byte for byte
    args = "".join(e["delta"] for e in served if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"query": f"find [REDACTED:{rule}] now", "n": 1}
    assert counts == {rule: 4}


async def test_durable_streams_held_text_then_bare_close_is_released_and_counted_once(
    http: httpx.AsyncClient, db: asyncpg.Connection, replicas: Replicas
) -> None:
    name = f"ds-{_letters()}"
    json_type = {"Content-Type": "application/json"}
    # The stream's first content, in its PUT, ends with a key's start: held with the run.
    head = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"a {KEY_VALUE[:12]}"}]
    made = await http.put(f"{replicas.a}/v1/stream/{name}", headers=json_type, json=head)
    assert made.status_code == 201, made.text
    assert await _hold(db, name) is not None
    tail = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": KEY_VALUE[12:]}]
    said = await http.post(f"{replicas.b}/v1/stream/{name}", headers=json_type, json=tail)
    assert said.status_code == 204, said.text
    chunks, counts = await _rows_and_counts(db, name)
    assert "sk-proj" not in chunks and not counts
    assert await _hold(db, name) is not None
    before = await _metric(replicas.a, "openai_key")
    closed = await http.post(f"{replicas.a}/v1/stream/{name}", headers={"Stream-Closed": "true"})
    assert closed.status_code == 204, closed.text
    assert await _hold(db, name) is None
    await _counted(db, name)
    chunks, counts = await _rows_and_counts(db, name)
    assert counts == {"openai_key": 1} and "sk-proj" not in chunks
    served = await _stream_messages(http, name)
    assert _message_text(served, "m") == "a [REDACTED:openai_key]"
    assert await _metric(replicas.a, "openai_key") == before + 1
    # Closing again: nothing released twice, nothing counted.
    again = await http.post(f"{replicas.b}/v1/stream/{name}", headers={"Stream-Closed": "true"})
    assert again.status_code == 204, again.text
    assert await _rows_and_counts(db, name) == (chunks, counts)


async def test_byte_streams_when_rules_are_set_then_refused_415_and_nothing_stored(
    http: httpx.AsyncClient, db: asyncpg.Connection, database_url: str
) -> None:
    # Made before the rules were set (by this log directly): appends are refused, its close
    # is not (a close adds no bytes).
    older = f"bytes-{_letters()}"
    log = await EventLog.open(database_url)
    try:
        await StreamStore(log).create(NewStream(older, "text/plain", None, None, False), [])
    finally:
        await log.close()
    for name, headers in (
        (f"bytes-{_letters()}", {"Content-Type": "text/plain"}),
        (f"bytes-{_letters()}", {}),  # application/octet-stream, the default
    ):
        made = await http.put(f"/v1/stream/{name}", headers=headers, content=KEY_VALUE)
        assert made.status_code == 415, made.text
        assert made.json()["error"]["code"] == "unredactable_stream"
        assert await db.fetchval("SELECT count(*) FROM streams WHERE name = $1", name) == 0
    said = await http.post(
        f"/v1/stream/{older}", headers={"Content-Type": "text/plain"}, content=KEY_VALUE
    )
    assert said.status_code == 415, said.text
    assert said.json()["error"]["code"] == "unredactable_stream"
    run_id = await db.fetchval("SELECT run_id FROM streams WHERE name = $1", older)
    assert await db.fetchval("SELECT last_seq FROM runs WHERE run_id = $1", run_id) == 0
    closed = await http.post(f"/v1/stream/{older}", headers={"Stream-Closed": "true"})
    assert closed.status_code in (200, 204), closed.text
    json_made = await http.put(
        f"/v1/stream/json-{_letters()}", headers={"Content-Type": "application/json"}
    )
    assert json_made.status_code == 201, json_made.text
