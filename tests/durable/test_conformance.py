"""The Durable Streams protocol's own conformance suite against `agent-replay serve`.

`@durable-streams/server-conformance-tests` (pinned in tests/durable/node)
runs under vitest against a real `agent-replay serve` process on loopback, backed
by this module's own PostgreSQL database. Every test that is not one of the
reserved subscription APIs (skipped by the suite unless asked for) must pass.
It runs with the rest of `ops/test` (Node packages installed by it up front).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.servers import serve_subprocess

# The suite's count in the pinned version: 338 tests, 6 of them the reserved
# subscription APIs it skips unless asked for.
SUITE_TESTS = 338
SUBSCRIPTION_TESTS = 6

pytestmark = pytest.mark.conformance


@pytest.mark.timeout(900)
def test_conformance_suite_when_run_against_replay_serve_then_every_test_passes(
    durable_harness: Path, database_url: str, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    # A shorter long-poll keeps the suite's timeouts (it waits ~20 s at most) quick.
    # Its CORS test preflights from https://example.com: listed, as a deployment lists
    # the origins of its browser clients.
    env = {
        "REPLAY_DATABASE_URL": database_url,
        "REPLAY_DURABLE_LONG_POLL_SECONDS": "5",
        "REPLAY_CORS_ORIGINS": "https://example.com",
    }
    with serve_subprocess(env) as (base, _proc):
        run = subprocess.run(
            [
                "npx",
                "--no-install",
                "vitest",
                "run",
                "--reporter=json",
                f"--outputFile={report}",
            ],
            cwd=durable_harness,
            env={**os.environ, "DS_URL": base, "CI": "true"},
            capture_output=True,
            text=True,
            timeout=840,
        )
    assert report.exists(), f"vitest wrote no report: {run.stdout[-2000:]}{run.stderr[-2000:]}"
    result = json.loads(report.read_text())
    failed = [
        f"{t['fullName']}: {(t.get('failureMessages') or [''])[0][:300]}"
        for suite in result["testResults"]
        for t in suite["assertionResults"]
        if t["status"] == "failed"
    ]
    assert failed == [], "\n".join(failed)
    assert result["numTotalTests"] == SUITE_TESTS
    assert result["numPassedTests"] == SUITE_TESTS - SUBSCRIPTION_TESTS
    assert result["numPendingTests"] == SUBSCRIPTION_TESTS
