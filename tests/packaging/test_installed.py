"""`pip wheel .` and `pip install` of that wheel into a clean venv outside the repository:
the installed `agent-replay` (and its alias `replay`) migrates, serves and finds its own
files (alembic scripts, static files) from the installed package. pip's cache is reused,
so this takes seconds once the dependencies have been downloaded."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from agent_replay import migrate
from tests.support.pg import Databases
from tests.support.servers import free_port

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Installed:
    wheel: Path
    bin: Path
    # A folder with nothing of the repository in it: where the commands run.
    elsewhere: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("REPLAY_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")
        }
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        return {**env, **extra}

    def replay(
        self, *args: str, command: str = "agent-replay", **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / command), *args],
            cwd=self.elsewhere,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=120,
        )


def _run(*args: str | Path, cwd: Path) -> None:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def installed(clone: Path, scratch: Path) -> Installed:
    home = scratch / "installed"
    home.mkdir()
    wheels, venv, elsewhere = home / "wheels", home / "venv", home / "elsewhere"
    elsewhere.mkdir()
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", wheels, ".", cwd=clone)
    (wheel,) = wheels.glob("agent_replay-*.whl")
    _run(sys.executable, "-m", "venv", venv, cwd=home)
    _run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel, cwd=elsewhere)
    return Installed(wheel, venv / "bin", elsewhere)


def test_wheel_when_built_then_ships_migrations_and_static_files(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    # The checkout keeps its alembic scripts at the top level; the wheel, in the package.
    assert migrate.MIGRATIONS == ROOT / "migrations"
    revisions = {p.name for p in migrate.MIGRATIONS.glob("versions/*.py")}
    assert revisions
    assert {f"agent_replay/migrations/versions/{r}" for r in revisions} <= names
    assert {"agent_replay/migrations/env.py", "agent_replay/migrations/script.py.mako"} <= names
    assert "agent_replay/api/static/demo.html" in names
    assert not any(n.startswith(("tests/", "migrations/")) for n in names)


def test_wheel_when_built_then_holds_every_module_of_the_checkout(
    installed: Installed, clone: Path
) -> None:
    # Packages are found, not listed (the alembic scripts through the package's link to
    # `migrations/`): every module of the checkout must be in every install.
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    package = clone / "service" / "agent_replay"
    modules = {
        "agent_replay/" + p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if p.relative_to(package).parts[0] != "migrations"
    }
    modules |= {
        "agent_replay/" + p.relative_to(clone).as_posix()
        for p in (clone / "migrations").rglob("*.py")
    }
    assert modules
    assert modules - names == set()
    # And the append body's C scan, compiled for this platform.
    assert any(n.startswith("agent_replay/ingest/_scan.") and n.endswith(".so") for n in names)


def test_installed_replay_when_run_outside_repo_then_imports_the_installed_package(
    installed: Installed,
) -> None:
    python = installed.bin / "python"
    where = subprocess.run(
        [str(python), "-c", "import agent_replay; print(agent_replay.__file__)"],
        cwd=installed.elsewhere,
        env=installed.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(installed.bin.parent)
    helped = installed.replay("--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: agent-replay ")
    # The short alias runs the same command.
    alias = installed.replay("--help", command="replay")
    assert alias.returncode == 0, alias.stderr
    assert alias.stdout.split("\n", 1)[1] == helped.stdout.split("\n", 1)[1]


def test_wheel_when_installed_then_its_only_top_level_name_is_agent_replay(
    installed: Installed,
) -> None:
    # Nothing generic (`service`, `migrations`, `tests`) lands in site-packages, where it
    # would shadow an application's own package of that name or be shadowed by it.
    names = zipfile.ZipFile(installed.wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"agent_replay"}
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    assert zipfile.ZipFile(installed.wheel).read(top_level).decode().split() == ["agent_replay"]


def test_installed_package_when_every_module_imported_then_its_dependencies_are_declared(
    installed: Installed,
) -> None:
    # The clean venv holds only what pyproject's `dependencies` bring (no dev extras): a
    # module importing anything else fails here, not on a user's first `agent-replay tail`.
    code = (
        "import importlib, pkgutil, agent_replay\n"
        "for m in pkgutil.walk_packages(agent_replay.__path__, 'agent_replay.'):\n"
        "    if not m.name.startswith('agent_replay.migrations'):\n"
        "        importlib.import_module(m.name)\n"
    )
    done = subprocess.run(
        [str(installed.bin / "python"), "-c", code],
        cwd=installed.elsewhere,
        env=installed.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]


async def test_installed_replay_migrate_when_database_configured_then_schema_at_head(
    installed: Installed, databases: Databases
) -> None:
    url = await databases.empty()
    try:
        done = installed.replay("migrate", REPLAY_DATABASE_URL=url)
        assert done.returncode == 0, done.stderr
        assert await migrate.current_revision(url) == migrate.head_revision()
        check = installed.replay("migrate", "--check", "--database-url", url)
        assert check.returncode == 0, check.stderr
    finally:
        await databases.drop(url)


@pytest.fixture(scope="module")
def served(installed: Installed) -> Iterator[str]:
    """`agent-replay serve` from the installed package on its embedded default database."""
    port = free_port()
    log = (installed.elsewhere / "serve.log").open("wb")
    proc = subprocess.Popen(
        [str(installed.bin / "replay"), "serve", "--port", str(port)],
        cwd=installed.elsewhere,
        env=installed.env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                output = (installed.elsewhere / "serve.log").read_text(errors="replace")
                pytest.fail(f"installed agent-replay serve never became ready:\n{output[-3000:]}")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_installed_replay_when_serving_embedded_default_then_ready_and_demo_page_served(
    installed: Installed, served: str
) -> None:
    ready = httpx.get(f"{served}/readyz", timeout=10)
    assert ready.status_code == 200
    assert ready.json()["schema"] == migrate.head_revision()
    # The embedded cluster lives in the working directory's .replay/, not in the package.
    assert (installed.elsewhere / ".replay" / "pg" / "PG_VERSION").is_file()
    page = httpx.get(f"{served}/", timeout=10)
    assert page.status_code == 200
    assert "<html" in page.text.lower()
    for asset in ("/static/docs/swagger-ui-bundle.js", "/static/docs/redoc.standalone.js"):
        assert httpx.get(f"{served}{asset}", timeout=10).status_code == 200, asset
    assert httpx.get(f"{served}/favicon.svg", timeout=10).status_code == 200
