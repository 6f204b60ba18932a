"""Audit query latency over a large log, against raw asyncpg running the same SQL.

    python ops/bench/audit.py [--runs 10000] [--events 1000] [--samples 200] [--json FILE]

Builds the population straight in SQL in a scratch database (generate_series:
N runs of M events, their maintained columns set to match the events), then
times `GET /v1/runs` pages (limit 50) for each filter and some combinations,
over HTTP to a `agent-replay serve` process on loopback, and the identical statement
(agent_replay.log.lookups.listing) through raw asyncpg. Prints p50/p99
in ms. Sequential requests, one at a time: latency, not throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import asyncpg
import httpx
from common import pct, scratch_database, server_process, write_json

from agent_replay.log.filters import RunFilter
from agent_replay.log.lookups import listing

TOOLS = 12
# Built in slices so progress shows and no single statement runs for minutes.
SLICE = 500

RUNS_SQL = """
INSERT INTO runs (run_id, thread_id, agent, status, last_seq, last_terminal, error_message,
                  created_at, updated_at, closed_at, tool_names,
                  prompt_tokens, completion_tokens, total_tokens)
SELECT 'r' || lpad(i::text, 6, '0'),
       't' || (i % 1000),
       'agent-' || (i % 7),
       (ARRAY['finished','finished','finished','finished','finished','finished',
              'error','running','cancelled','interrupted'])[i % 10 + 1],
       $3::bigint,
       CASE WHEN i % 10 = 6 THEN 'RUN_ERROR' WHEN i % 10 = 7 THEN NULL ELSE 'RUN_FINISHED' END,
       CASE WHEN i % 10 = 6 THEN 'upstream failed for run ' || i END,
       timestamptz '2026-01-01' + i * interval '37 seconds',
       timestamptz '2026-01-01' + i * interval '37 seconds' + (i % 60) * interval '1 second',
       CASE WHEN i % 10 <> 7 THEN
           timestamptz '2026-01-01' + i * interval '37 seconds' + (i % 60) * interval '1 second'
       END,
       ARRAY(SELECT DISTINCT t FROM unnest(ARRAY[
                 'tool-' || (i % $4), 'tool-' || ((i / $4) % $4),
                 CASE WHEN i % 997 = 0 THEN 'rare-tool' END]) t
             WHERE t IS NOT NULL ORDER BY t),
       CASE WHEN i % 10 NOT IN (6, 7) THEN 100 + i % 50 END,
       CASE WHEN i % 10 NOT IN (6, 7) THEN 20 + i % 30 END,
       CASE WHEN i % 10 NOT IN (6, 7) THEN 120 + i % 50 + i % 30 END
FROM generate_series($1::int, $2::int) AS i
"""

# Event 1 starts the run, 2-4 start its tool calls, the last is its terminal.
EVENTS_SQL = """
INSERT INTO events (run_id, seq, type, chunk, message_id, tool_call_id, received_at)
SELECT r.run_id, s, e.type, e.chunk, 'm-' || r.run_id, NULL,
       r.created_at + s * interval '1 millisecond'
