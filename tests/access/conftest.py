"""A keyed service with a known log: two threads, plain and hosted runs, and
credentials of every kind, shared by the access tests of a module."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import httpx
import jwt
import pytest

from tests.conftest import settings_for
from tests.support.servers import Running, serve_in_process

SECRET = "matrix-token-secret-0123456789abcdef-0123456789"
KEYS = "k-admin, k-read:read, k-append:append, k-run:run, k-multi:read+append"
ADMIN = {"Authorization": "Bearer k-admin"}


def bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


@dataclass
class Keyed:
    running: Running
    database_url: str
    credentials: dict[str, dict[str, str]]  # name -> headers

    @property
    def base_url(self) -> str:
        return self.running.base_url


async def mint(client: httpx.AsyncClient, **body: object) -> str:
    r = await client.post("/v1/tokens", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    token: str = r.json()["token"]
    return token


def forged(secret: str, **claims: object) -> str:
    """A token made with PyJWT directly, not by the service."""
    payload = {"aud": "agent-replay", "iat": int(time.time()), **claims}
    kid = hashlib.sha256(secret.encode()).hexdigest()[:16]
    return jwt.encode(payload, secret, algorithm="HS256", headers={"kid": kid})


def tampered(token: str) -> str:
    """The same token with its payload's thread changed and the old signature kept."""
    header, payload, signature = token.split(".")
    claims = jwt.api_jws.base64url_decode(payload.encode())
    changed = claims.replace(b'"th-a"', b'"th-b"')
    assert changed != claims
    return ".".join([header, jwt.api_jws.base64url_encode(changed).decode(), signature])


async def wait_hosted_closed(conn: asyncpg.Connection) -> None:
    """Until no hosted run is open (the demo agent appends after its POST answered)."""
    deadline = time.monotonic() + 30
    while await conn.fetchval(
        "SELECT count(*) FROM runs WHERE agent IS NOT NULL AND closed_at IS NULL"
    ):
        assert time.monotonic() < deadline, "hosted runs did not finish"
        await asyncio.sleep(0.02)


async def log_digest(conn: asyncpg.Connection) -> tuple[object, ...]:
    """Everything a write could change: the runs' rows and every event."""
    runs = await conn.fetchval(
        "SELECT md5(coalesce(string_agg(concat_ws('|', run_id, thread_id, agent, status,"
        " last_seq, closed_at, metadata, updated_at, lease_owner), ',' ORDER BY run_id), ''))"
        " FROM runs"
    )
    events = await conn.fetchrow(
        "SELECT count(*), md5(coalesce(string_agg(run_id || seq || chunk, ','"
        " ORDER BY run_id, seq), '')) FROM events"
    )
    assert events is not None
    return (runs, *events)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


@pytest.fixture(scope="module")
async def keyed(database_url: str) -> AsyncIterator[Keyed]:
    settings = settings_for(
        database_url, api_keys=KEYS, token_secret=SECRET, demo_delay_seconds=0.0
    )
    async with serve_in_process(settings) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as client:
            for run_id, thread in (("ra-1", "th-a"), ("rb-1", "th-b")):
                r = await client.post(
                    f"/v1/runs/{run_id}/events",
                    headers=ADMIN,
                    json={
                        "events": [
                            {"type": "RUN_STARTED", "threadId": thread, "runId": run_id},
                            {"type": "TEXT_MESSAGE_START", "messageId": f"m-{run_id}",
                             "role": "assistant"},
                            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{run_id}",
                             "delta": "hello"},
                        ],
                        "close": True,
                    },
                )  # fmt: skip
                assert r.status_code == 200, r.text
            for run_id, thread in (("ra-h", "th-a"), ("rb-h", "th-b")):
                r = await client.post(
                    "/v1/agents/demo/runs",
                    headers=ADMIN,
                    json={"threadId": thread, "runId": run_id,
                          "messages": [{"id": "u", "role": "user", "content": "hi"}]},
                )  # fmt: skip
                assert r.status_code == 201, r.text
            r = await client.put("/v1/stream/ds-shared", headers={**ADMIN, "Content-Type":
                                 "application/json"})  # fmt: skip
            assert r.status_code == 201, r.text
            conn = await asyncpg.connect(database_url)
            await wait_hosted_closed(conn)
            await conn.close()
            thread_token = await mint(client, thread_id="th-a", scopes=["read", "chat"])
            credentials = {
                "none": {},
                "admin": ADMIN,
                "read": bearer("k-read"),
                "append": bearer("k-append"),
                "run": bearer("k-run"),
                "thread": bearer(thread_token),
                "run_token": bearer(await mint(client, run_id="ra-1")),
                "other": bearer(await mint(client, thread_id="th-b", scopes=["read", "chat"])),
                "expired": bearer(
                    forged(SECRET, thread_id="th-a", scope="chat read", exp=int(time.time()) - 5)
                ),
                "tampered": bearer(tampered(thread_token)),
            }
        yield Keyed(running, database_url, credentials)
