"""A `run` key reads hosted runs only: through a thread's routes it sees the thread's
hosted runs and nothing of its other runs, and no body can hide from the access rule
which run it names (the rule and the route read the one parse of it)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import httpx
import pytest

from tests.access.conftest import ADMIN, bearer, log_digest, wait_hosted_closed
from tests.conftest import settings_for
from tests.support.servers import serve_in_process

SECRET_TEXT = "the-plain-run-secret-4242"
RUN_KEY = bearer("k-run")


@dataclass
class Mixed:
    base_url: str


def _plain_run(run_id: str, thread: str, close: bool) -> dict[str, object]:
    return {
        "events": [
            {"type": "RUN_STARTED", "threadId": thread, "runId": run_id},
            {"type": "TEXT_MESSAGE_START", "messageId": f"m-{run_id}", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{run_id}", "delta": SECRET_TEXT},
            {"type": "TEXT_MESSAGE_END", "messageId": f"m-{run_id}"},
            *([{"type": "RUN_FINISHED", "threadId": thread, "runId": run_id}] if close else []),
        ],
        "close": close,
    }


@pytest.fixture(scope="module")
async def mixed(database_url: str) -> AsyncIterator[Mixed]:
    """th-mix: a closed plain run with a secret and a hosted run; th-live: an open plain run
    with the secret and a finished hosted run."""
    settings = settings_for(
        database_url, api_keys="k-admin, k-run:run", demo_delay_seconds=0.0,
        token_secret="run-keys-token-secret-0123456789abcdef-0123456789",
    )  # fmt: skip
    async with serve_in_process(settings) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as client:
            for thread, plain, close in (("th-mix", "plain-mix", True),
                                         ("th-live", "plain-live", False)):  # fmt: skip
                # The hosted run first: a later request's input leaves out the plain answer.
                r = await client.post(
                    "/v1/agents/demo/runs", headers=ADMIN,
                    json={"threadId": thread, "runId": f"hosted-{thread}",
                          "messages": [{"id": f"u-{thread}", "role": "user", "content": "hi"}]},
                )  # fmt: skip
                assert r.status_code == 201, r.text
                r = await client.post(
                    f"/v1/runs/{plain}/events", json=_plain_run(plain, thread, close),
                    headers=ADMIN,
                )  # fmt: skip
                assert r.status_code == 200, r.text
            conn = await asyncpg.connect(database_url)
            await wait_hosted_closed(conn)
            await conn.close()
        yield Mixed(running.base_url)


THREAD_READS = [
    "/v1/ai-sdk/demo/th-mix/messages",
    "/v1/chat/demo?threadId=th-mix",
]


@pytest.mark.parametrize("path", THREAD_READS)
async def test_run_key_reading_a_thread_sees_its_hosted_runs_and_not_its_plain_run(
    mixed: Mixed, path: str
) -> None:
    async with httpx.AsyncClient(base_url=mixed.base_url, timeout=30) as client:
        as_run_key = await client.get(path, headers=RUN_KEY)
        as_admin = await client.get(path, headers=ADMIN)
    assert as_run_key.status_code == 200 and as_admin.status_code == 200
    assert SECRET_TEXT in as_admin.text  # the plain run is there to be seen
    assert SECRET_TEXT not in as_run_key.text and "plain-mix" not in as_run_key.text
    assert "hosted-th-mix" in as_run_key.text  # its hosted run is still served


async def test_run_key_reconnecting_to_a_thread_whose_open_run_is_plain_gets_no_stream(
    mixed: Mixed,
) -> None:
    async with httpx.AsyncClient(base_url=mixed.base_url, timeout=30) as client:
        # Streams stay open while their run is: only the status is awaited.
        async with client.stream("GET", "/v1/ai-sdk/demo/th-live/stream", headers=RUN_KEY) as r:
            as_run_key = r.status_code
        async with client.stream("GET", "/v1/ai-sdk/demo/th-live/stream", headers=ADMIN) as r:
            as_admin = r.status_code  # the admin key follows the open plain run
    assert (as_run_key, as_admin) == (204, 200)


def _utf16(value: object) -> bytes:
    return json.dumps(value).encode("utf-16")


# Bodies naming the plain run that the standard library reads and a strict parser does not.
HIDDEN = [
    pytest.param(
        b'{"threadId": "th-live", "runId": "plain-live", "messages": [], "n": NaN}', id="nan"
    ),
    pytest.param(
        _utf16({"threadId": "th-live", "runId": "plain-live", "messages": []}), id="utf-16"
    ),
]
JOINS = [
    pytest.param("/v1/chat/demo", {"Last-Event-ID": "0"}, id="chat-resume"),
    pytest.param("/v1/agents/demo/ag-ui", {"Last-Event-ID": "0"}, id="ag-ui-resume"),
    pytest.param("/v1/agents/demo/ag-ui", {}, id="ag-ui-join"),
]


@pytest.mark.parametrize("body", HIDDEN)
@pytest.mark.parametrize(("path", "headers"), JOINS)
async def test_run_key_joining_a_plain_run_through_an_unparseable_body_is_refused_and_reads_nothing(
    mixed: Mixed, database_url: str, path: str, headers: dict[str, str], body: bytes
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        before = await log_digest(conn)
        headers = {**RUN_KEY, **headers, "Content-Type": "application/json"}
        # A stream of the open run would never end: the status and an error's body only.
        async with (
            httpx.AsyncClient(base_url=mixed.base_url, timeout=30) as client,
            client.stream("POST", path, content=body, headers=headers) as r,
        ):
            assert r.status_code == 400, "the run key was let in"
            text = (await r.aread()).decode()
        assert json.loads(text)["error"]["code"] == "invalid_json", text
        assert SECRET_TEXT not in text
        await wait_hosted_closed(conn)
        assert await log_digest(conn) == before
    finally:
        await conn.close()


async def test_run_key_joining_the_plain_run_with_a_plain_body_is_forbidden(
    mixed: Mixed,
) -> None:
    body = {"threadId": "th-live", "runId": "plain-live", "messages": []}
    async with httpx.AsyncClient(base_url=mixed.base_url, timeout=30) as client:
        for path, headers in (("/v1/chat/demo", {"Last-Event-ID": "0"}),
                              ("/v1/agents/demo/ag-ui", {})):  # fmt: skip
            async with client.stream("POST", path, json=body, headers={**RUN_KEY, **headers}) as r:
                assert r.status_code == 403, path
                assert SECRET_TEXT not in (await r.aread()).decode()
