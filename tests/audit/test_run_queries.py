"""GET /v1/runs against a generated population, checked against a plain Python filter
of the generation spec; event filters against the unfiltered log."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from agent_replay.log import EventLog

BASE = datetime(2026, 3, 1, tzinfo=UTC)
TOOLS = ("search", "fetch", "calc", "write")


@dataclass(frozen=True)
class Spec:
    run_id: str
    thread_id: str
    agent: str | None
    tools: tuple[str, ...]
    outcome: str  # finished, error, running, cancelled, interrupted, abandoned
    tokens: int | None
    created_at: datetime
    code: str | None = None  # an error's RUN_ERROR code (abandoned: always "abandoned")

    @property
    def status(self) -> str:
        # An abandoned run is cancelled by a RUN_ERROR, as a disconnect policy closes it.
        return "cancelled" if self.outcome == "abandoned" else self.outcome

    @property
    def error(self) -> str | None:
        return f"boom {self.run_id}" if self.outcome in ("error", "abandoned") else None

    @property
    def error_code(self) -> str | None:
        if self.outcome == "abandoned":
            return "abandoned"
        return self.code if self.outcome == "error" else None

    def chunks(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"type": "RUN_STARTED", "runId": self.run_id}]
        for i, tool in enumerate(self.tools * 2):  # each tool twice: names stay distinct
            out.append({"type": "TOOL_CALL_START", "toolCallId": f"c{i}", "toolCallName": tool})
        if self.outcome in ("error", "abandoned"):
            error: dict[str, Any] = {"type": "RUN_ERROR", "message": self.error}
            if self.error_code is not None:
                error["code"] = self.error_code
            out.append(error)
        elif self.outcome != "running":
            usage = None if self.tokens is None else {"totalTokens": self.tokens}
            out.append({"type": "RUN_FINISHED", "runId": self.run_id, "usage": usage})
        return out


def population(n: int = 240) -> list[Spec]:
    rng = random.Random(20261130)
    outcomes = (
        "finished", "finished", "error", "running", "cancelled", "interrupted", "abandoned",
    )  # fmt: skip
    return [
        Spec(
            run_id=f"q{i:03d}",
            thread_id=f"t{i % 13}",
            agent=rng.choice(("alpha", "beta", "gamma", None)),
            tools=tuple(rng.sample(TOOLS, rng.randint(0, 3))),
            outcome=rng.choice(outcomes),
            tokens=rng.choice((None, rng.randint(1, 999))),
            # Few distinct minutes: many ties, so the run_id tie-break is exercised.
            created_at=BASE + timedelta(minutes=rng.randint(0, 40)),
            code=rng.choice((None, "upstream_error", "rate_limited")),
        )
        for i in range(n)
    ]


SPECS = population()


@pytest.fixture(scope="module")
async def populated(database_url: str) -> list[Spec]:
    log = await EventLog.open(database_url)
    try:

        async def one(spec: Spec) -> None:
            await log.create_run(spec.run_id, thread_id=spec.thread_id, agent=spec.agent)
            closing = spec.outcome != "running"
            special = spec.status in ("cancelled", "interrupted")
            await log.append(
                spec.run_id,
                spec.chunks(),
                close=closing,
                close_status=spec.status if special else None,
            )

        await asyncio.gather(*(one(s) for s in SPECS))
    finally:
        await log.close()
    conn = await asyncpg.connect(database_url)
    try:
        await conn.executemany(
            "UPDATE runs SET created_at = $2 WHERE run_id = $1",
            [(s.run_id, s.created_at) for s in SPECS],
        )
    finally:
        await conn.close()
    return SPECS


def expected(specs: list[Spec], params: dict[str, Any]) -> list[str]:
    def keep(s: Spec) -> bool:
        statuses = params.get("status")
        if isinstance(statuses, str):
            statuses = [statuses]
        codes = params.get("error_code")
        if isinstance(codes, str):
            codes = [codes]
        return (
            ("thread_id" not in params or s.thread_id == params["thread_id"])
            and (statuses is None or s.status in statuses)
            and ("agent" not in params or s.agent == params["agent"])
            and ("tool" not in params or params["tool"] in s.tools)
            and ("has_error" not in params
                 or (s.error is not None) == (params["has_error"] == "true"))
            and (codes is None or s.error_code in codes)
            and ("created_after" not in params
                 or s.created_at >= datetime.fromisoformat(params["created_after"]))
            and ("created_before" not in params
                 or s.created_at < datetime.fromisoformat(params["created_before"]))
        )  # fmt: skip

    chosen = sorted((s for s in specs if keep(s)), key=lambda s: (s.created_at, s.run_id))
    return [s.run_id for s in reversed(chosen)]


async def all_pages(client: httpx.AsyncClient, params: dict[str, Any]) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    cursor = None
    while True:
        r = await client.get(
            "/v1/runs", params={**params, "limit": 7, **({"cursor": cursor} if cursor else {})}
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["runs"]) <= 7
        runs += body["runs"]
        cursor = body["next_cursor"]
        if cursor is None:
            return runs


T10 = (BASE + timedelta(minutes=10)).isoformat()
T25 = (BASE + timedelta(minutes=25)).isoformat()

FILTERS: list[dict[str, Any]] = [
    {},
    {"thread_id": "t3"},
    {"status": "finished"},
    {"status": ["cancelled", "interrupted"]},
    {"status": "running"},
    {"agent": "beta"},
    {"tool": "calc"},
    {"has_error": "true"},
    {"has_error": "false"},
    {"created_after": T10, "created_before": T25},
    {"agent": "alpha", "tool": "search", "has_error": "false"},
    {"thread_id": "t5", "status": ["running", "error"]},
    {"tool": "write", "created_after": T25},
    {"agent": "nobody"},
    {"error_code": "abandoned"},
    {"error_code": ["upstream_error", "rate_limited"]},
    {"error_code": "abandoned", "status": "cancelled", "created_after": T10},
    {"error_code": "upstream_error", "has_error": "true", "agent": "gamma"},
    {"error_code": "nobody"},
]


@pytest.mark.parametrize(
    "params", FILTERS, ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()) or "all"
)
async def test_list_runs_when_filtered_then_pages_equal_plain_python_filter(
    client: httpx.AsyncClient, populated: list[Spec], params: dict[str, Any]
) -> None:
    runs = await all_pages(client, params)
    assert [r["run_id"] for r in runs] == expected(populated, params)


async def test_list_runs_then_each_summary_matches_what_the_run_did(
    client: httpx.AsyncClient, populated: list[Spec]
) -> None:
    by_id = {s.run_id: s for s in populated}
    # Every code the filters ask for is there to be found.
    assert {"abandoned", "upstream_error", "rate_limited", None} <= {
        s.error_code for s in populated
    }
    for run in await all_pages(client, {}):
        spec = by_id[run["run_id"]]
        assert run["status"] == spec.status
        assert run["thread_id"] == spec.thread_id and run["agent"] == spec.agent
        assert run["event_count"] == len(spec.chunks())
        assert run["tool_names"] == sorted(set(spec.tools))
        assert run["error"] == spec.error
        assert run["error_code"] == spec.error_code
        finished_tokens = (
            spec.tokens if spec.outcome in ("finished", "cancelled", "interrupted") else None
        )
        assert run["usage"] == (None if finished_tokens is None else
                                {"promptTokens": None, "completionTokens": None,
                                 "totalTokens": finished_tokens})  # fmt: skip
        assert datetime.fromisoformat(run["created_at"]) == spec.created_at
        assert (run["closed_at"] is None) == (spec.outcome == "running")
        assert (run["duration_ms"] is None) == (spec.outcome == "running")


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"cursor": "not-a-cursor"}, 400, "invalid_cursor"),
        ({"cursor": "WzEsMl0"}, 400, "invalid_cursor"),  # base64 of [1,2]
        ({"created_after": "yesterday"}, 422, "invalid_request"),
        ({"status": "exploded"}, 422, "invalid_request"),
        ({"limit": "0"}, 422, "invalid_request"),
        ({"has_error": "maybe"}, 422, "invalid_request"),
    ],
)
async def test_list_runs_when_params_invalid_then_error_body(
    client: httpx.AsyncClient, params: dict[str, str], status: int, code: str
) -> None:
    r = await client.get("/v1/runs", params=params)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code


# 15 chunks an append are stored a row per event; 120 and 300 in batch rows (300: two of
# them), which the SQL filters let through and the events are tested one by one.
@pytest.mark.parametrize("repeat", [5, 40, 100], ids=["rows", "batch-rows", "two-batch-rows"])
async def test_events_when_filtered_by_type_and_time_then_equal_python_filter_of_the_log(
    client: httpx.AsyncClient, database_url: str, repeat: int
) -> None:
    run = f"ev-{repeat}"
    log = await EventLog.open(database_url)
    try:
        for batch in range(4):  # separate commits: distinct receive times
            await log.append(run, [{"type": t, "n": batch} for t in ("A", "B", "C")] * repeat)
    finally:
        await log.close()
    everything = (await client.get(f"/v1/runs/{run}/events", params={"limit": 10_000})).json()[
        "events"
    ]
    assert [e["seq"] for e in everything] == list(range(1, 4 * 3 * repeat + 1))
    times = sorted({e["received_at"] for e in everything})
    assert len(times) == 4
    start, end = times[1], times[3]

    async def filtered(**params: Any) -> list[int]:
        seqs: list[int] = []
        after = 0
        while True:
            r = await client.get(
                f"/v1/runs/{run}/events", params={**params, "after": after, "limit": 4}
            )
            assert r.status_code == 200, r.text
            body = r.json()
            seqs += [e["seq"] for e in body["events"]]
            if body["next_after"] is None:
                return seqs
            after = body["next_after"]

    def by(types: set[str] | None, lo: str | None, hi: str | None) -> list[int]:
        def at(text: str) -> datetime:
            return datetime.fromisoformat(text)

        return [
            e["seq"] for e in everything
            if (types is None or e["type"] in types)
            and (lo is None or at(e["received_at"]) >= at(lo))
            and (hi is None or at(e["received_at"]) < at(hi))
        ]  # fmt: skip

    assert await filtered(type="B") == by({"B"}, None, None)
    assert await filtered(type=["A", "C"]) == by({"A", "C"}, None, None)
    assert await filtered(received_after=start, received_before=end) == by(None, start, end)
    assert await filtered(type="C", received_after=start) == by({"C"}, start, None)
    assert await filtered(type="Z") == []
    assert await filtered(types="B*,C") == by({"B", "C"}, None, None)
