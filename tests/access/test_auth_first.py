"""Authentication comes before anything about the request's body: an
unauthenticated caller learns nothing from how its body would be refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.conftest import settings_for
from tests.support.servers import serve_in_process

BODIES = [
    pytest.param(b"{not json", id="not-json"),
    pytest.param(b'{"thread_id": 5}', id="wrong-type"),
    pytest.param(b'["a list"]', id="wrong-shape"),
]


@pytest.fixture(scope="module")
async def keyed(database_url: str) -> AsyncIterator[str]:
    async with serve_in_process(settings_for(database_url, api_keys="k-admin")) as running:
        yield running.base_url


@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("path", ["/v1/runs/r-1", "/v1/tokens"])
async def test_bad_body_when_no_credential_then_401_not_the_body_error(
    keyed: str, path: str, body: bytes
) -> None:
    method = "PUT" if path.startswith("/v1/runs") else "POST"
    async with httpx.AsyncClient(base_url=keyed) as client:
        r = await client.request(
            method, path, content=body, headers={"Content-Type": "application/json"}
        )
        keyed_r = await client.request(
            method,
            path,
            content=body,
            headers={"Content-Type": "application/json", "Authorization": "Bearer k-admin"},
        )
    assert r.status_code == 401, r.text
    assert r.json()["error"]["code"] == "unauthorized"
    # With the key, the same body is refused for what it is.
    assert keyed_r.status_code in (400, 422), keyed_r.text
