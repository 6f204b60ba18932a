"""A 409 `run_conflict` says that the id is taken, and nothing about the run that took it:
an `append` or `run` key may not read another's run, so its thread, agent, metadata and
input stay out of the answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from agent_replay.log import EventLog
from tests.access.conftest import ADMIN, bearer
from tests.conftest import settings_for
from tests.support.servers import Running, serve_in_process

# What belongs to bob's runs and must not reach another credential.
BOBS = ("bobs-thread-7731", "bobs-agent-7731", "bobs-metadata-7731", "bobs-input-7731")
JSON_TYPE = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
async def keyed(database_url: str) -> AsyncIterator[Running]:
    log = await EventLog.open(database_url)
    try:
        # A plain run, and a hosted run of an agent this service does not even serve.
        await log.create_run("bob-plain", thread_id=BOBS[0], metadata={"note": BOBS[2]})
        await log.create_run(
            "bob-hosted", thread_id=BOBS[0], agent=BOBS[1],
            input={"threadId": BOBS[0], "runId": "bob-hosted",
                   "messages": [{"id": "u", "role": "user", "content": BOBS[3]}]},
        )  # fmt: skip
    finally:
        await log.close()
    settings = settings_for(
        database_url, api_keys="k-admin, k-append:append, k-run:run", demo_delay_seconds=0.0
    )
    async with serve_in_process(settings) as running:
        async with httpx.AsyncClient(base_url=running.base_url) as client:
            r = await client.post(
                "/v1/runs/alice-1/events", headers={**ADMIN, **JSON_TYPE},
                json={"events": [{"type": "RUN_STARTED", "threadId": "t-alice",
                                  "runId": "alice-1"}]},
            )  # fmt: skip
            assert r.status_code == 200, r.text
        yield running


ASK = {"threadId": "t-mallory", "messages": [{"id": "u", "role": "user", "content": "hi"}]}
# (credential, method, path, request options), each naming one of bob's runs.
CONFLICTS = [
    ("k-append", "PUT", "/v1/runs/bob-plain", {"json": {"thread_id": "t-mallory"}}),
    ("k-append", "PUT", "/v1/runs/bob-hosted", {"json": {"metadata": {"a": 1}}}),
    ("k-append", "POST", "/v1/runs/alice-1/fork", {"json": {"run_id": "bob-plain"}}),
    ("k-run", "POST", "/v1/chat/demo", {"json": ASK, "headers": {"X-Run-Id": "bob-hosted"}}),
    ("k-run", "POST", "/v1/agents/demo/runs", {"json": {**ASK, "runId": "bob-hosted"}}),
    ("k-run", "POST", "/v1/agents/demo/ag-ui", {"json": {**ASK, "runId": "bob-hosted"}}),
]


@pytest.mark.parametrize(
    ("credential", "method", "path", "options"),
    CONFLICTS,
    ids=[f"{c} {m} {p}" for c, m, p, _ in CONFLICTS],
)
async def test_conflict_on_another_run_says_nothing_about_that_run(
    keyed: Running, credential: str, method: str, path: str, options: dict[str, object]
) -> None:
    options = {**options, "headers": {**options.get("headers", {}), **bearer(credential)}}  # type: ignore[dict-item]
    async with httpx.AsyncClient(base_url=keyed.base_url, timeout=30) as client:
        r = await client.request(method, path, **options)  # type: ignore[arg-type]
    assert r.status_code == 409 and r.json()["error"]["code"] == "run_conflict", r.text
    for secret in BOBS:
        assert secret not in r.text, (secret, r.text)
    assert set(r.json()["error"]) == {"code", "message"}
