"""Bounded fuzzing of every operation in the OpenAPI document (schemathesis),
against the service in its own process, without and with a credential: no 5xx,
every 4xx in the error shape, and nothing written by a rejected request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import asyncpg
import orjson
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings

from agent_replay.api.app import create_app
from agent_replay.config import Settings
from tests.support.pg import Databases
from tests.support.servers import serve_subprocess

ADMIN = {"Authorization": "Bearer k-fuzz-admin"}
DOC = create_app(Settings(database_url="postgresql://unused@127.0.0.1:1/x")).openapi()


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx: Any, value: Any) -> bytes:
    # The append route's NDJSON body: one JSON value a line (a list's items, else the value).
    items = value if isinstance(value, list) else [value]
    return b"".join(orjson.dumps(item) + b"\n" for item in items)


SCHEMA = schemathesis.openapi.from_dict(DOC)
# A bounded run: each operation of the document is its own test, with its documented examples
# and a few generated cases (valid and invalid), for each of two credentials: a few hundred
# cases in all. schemathesis's coverage phase (every boundary case the schema defines) is
# left out: ten times as many cases here, minutes of the suite.
SCHEMA.config.phases.update(phases=["examples", "fuzzing"])
FUZZ = settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
PUBLIC = {"/healthz", "/readyz"}


class Fuzzed:
    """The service under fuzzing, and one connection to its database kept on a loop of its
    own (the tests are synchronous): a connection per case would cost more than the case."""

    def __init__(self, base: str, database_url: str) -> None:
        self.base = base
        self._loop = asyncio.new_event_loop()
        self._conn: asyncpg.Connection = self._loop.run_until_complete(
            asyncpg.connect(database_url)
        )

    def close(self) -> None:
        self._loop.run_until_complete(self._conn.close())
        self._loop.close()

    def digest(self) -> tuple[object, ...]:
        """The log after every hosted run has ended (their drivers append in the background)."""
        return self._loop.run_until_complete(self._read())

    async def _read(self) -> tuple[object, ...]:
        deadline = time.monotonic() + 30
        while True:
            row = await self._conn.fetchrow(
                "SELECT (SELECT count(*) FROM runs WHERE agent IS NOT NULL AND closed_at IS NULL),"
                " (SELECT count(*) FROM runs), (SELECT coalesce(sum(last_seq), 0) FROM runs),"
                " (SELECT count(*) FROM events),"
                " (SELECT count(*) FROM runs WHERE closed_at IS NOT NULL)"
            )
            assert row is not None
            if not row[0]:
                return tuple(row)[1:]
            assert time.monotonic() < deadline, "hosted runs did not finish"
            await asyncio.sleep(0.02)


@pytest.fixture(scope="module")
def fuzzed(databases: Databases) -> Iterator[Fuzzed]:
    url = asyncio.run(databases.clone())
    env = {
        "REPLAY_DATABASE_URL": url,
        "REPLAY_API_KEYS": "k-fuzz-admin",
        "REPLAY_TOKEN_SECRET": "fuzz-token-secret-0123456789abcdef-0123456789",
        "REPLAY_DEMO_DELAY_SECONDS": "0",
        "REPLAY_HEARTBEAT_SECONDS": "1",
        "REPLAY_ACCESS_LOG": "false",
    }
    try:
        with serve_subprocess(env) as (base, _):
            fuzzed = Fuzzed(base, url)
            try:
                yield fuzzed
            finally:
                fuzzed.close()
    finally:
        asyncio.run(databases.drop(url))


def _exercise(case: Any, fuzzed: Fuzzed, headers: dict[str, str]) -> tuple[int, str]:
    before = fuzzed.digest()
    # Streams stay open while their run is: only the status and headers are awaited,
    # and an error body (always small) is read.
    request = case.as_transport_kwargs(base_url=fuzzed.base, headers=headers)
    response = requests.request(**request, timeout=30, stream=True)
    try:
        status: int = response.status_code
        where = f"{case.method} {case.formatted_path} -> {status}"
        code = ""
        assert status < 500, where
        if status >= 400:
            error = response.json()["error"]
            code = error["code"]
            where = f"{where} {code}: {error['message']}"
            assert isinstance(error["code"], str) and error["code"], where
            assert isinstance(error["message"], str) and error["message"], where
    finally:
        response.close()
    if status >= 400:
        assert fuzzed.digest() == before, f"{where}: a rejected request changed the log"
    return status, code


@SCHEMA.parametrize()
@FUZZ
def test_fuzz_when_no_credential_then_401_or_public_and_nothing_written(
    case: Any, fuzzed: Fuzzed
) -> None:
    status, code = _exercise(case, fuzzed, {})
    # (An undocumented method on a path is a 405 before any credential is looked at.)
    if case.path not in PUBLIC and case.method.upper() == case.operation.method.upper():
        assert status == 401, f"{case.method} {case.formatted_path} -> {status} {code}"


@SCHEMA.parametrize()
@FUZZ
def test_fuzz_when_admin_key_then_no_5xx_and_errors_in_shape(case: Any, fuzzed: Fuzzed) -> None:
    _exercise(case, fuzzed, ADMIN)
