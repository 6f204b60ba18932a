"""The private-cluster helper itself: what the fault and replica tests rely on it doing."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from tests.support.cluster import running_cluster, tmpfs


async def _value(url: str, sql: str) -> object:
    conn = await asyncpg.connect(url, timeout=5)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


async def _until(read: Callable[[], Awaitable[object]], value: object) -> None:
    async with asyncio.timeout(20):
        while await read() != value:  # noqa: ASYNC110 (a replica has no event to wait on)
            await asyncio.sleep(0.05)


def _mount_of(path: Path) -> str:
    for line in Path("/proc/mounts").read_text().splitlines():
        _, target, fstype, *_ = line.split()
        if target == str(path):
            return fstype
    return "(none)"


async def test_cluster_stopped_then_refuses_and_started_again_keeps_data() -> None:
    with running_cluster() as pg:
        await _value(pg.url(), "CREATE TABLE t AS SELECT 42 AS x")
        await asyncio.to_thread(pg.stop)
        assert not pg.accepting()
        with pytest.raises(OSError):
            await _value(pg.url(), "SELECT 1")
        await asyncio.to_thread(pg.start)
        assert await _value(pg.url(), "SELECT x FROM t") == 42
        assert await _value(pg.url(), "SELECT current_user") == "postgres"


async def test_cluster_killed_then_no_process_left_and_recovers_on_start() -> None:
    with running_cluster() as pg:
        await _value(pg.url(), "CREATE TABLE t AS SELECT 7 AS x")
        pids = pg.processes()
        assert len(pids) > 3  # postmaster, checkpointer, walwriter, ...
        await asyncio.to_thread(pg.kill)
        assert pg.processes() == []
        await asyncio.to_thread(pg.start)
        assert await _value(pg.url(), "SELECT x FROM t") == 7
        assert "not properly shut down" in pg.log_tail(100_000)


async def test_cluster_frozen_then_connect_hangs_and_thawed_answers() -> None:
    with running_cluster() as pg:
        with pg.frozen(), pytest.raises(TimeoutError):
            await asyncio.wait_for(_value(pg.url(), "SELECT 1"), 1)
        assert await _value(pg.url(), "SELECT 1") == 1


async def test_standby_streams_primary_writes_and_promoted_accepts_writes() -> None:
    with running_cluster() as pg:
        await _value(pg.url(), "CREATE TABLE t AS SELECT 1 AS x")
        standby = await asyncio.to_thread(pg.standby)
        assert standby.port != pg.port
        assert await _value(standby.url(), "SELECT pg_is_in_recovery()") is True
        await _value(pg.url(), "INSERT INTO t VALUES (2)")
        await _until(lambda: _value(standby.url(), "SELECT count(*) FROM t"), 2)
        await asyncio.to_thread(pg.stop)
        await asyncio.to_thread(standby.promote)
        await _value(standby.url(), "INSERT INTO t VALUES (3)")
        assert await _value(standby.url(), "SELECT sum(x) FROM t") == 6


async def test_cluster_data_on_tmpfs_and_wal_elsewhere_then_both_where_asked() -> None:
    root = Path(tempfile.mkdtemp(prefix="replay-cluster-"))
    with (
        tmpfs(root / "data", "96m") as data,
        running_cluster(root=root, data_dir=data, wal_dir=root / "wal") as pg,
    ):
        assert _mount_of(data) == "tmpfs"
        assert (data / "pg_wal").resolve() == root / "wal"
        assert await _value(pg.url(), "SELECT current_setting('data_directory')") == str(data)
