"""Tokens end to end: minting, verification on another replica, rotation, `?token=`
resumes of a live run, expiry mid-stream, and what is never logged."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator

import asyncpg
import httpx
import jwt
import pytest

from tests.access.conftest import ADMIN, SECRET, bearer, forged
from tests.conftest import settings_for
from tests.stream.wire import SseReader
from tests.support.pg import Databases
from tests.support.servers import serve_in_process

KEYS = "k-admin"


def _chunk(i: int) -> dict[str, object]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"[{i}]"}


async def _append(client: httpx.AsyncClient, run_id: str, events: list[dict[str, object]],
                  close: bool = False) -> None:  # fmt: skip
    r = await client.post(
        f"/v1/runs/{run_id}/events", json={"events": events, "close": close}, headers=ADMIN
    )
    assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
async def signed(database_url: str) -> AsyncIterator[str]:
    settings = settings_for(database_url, api_keys=KEYS, token_secret=SECRET)
    async with serve_in_process(settings) as running:
        yield running.base_url


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"thread_id": "t", "run_id": "r"},
        {"thread_id": "t", "ttl_seconds": 0},
        {"thread_id": "t", "ttl_seconds": 86_401},
        {"thread_id": "t", "scopes": ["chat"]},
        {"thread_id": "t", "scopes": ["admin"]},
        {"thread_id": "t", "extra": 1},
        {"run_id": "not a run id"},
        {"thread_id": ""},
    ],
)
async def test_create_token_when_body_invalid_then_422(
    signed: str, body: dict[str, object]
) -> None:
    async with httpx.AsyncClient(base_url=signed) as client:
        r = await client.post("/v1/tokens", json=body, headers=ADMIN)
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text


async def test_create_token_when_defaults_then_read_only_for_15_minutes_signed_hs256(
    signed: str,
) -> None:
    async with httpx.AsyncClient(base_url=signed) as client:
        before = int(time.time())
        r = await client.post("/v1/tokens", json={"thread_id": "t-9"}, headers=ADMIN)
    assert r.status_code == 201, r.text
    body = r.json()
    assert jwt.get_unverified_header(body["token"])["alg"] == "HS256"
    claims = jwt.decode(body["token"], SECRET, algorithms=["HS256"], audience="agent-replay")
    assert claims["thread_id"] == "t-9" and claims["scope"] == "read"
    assert before + 900 <= claims["exp"] <= math.ceil(time.time()) + 900
    assert body["scopes"] == ["read"] and body["thread_id"] == "t-9"
    assert body["expires_at"].endswith("+00:00")


async def test_create_token_when_ttl_unnamed_then_replay_token_ttl_seconds_applies(
    database_url: str,
) -> None:
    settings = settings_for(database_url, api_keys=KEYS, token_secret=SECRET,
                            token_ttl_seconds=60)  # fmt: skip
    async with (
        serve_in_process(settings) as running,
        httpx.AsyncClient(base_url=running.base_url) as client,
    ):
        before = int(time.time())
        default = await client.post("/v1/tokens", json={"thread_id": "t"}, headers=ADMIN)
        named = await client.post("/v1/tokens", json={"thread_id": "t", "ttl_seconds": 3600},
                                  headers=ADMIN)  # fmt: skip
        after = math.ceil(time.time())
    exps = [
        jwt.decode(r.json()["token"], SECRET, algorithms=["HS256"], audience="agent-replay")["exp"]
        for r in (default, named)
    ]
    assert before + 60 <= exps[0] <= after + 60
    assert before + 3600 <= exps[1] <= after + 3600


def test_token_ttl_setting_when_out_of_range_then_refused_at_start() -> None:
    from pydantic import ValidationError

    from agent_replay.config import Settings

    for ttl in (0, 86_401):
        with pytest.raises(ValidationError):
            Settings(token_ttl_seconds=ttl)


async def test_token_when_signed_with_another_secret_or_alg_none_then_401(signed: str) -> None:
    exp = int(time.time()) + 60
    other = forged("another-secret-of-at-least-32-bytes-0123456789", thread_id="t", scope="read",
                   exp=exp)  # fmt: skip
    unsigned = jwt.encode({"aud": "agent-replay", "thread_id": "t", "scope": "read", "exp": exp},
                          None, algorithm="none")  # fmt: skip
    async with httpx.AsyncClient(base_url=signed) as client:
        for token in (other, unsigned, "a.b.c", "not-a-token"):
            r = await client.get("/v1/threads/t/messages", headers=bearer(token))
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", token


async def test_rotation_when_previous_secret_listed_then_its_tokens_still_pass(
    database_url: str,
) -> None:
    new = "the-new-secret-after-rotation-0123456789abcdef"
    old_token = forged(SECRET, thread_id="t", scope="read", exp=int(time.time()) + 60)
    rotated = settings_for(database_url, api_keys=KEYS, token_secret=new,
                           token_secret_previous=SECRET)  # fmt: skip
    after = settings_for(database_url, api_keys=KEYS, token_secret=new)
    async with (
        serve_in_process(rotated) as running,
        httpx.AsyncClient(base_url=running.base_url) as client,
    ):
        r = await client.get("/v1/runs", params={"thread_id": "t"}, headers=bearer(old_token))
        assert r.status_code == 200, r.text
        minted = (await client.post("/v1/tokens", json={"thread_id": "t"}, headers=ADMIN)).json()
        jwt.decode(minted["token"], new, algorithms=["HS256"], audience="agent-replay")
    async with (
        serve_in_process(after) as running,
        httpx.AsyncClient(base_url=running.base_url) as client,
    ):
        r = await client.get("/v1/runs", params={"thread_id": "t"}, headers=bearer(old_token))
        assert r.status_code == 401


async def test_second_replica_when_token_minted_by_first_then_accepted_secret_in_database(
    databases: Databases,
) -> None:
    url = await databases.clone()
    try:
        settings = settings_for(url, api_keys=KEYS)  # no REPLAY_TOKEN_SECRET
        async with (
            serve_in_process(settings) as a,
            serve_in_process(settings) as b,
            httpx.AsyncClient() as client,
        ):
            # Both replicas need the secret at once: one creates it, both use it.
            minted = await asyncio.gather(*(
                    client.post(f"{base}/v1/tokens", json={"thread_id": "t-r"}, headers=ADMIN)
                    for base in (a.base_url, b.base_url)
                ))  # fmt: skip
            tokens = [r.json()["token"] for r in minted]
            for token, other in zip(tokens, (b.base_url, a.base_url), strict=True):
                r = await client.get(f"{other}/v1/runs", params={"thread_id": "t-r"},
                                         headers=bearer(token))  # fmt: skip
                assert r.status_code == 200, r.text
        conn = await asyncpg.connect(url)
        try:
            rows = await conn.fetch("SELECT value FROM service_secrets WHERE name = 'token_secret'")
        finally:
            await conn.close()
        assert len(rows) == 1 and len(rows[0]["value"]) >= 32
        jwt.decode(tokens[0], rows[0]["value"], algorithms=["HS256"], audience="agent-replay")
    finally:
        await databases.drop(url)


async def _read_events(body: AsyncIterator[bytes], reader: SseReader, until: int) -> None:
    """Feed the reader from an open response until it has seq `until`."""
    while reader.last_id is None or reader.last_id < until:
        reader.feed(await anext(body))


async def test_query_token_when_live_run_resumed_eventsource_style_then_each_event_once(
    signed: str,
) -> None:
    run = "live-tok"
    async with httpx.AsyncClient(base_url=signed, timeout=30) as client:
        await _append(client, run, [{"type": "RUN_STARTED", "threadId": "t-live", "runId": run},
                                    *[_chunk(i) for i in range(3)]])  # fmt: skip
        r = await client.post("/v1/tokens", headers=ADMIN,
                              json={"thread_id": "t-live", "ttl_seconds": 1})  # fmt: skip
        short = r.json()["token"]
        reader = SseReader()
        url = f"/v1/runs/{run}/stream"
        # EventSource sends no headers of its own choosing: the token rides in the URL.
        async with client.stream("GET", url, params={"token": short}) as first:
            assert first.status_code == 200
            body = first.aiter_raw()
            await _read_events(body, reader, 4)
            # Wait (on the service's own answer) until the token is refused as expired.
            deadline = time.monotonic() + 10
            probe = f"/v1/runs/{run}"  # not a stream: it answers at once
            while (await client.get(probe, params={"token": short})).status_code != 401:
                assert time.monotonic() < deadline, "the 1 s token never expired"
                await asyncio.sleep(0.1)
            # The open stream goes on past its token's expiry.
            await _append(client, run, [_chunk(3), _chunk(4)])
            await _read_events(body, reader, 6)
        # The reconnect (EventSource resends Last-Event-ID with the same URL) is refused...
        resumed = await client.get(url, params={"token": short},
                                   headers={"Last-Event-ID": str(reader.last_id)})  # fmt: skip
        assert resumed.status_code == 401 and resumed.json()["error"]["code"] == "token_expired"
        assert resumed.headers["www-authenticate"].startswith("Bearer")
        # ...so the client gets a fresh token and resumes where it was; more arrives meanwhile.
        await _append(client, run, [_chunk(5)])
        fresh = (await client.post("/v1/tokens", headers=ADMIN,
                                   json={"thread_id": "t-live"})).json()["token"]  # fmt: skip
        await _append(client, run, [_chunk(6)], close=True)
        last = {"Last-Event-ID": str(reader.last_id)}
        async with client.stream("GET", url, params={"token": fresh}, headers=last) as second:
            assert second.status_code == 200
            async for data in second.aiter_raw():
                reader.feed(data)
    assert [seq for seq, _ in reader.events] == list(range(1, 9))


async def test_query_token_when_request_logged_then_token_never_in_any_log(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from uvicorn import Config, Server

    from agent_replay.api.app import create_app

    settings = settings_for(database_url, api_keys=KEYS, token_secret=SECRET, access_log=True)
    token = forged(SECRET, thread_id="t-log", scope="read", exp=int(time.time()) + 60)
    caplog.set_level(logging.DEBUG)
    app = create_app(settings, migrate_on_start=False)
    # uvicorn's own access log too, formatting the request line itself.
    config = Config(app, host="127.0.0.1", port=0, log_level="debug", access_log=True,
                    log_config=None, lifespan="on")  # fmt: skip
    server = Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            assert not task.done()
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            ok = await client.get("/v1/threads/t-log/messages", params={"token": token})
            refused = await client.get("/v1/runs", params={"token": token})
            bad = await client.get("/v1/runs", params={"token": token + "x"})
    finally:
        server.should_exit = True
        await task
    assert (ok.status_code, refused.status_code, bad.status_code) == (404, 403, 401)
    # The service's records (its own logger and uvicorn's), not the test client's.
    server = [r for r in caplog.records if r.name.startswith(("replay", "uvicorn"))]
    text = "\n".join(r.getMessage() + repr(r.args) for r in server)
    assert "/v1/threads/t-log/messages" in text  # the requests were logged...
    assert token not in text and token[:40] not in text  # ...without the token
