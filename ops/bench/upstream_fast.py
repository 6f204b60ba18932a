"""A fast AG-UI upstream for ops/bench/driver.py.

    python ops/bench/upstream_fast.py PORT

POST /agent?count=N&rate=R streams N TEXT_MESSAGE_CONTENT events, one SSE
message per write as a model server does, as fast as it can (rate 0) or
paced at R events/s. Each carries `sentAt` (epoch seconds) so a reader can
measure latency from the upstream to itself.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route


def _sse(event: dict[str, object]) -> bytes:
    return f"data: {json.dumps(event)}\n\n".encode()


async def agent(request: Request) -> StreamingResponse:
    count = int(request.query_params.get("count", "10000"))
    rate = float(request.query_params.get("rate", "0"))
    try:
        body = await request.json()
    except ValueError:
        body = {}
    ids = {"runId": body.get("runId", "r"), "threadId": body.get("threadId", "t")}

    async def events() -> AsyncIterator[bytes]:
        yield _sse({"type": "RUN_STARTED", **ids})
        yield _sse({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
        start = time.perf_counter()
        for i in range(count):
            if rate:
                ahead = start + i / rate - time.perf_counter()
                if ahead > 0:
                    await asyncio.sleep(ahead)
            delta = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"tok{i} "}
            yield _sse({**delta, "sentAt": time.time()})
        yield _sse({"type": "TEXT_MESSAGE_END", "messageId": "m"})
        yield _sse({"type": "RUN_FINISHED", **ids})

    return StreamingResponse(events(), media_type="text/event-stream")


app = Starlette(routes=[Route("/agent", agent, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
