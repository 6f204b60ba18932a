"""`agent-replay verify --run | --thread`: exit 0 intact, 1 altered (naming the first altered
seq and why), 3 no such run or thread, on a real database altered with plain SQL."""

from __future__ import annotations

import json

import asyncpg

from agent_replay.chain import fold
from agent_replay.config import asyncpg_dsn
from agent_replay.log import EventLog
from tests.cli.test_replay_command import _replay
from tests.support.pg import Databases


async def test_verify_when_intact_altered_or_unknown_then_exit_0_1_or_3(
    databases: Databases,
) -> None:
    url = await databases.clone()
    try:
        async with EventLog.connect(url, pool_size=2) as log:
            for run_id in ("vc-1", "vc-2"):
                await log.append(run_id, [{"type": "RUN_STARTED", "threadId": "th-vc"}])
                await log.append(run_id, [{"type": "M", "n": n} for n in range(6)])
        intact = _replay("verify", "--run", "vc-1", "--database-url", url)
        assert intact.returncode == 0, intact.stderr
        assert intact.stdout.decode().startswith("run vc-1: intact, 7 events, head ")
        thread = _replay("verify", "--thread", "th-vc", "--json", "--database-url", url)
        assert thread.returncode == 0, thread.stderr
        body = json.loads(thread.stdout)
        assert (body["ok"], [r["run_id"] for r in body["runs"]]) == (True, ["vc-1", "vc-2"])

        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            # Seq 4 of vc-2: inside a batch row or a row of its own.
            await conn.execute(
                """
                UPDATE events SET chunk = array_to_string(ARRAY(
                    SELECT CASE WHEN seq - n + o = 4 THEN replace(x, '2', '9') ELSE x END
                    FROM unnest(string_to_array(chunk, E'\\n')) WITH ORDINALITY AS u(x, o)
                    ORDER BY o), E'\\n')
                WHERE run_id = 'vc-2' AND seq >= 4 AND seq - n < 4
                """
            )
        finally:
            await conn.close()
        altered = _replay("verify", "--thread", "th-vc", "--database-url", url)
        assert altered.returncode == 1, altered.stderr
        lines = altered.stdout.decode().splitlines()
        assert lines[0].startswith("run vc-1: intact")
        assert lines[1] == "run vc-2: altered at seq 4 (hash_mismatch)"
        as_json = _replay("verify", "--run", "vc-2", "--json", "--database-url", url)
        assert as_json.returncode == 1
        answer = json.loads(as_json.stdout)
        assert (answer["ok"], answer["first_bad_seq"], answer["reason"]) == (
            False, 4, "hash_mismatch")  # fmt: skip

        for which in (("--run", "vc-none"), ("--thread", "th-none")):
            unknown = _replay("verify", *which, "--database-url", url)
            assert unknown.returncode == 3 and unknown.stdout == b""
            assert unknown.stderr.decode().startswith("agent-replay verify: no run")
    finally:
        await databases.drop(url)


async def test_verify_when_a_thread_was_erased_then_exit_4_naming_each_run_erased_with_its_head(
    databases: Databases,
) -> None:
    url = await databases.clone()
    try:
        async with EventLog.connect(url, pool_size=2) as log:
            await log.append("ve-1", [{"type": "RUN_STARTED", "threadId": "th-ve"}])
            await log.append("ve-1", [{"type": "M", "n": n} for n in range(4)])
            events = await log.read_events("ve-1", 0, 100)
        head = fold((e.seq, e.chunk) for e in events).hex()
        erased = _replay("erase", "--thread", "th-ve", "--database-url", url)
        assert erased.returncode == 0, erased.stderr
        for which in (("--run", "ve-1"), ("--thread", "th-ve")):
            answer = _replay("verify", *which, "--database-url", url)
            assert answer.returncode == 4, answer.stderr
            assert answer.stdout.decode() == f"run ve-1: erased, 5 events, head {head} then\n"
    finally:
        await databases.drop(url)
