"""The database's data directory fills up (its WAL on a volume of its own): appends are a
clear 503 and leave nothing half-stored, reads go on, and once space is freed appends
work again without restarting anything."""

from __future__ import annotations

import contextlib
import errno
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from agent_replay.client import Producer
from tests.faults.conftest import chunk, prepare, replica, stored
from tests.support.cluster import Cluster, running_cluster, tmpfs

# Room for an initialized, migrated cluster (about 25 MB without its WAL) and a little more.
DATA_VOLUME = "40m"


@pytest.fixture
def small_disk() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="replay-cluster-"))
    with (
        tmpfs(root / "data", DATA_VOLUME) as data,
        running_cluster(root=root, data_dir=data, wal_dir=root / "wal") as pg,
    ):
        yield pg


def _fill(path: Path) -> Path:
    """Take every free byte of the volume holding `path` with one file."""
    filler = path / "filler"
    block = b"\0" * (1 << 16)
    with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(block)
    # The last, partial block: whatever is left in bytes.
    with open(filler, "ab", buffering=0) as f:
        for size in (1 << 12, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * size)
    return filler


async def test_data_volume_full_then_503_nothing_partial_reads_work_and_heals_when_freed(
    small_disk: Cluster, server_log: IO[bytes]
) -> None:
    database = prepare(small_disk)
    with replica(database, server_log) as (base, proc):
        async with httpx.AsyncClient(timeout=30) as http:
            acknowledged: list[Any] = []
            r = await http.post(f"{base}/v1/runs/full/events", json={"events": [chunk("full", 1)]})
            assert r.status_code == 200
            acknowledged.append(chunk("full", 1))
            filler = _fill(small_disk.data_dir)
            # Batches until the database cannot extend its tables any more.
            refused: httpx.Response | None = None
            for _ in range(200):
                n = len(acknowledged)
                batch = [chunk("full", n + i + 1) | {"pad": "x" * 2000} for i in range(100)]
                r = await http.post(
                    f"{base}/v1/runs/full/events", json={"events": batch, "expected_seq": n + 1}
                )
                if r.status_code != 200:
                    refused = r
                    break
                acknowledged += batch
            assert refused is not None, "the volume never filled"
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "unavailable"
            assert "space" in refused.json()["error"]["message"]
            assert refused.headers["Retry-After"] == "1"

            # Nothing of the refused batch, and the run row agrees with its events.
            log = await stored(http, base, "full")
            assert [c for _, c in log] == acknowledged
            run = (await http.get(f"{base}/v1/runs/full")).json()
            assert run["last_seq"] == len(acknowledged) and not run["closed"]
            # Reads keep working: the log, the run list, a stream's catch-up.
            assert (await http.get(f"{base}/v1/runs", params={"limit": 5})).status_code == 200
            async with http.stream(
                "GET", f"{base}/v1/runs/full/stream", headers={"Last-Event-ID": str(len(log) - 1)}
            ) as stream:
                assert stream.status_code == 200
                async for line in stream.aiter_lines():
                    if line.startswith("id: "):
                        assert int(line[4:]) == len(log)
                        break

            # Space freed: the same process takes the very batch it refused.
            filler.unlink()
            n = len(acknowledged)
            retry = [chunk("full", n + i + 1) for i in range(100)]
            async with Producer(base, "full", next_seq=n + 1) as producer:
                for c in retry:
                    producer.submit(c)
                await producer.close_run()
            assert proc.poll() is None  # never restarted
            log = await stored(http, base, "full")
            assert [c for _, c in log] == acknowledged + retry
            assert [s for s, _ in log] == list(range(1, len(log) + 1))
            print(
                f"FIGURES disk full: {len(acknowledged)} events stored before the volume was "
                f"full; the refused batch was absent; {producer.retries} retries once freed"
            )


def test_fill_when_volume_is_small_then_no_byte_is_left(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "v", "1m") as volume:
        filler = _fill(volume)
        with pytest.raises(OSError) as err, open(volume / "more", "wb", buffering=0) as f:
            f.write(b"x" * 4096)
        assert err.value.errno == errno.ENOSPC
        filler.unlink()
