"""A Citus cluster of private PostgreSQL clusters: a coordinator and workers on this machine.

Each node is a `tests.support.cluster.Cluster` (initdb into a temporary folder, its own
loopback port) started with `shared_preload_libraries = 'citus'`; the database `replay` is
made on every node with the `citus` extension, the coordinator registers itself and adds
every worker. Clients (the service, the tests) talk to the coordinator only.

    with citus_cluster(workers=2) as citus:
        url = citus.url()                     # the coordinator's `replay` database
        citus.worker_urls()                   # each worker's, to look at where rows landed

Citus must be installed in the PostgreSQL these clusters run (`citus.so` in its library
folder); when it is not, `require_citus` fails naming how to install it.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support.cluster import SUPERUSER, Cluster, bindir

DATABASE = "replay"

# Citus's own settings for a node: the extension preloaded, prepared transactions allowed
# (Citus commits a transaction that wrote on several workers with two-phase commit; the
# service must not cause one on its hot path, and a test counts them), and enough
# connections for the coordinator's connections to workers beside the service's.
SETTINGS: dict[str, str] = {
    "shared_preload_libraries": "'citus'",
    "max_prepared_transactions": "100",
    "max_connections": "200",
}

INSTALL_HINT = (
    "Citus is not installed in this machine's PostgreSQL ({libdir} has no citus.so). "
    "Here: run ../shared/citus/install.sh as root (beside the repository). Elsewhere: "
    "install Citus's own packages for your PostgreSQL (https://docs.citusdata.com, "
    "`postgresql-15-citus-13.2` from packagecloud.io/citusdata) or use its container image."
)


def citus_libdir() -> Path:
    """PostgreSQL's library folder of the binaries the test clusters run."""
    pg_config = bindir() / "pg_config"
    if pg_config.is_file():
        out = subprocess.run([str(pg_config), "--pkglibdir"], capture_output=True, text=True)
        if out.returncode == 0:
            return Path(out.stdout.strip())
    return bindir().parent / "lib"


def missing_citus() -> str | None:
    """Why Citus cannot run here (None: it can)."""
    libdir = citus_libdir()
    if (libdir / "citus.so").is_file():
        return None
    return INSTALL_HINT.format(libdir=libdir)


class CitusCluster:
    """A coordinator and its workers, each a private `Cluster`."""

    def __init__(self, coordinator: Cluster, workers: list[Cluster]) -> None:
        self.coordinator = coordinator
        self.workers = workers

    def url(self, database: str = DATABASE) -> str:
        return self.coordinator.url(database)

    def worker_urls(self, database: str = DATABASE) -> list[str]:
        return [w.url(database) for w in self.workers]

    def psql(self, node: Cluster, sql: str, database: str = DATABASE) -> str:
        done = subprocess.run(
            [str(node.bin / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h",
             "127.0.0.1", "-p", str(node.port), "-U", SUPERUSER, "-d", database, "-c", sql],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"psql on {node!r} failed: {done.stderr}\n{node.log_tail()}")
        return done.stdout

    def create_database(self, name: str) -> str:
        """Another database formed as `replay` is (the extension on every node, the
        workers added: Citus keeps its nodes per database); the coordinator's URL."""
        for node in [self.coordinator, *self.workers]:
            self.psql(node, f"CREATE DATABASE {name}", database="postgres")
            self.psql(node, "CREATE EXTENSION citus", database=name)
        port = self.coordinator.port
        self.psql(self.coordinator, f"SELECT citus_set_coordinator_host('127.0.0.1', {port})", name)
        for node in self.workers:
            self.psql(self.coordinator, f"SELECT citus_add_node('127.0.0.1', {node.port})", name)
        return self.url(name)

    def destroy(self) -> None:
        for node in [self.coordinator, *self.workers]:
            node.destroy()


def _node(root: Path, name: str) -> Cluster:
    node = Cluster(root / name, settings=SETTINGS)
    node.init()
    node.start()
    return node


def form(root: Path, workers: int = 2) -> CitusCluster:
    """Start a coordinator and `workers` workers under `root`, the `replay` database on
    each with the extension, the workers added to the coordinator."""
    coordinator = _node(root, "coordinator")
    nodes = [_node(root, f"worker{i}") for i in range(1, workers + 1)]
    citus = CitusCluster(coordinator, nodes)
    for node in [coordinator, *nodes]:
        citus.psql(node, f"CREATE DATABASE {DATABASE}", database="postgres")
        citus.psql(node, "CREATE EXTENSION citus")
    citus.psql(coordinator, f"SELECT citus_set_coordinator_host('127.0.0.1', {coordinator.port})")
    for node in nodes:
        citus.psql(coordinator, f"SELECT citus_add_node('127.0.0.1', {node.port})")
    return citus


@contextlib.contextmanager
def citus_cluster(workers: int = 2) -> Iterator[CitusCluster]:
    """A formed Citus cluster, destroyed (every node) after."""
    reason = missing_citus()
    if reason is not None:
        raise RuntimeError(reason)
    root = Path(tempfile.mkdtemp(prefix="replay-citus-"))
    # The nodes run as an unprivileged account when we are root: it must reach its folder.
    root.chmod(0o755)
    citus: CitusCluster | None = None
    try:
        citus = form(root, workers)
        yield citus
    finally:
        if citus is not None:
            citus.destroy()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """`python -m tests.support.citus`: form a cluster, migrate it, print the coordinator's
    URL and keep it until interrupted (for ops/bench/append.py --database-url)."""
    import argparse
    import signal
    import time

    from agent_replay import migrate

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--shard-count", type=int, help="shards per distributed table (Citus's default: 32)"
    )
    args = parser.parse_args()
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    with citus_cluster(args.workers) as citus:
        if args.shard_count:
            # Read by create_distributed_table when the migration runs.
            citus.psql(
                citus.coordinator,
                f"ALTER DATABASE {DATABASE} SET citus.shard_count = {args.shard_count}",
            )
        migrate.upgrade(citus.url())
        print(citus.url(), flush=True)
        try:
            while not stop:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
