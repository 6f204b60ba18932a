"""OpenTelemetry: spans reach a real OTLP/HTTP receiver when the endpoint is set; else no SDK."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.stream.wire import SseReader
from tests.support.servers import serve_asgi, serve_subprocess


class Receiver:
    """An OTLP/HTTP trace endpoint (protobuf), keeping every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.app = Starlette(routes=[Route("/v1/traces", self.receive, methods=["POST"])])

    async def receive(self, request: Request) -> Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.body())
        for resource in message.resource_spans:
            for scope in resource.scope_spans:
                self.spans.extend(scope.spans)
        return Response(b"", media_type="application/x-protobuf")


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, Receiver]]:
    receiver = Receiver()
    async with serve_asgi(receiver.app) as base:
        yield base, receiver


async def test_tracing_when_endpoint_set_then_request_spans_with_their_statements_are_exported(
    database_url: str, receiver: tuple[str, Receiver]
) -> None:
    endpoint, got = receiver
    env = {
        "REPLAY_DATABASE_URL": database_url,
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_SERVICE_NAME": "replay-under-test",
    }
    with serve_subprocess(env) as (base, _):
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            r = await http.post(
                "/v1/runs/otel-1/events",
                json={"events": [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}]},
            )
            assert r.status_code == 200
            await http.post("/v1/runs/otel-1/close", headers={"Content-Type": "application/json"})
            reader = SseReader()
            async with http.stream("GET", "/v1/runs/otel-1/stream") as response:
                async for data in response.aiter_bytes():
                    reader.feed(data)
            assert len(reader.events) == 1

            def named(name: str) -> list[Any]:
                return [s for s in got.spans if s.name == name]

            deadline = time.monotonic() + 20
            while not (
                named("POST /v1/runs/{run_id}/events") and named("GET /v1/runs/{run_id}/stream")
            ):
                assert time.monotonic() < deadline, [s.name for s in got.spans]
                await asyncio.sleep(0.05)
    (append,) = named("POST /v1/runs/{run_id}/events")
    (stream,) = named("GET /v1/runs/{run_id}/stream")
    # The stream's reads of the log (its plan, its catch-up page) are its request's children.
    statements = [s for s in got.spans if s.parent_span_id == stream.span_id]
    assert len(statements) >= 2 and all(s.name == "SELECT" for s in statements)
    assert all(s.trace_id == stream.trace_id for s in statements)
    # No span per ASGI message (a stream would make one per event written).
    assert not [s for s in got.spans if s.name.endswith((" send", " receive"))]
    assert append.trace_id != stream.trace_id


def test_tracing_when_no_endpoint_then_the_sdk_is_never_imported() -> None:
    probe = (
        "import sys\n"
        "from agent_replay.api.app import create_app\n"
        "create_app()\n"
        "print(sorted(m for m in sys.modules"
        " if m.startswith(('opentelemetry.sdk', 'opentelemetry.instrumentation',"
        " 'opentelemetry.exporter'))))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "[]"
