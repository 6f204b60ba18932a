"""OpenTelemetry traces: on when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, else never imported.

The optional `otel` extra (`pip install 'agent-replay[otel]'`) brings the SDK,
the OTLP/HTTP exporter and the FastAPI and asyncpg instrumentations.
`instrument(app)` imports them only when an endpoint is configured, so a
service without it loads none of OpenTelemetry's SDK. The exporter reads the
standard `OTEL_*` variables itself (endpoint, headers, service name).

One server span per request, named by route template, with the asyncpg
statements it ran as children. The ASGI send/receive spans are left out: a
stream would make one per event written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def enabled() -> bool:
    return any(os.environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def instrument(app: Any) -> Callable[[], None] | None:
    """Trace `app` and asyncpg if an OTLP endpoint is set; returns the flush-and-stop function."""
    if not enabled():
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise RuntimeError(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set, but OpenTelemetry is not installed:"
            " pip install 'agent-replay[otel]'"
        ) from exc
    name = os.environ.get("OTEL_SERVICE_NAME", "agent-replay")
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=provider, exclude_spans=["send", "receive"]
    )
    AsyncPGInstrumentor().instrument(tracer_provider=provider)  # type: ignore[no-untyped-call]

    def stop() -> None:
        AsyncPGInstrumentor().uninstrument()  # type: ignore[no-untyped-call]
        provider.shutdown()

    return stop
