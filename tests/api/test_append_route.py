"""One append route: a single handler, and its OpenAPI entry built from the same models."""

from __future__ import annotations

import httpx
from starlette.routing import Route

from agent_replay.api.app import create_app
from agent_replay.config import Settings


def test_app_when_built_then_one_route_handles_post_events() -> None:
    app = create_app(Settings(database_url="postgresql://root@127.0.0.1:1/unused"))
    handlers = [
        route
        for route in app.router.routes
        if isinstance(route, Route)
        and route.path == "/v1/runs/{run_id}/events"
        and "POST" in (route.methods or ())
    ]
    assert len(handlers) == 1 and handlers[0].endpoint.__name__ == "append_events"


async def test_openapi_when_read_then_append_operation_names_its_parameters_and_schemas(
    client: httpx.AsyncClient,
) -> None:
    doc = (await client.get("/openapi.json")).json()
    operation = doc["paths"]["/v1/runs/{run_id}/events"]["post"]
    assert {p["name"]: p["in"] for p in operation["parameters"]} == {
        "run_id": "path",
        "expected_seq": "query",
        "close": "query",
        "format": "query",
    }
    schemas = doc["components"]["schemas"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    for ref in (
        body,
        ok,
        operation["responses"]["415"]["content"]["application/json"]["schema"]["$ref"],
    ):
        assert ref.rsplit("/", 1)[-1] in schemas, ref
    assert set(schemas["AppendIn"]["properties"]) == {"events", "expected_seq", "close"}
    assert "get" in doc["paths"]["/v1/runs/{run_id}/events"]  # the read route is untouched


async def test_append_when_posted_then_served_by_the_one_handler_with_its_checks(
    client: httpx.AsyncClient,
) -> None:
    ok = await client.post("/v1/runs/route-1/events", json={"events": [{"type": "A"}]})
    assert ok.status_code == 200 and ok.json() == {
        "run_id": "route-1",
        "first_seq": 1,
        "last_seq": 1,
    }
    bad = await client.post("/v1/runs/route-1/events?close=maybe", content=b"{}",
                            headers={"Content-Type": "application/x-ndjson"})  # fmt: skip
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