FROM runs r
CROSS JOIN generate_series(1, $3::int) AS s
CROSS JOIN LATERAL (
    SELECT CASE
        WHEN s = 1 THEN 'RUN_STARTED'
        WHEN s BETWEEN 2 AND 1 + cardinality(r.tool_names) THEN 'TOOL_CALL_START'
        WHEN s = $3 AND r.status = 'error' THEN 'RUN_ERROR'
        WHEN s = $3 AND r.status <> 'running' THEN 'RUN_FINISHED'
        ELSE 'TEXT_MESSAGE_CONTENT' END AS type
) AS k
CROSS JOIN LATERAL (
    SELECT k.type, CASE k.type
        WHEN 'RUN_STARTED' THEN '{"type":"RUN_STARTED","runId":"' || r.run_id || '"}'
        WHEN 'TOOL_CALL_START' THEN '{"type":"TOOL_CALL_START","toolCallId":"c' || s
             || '","toolCallName":"' || r.tool_names[s - 1] || '"}'
        WHEN 'RUN_ERROR' THEN '{"type":"RUN_ERROR","message":"' || r.error_message || '"}'
        WHEN 'RUN_FINISHED' THEN '{"type":"RUN_FINISHED","usage":{"promptTokens":'
             || r.prompt_tokens || ',"completionTokens":' || r.completion_tokens
             || ',"totalTokens":' || r.total_tokens || '}}'
        ELSE '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-' || r.run_id
             || '","delta":"token ' || s || ' "}' END AS chunk
) AS e
WHERE r.run_id BETWEEN 'r' || lpad(($1::int)::text, 6, '0') AND 'r' || lpad(($2::int)::text, 6, '0')
"""

FILTERS: dict[str, dict[str, Any]] = {
    "no filter": {},
    "thread_id": {"thread_id": "t417"},
    "status=error": {"status": "error"},
    "status=cancelled|interrupted": {"status": ["cancelled", "interrupted"]},
    "agent": {"agent": "agent-3"},
    "tool (common)": {"tool": "tool-5"},
    "tool (rare)": {"tool": "rare-tool"},
    "has_error=true": {"has_error": "true"},
    "has_error=false": {"has_error": "false"},
    "created range": {"created_after": "2026-01-02T00:00:00Z",
                      "created_before": "2026-01-03T00:00:00Z"},
    "agent+tool+has_error": {"agent": "agent-2", "tool": "tool-7", "has_error": "false"},
    "thread+status": {"thread_id": "t42", "status": "finished"},
    "tool+created range": {"tool": "tool-1", "created_after": "2026-01-03T00:00:00Z",
                           "created_before": "2026-01-04T00:00:00Z"},
    "status+agent+range": {"status": "running", "agent": "agent-1",
                           "created_after": "2026-01-02T00:00:00Z"},
}  # fmt: skip


def run_filter(params: dict[str, Any]) -> RunFilter:
    from datetime import datetime

    status = params.get("status")
    return RunFilter(
        thread_id=params.get("thread_id"),
        statuses=tuple([status] if isinstance(status, str) else status or ()),
        created_after=datetime.fromisoformat(params["created_after"])
        if "created_after" in params
        else None,
        created_before=datetime.fromisoformat(params["created_before"])
        if "created_before" in params
        else None,
        agent=params.get("agent"),
        tool=params.get("tool"),
        has_error={"true": True, "false": False}.get(params.get("has_error", "")),
    )


def compiled(params: dict[str, Any], limit: int) -> tuple[str, list[Any]]:
    """The service's own statement and parameters (one more row than a page: whether it
    exists says if there is a next page)."""
    return listing(run_filter(params), limit + 1, None)


async def populate(url: str, runs: int, events: int) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SET synchronous_commit = off")
        t0 = time.perf_counter()
        await conn.execute(RUNS_SQL, 1, runs, events, TOOLS)
        for start in range(1, runs + 1, SLICE):
            end = min(runs, start + SLICE - 1)
            await conn.execute(EVENTS_SQL, start, end, events)
            done = end * events
            rate = done / (time.perf_counter() - t0)
            print(f"\r  {done:,} events ({rate:,.0f}/s)", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        await conn.execute("VACUUM ANALYZE runs")
        await conn.execute("ANALYZE events")
        print(f"  population built in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    finally:
        await conn.close()


async def time_http(
    base: str, params: dict[str, Any], samples: int, path: str = "/v1/runs"
) -> tuple[list[float], int]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        times: list[float] = []
        rows = 0
        for _ in range(samples + 5):
            t0 = time.perf_counter()
            r = await client.get(path, params={**params, "limit": 50})
            times.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
            rows = len(r.json().get("runs", ()))
        return times[5:], rows  # the first few warm caches and connections


async def time_raw(url: str, params: dict[str, Any], samples: int) -> list[float]:
    sql, args = compiled(params, 50)
    conn = await asyncpg.connect(url)
    try:
        statement = await conn.prepare(sql)
        times: list[float] = []
        for _ in range(samples + 5):
            t0 = time.perf_counter()
            await statement.fetch(*args)
            times.append((time.perf_counter() - t0) * 1000)
        return times[5:]
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=1_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    figures: dict[str, Any] = {"runs": args.runs, "events": args.events, "filters": {}}
    with scratch_database() as url:
        print(f"audit benchmark: {args.runs:,} runs x {args.events:,} events", file=sys.stderr)
        asyncio.run(populate(url, args.runs, args.events))
        with server_process(url) as base:
            print(f"{'filter':32} {'rows':>4} {'HTTP p50':>9} {'p99':>7} "
                  f"{'asyncpg p50':>12} {'p99':>7}  (ms)")  # fmt: skip
            # The fixed cost of a request (httpx, uvicorn, FastAPI) with no query at all.
            fixed, _ = asyncio.run(time_http(base, {}, args.samples, "/healthz"))
            print(f"{'GET /healthz (HTTP floor)':32} {'':>4} {pct(fixed, 50):>9.2f} "
                  f"{pct(fixed, 99):>7.2f}")  # fmt: skip
            figures["http_floor"] = {"p50_ms": pct(fixed, 50), "p99_ms": pct(fixed, 99)}
            for name, params in FILTERS.items():
                http, rows = asyncio.run(time_http(base, params, args.samples))
                raw = asyncio.run(time_raw(url, params, args.samples))
                print(
                    f"{name:32} {rows:>4} {pct(http, 50):>9.2f} {pct(http, 99):>7.2f} "
                    f"{pct(raw, 50):>12.2f} {pct(raw, 99):>7.2f}"
                )
                figures["filters"][name] = {
                    "rows": rows,
                    "http_p50_ms": pct(http, 50),
                    "http_p99_ms": pct(http, 99),
                    "asyncpg_p50_ms": pct(raw, 50),
                    "asyncpg_p99_ms": pct(raw, 99),
                }
    write_json(args.json, figures)


if __name__ == "__main__":
    main()
