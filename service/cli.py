"""The `replay` command: serve, migrate, and the offline tools."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from service import logs
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
        settings.database_url and "the configured database"
    ) or f"embedded PostgreSQL in {settings.data_dir}/pg"
    logs.configure(settings.log_format, args.log_level)
    logging.getLogger("replay").info("serving on http://%s:%s with %s", args.host, args.port, where)
    # Fewer, cheaper collections: a server holding thousands of live streams
    # keeps hundreds of thousands of tracked objects, and CPython's default
    # thresholds walk them all every few seconds (pauses of hundreds of ms
    # under a 1,000-subscriber fan-out, measured with ops/bench/stream.py).
    gc.set_threshold(20_000, 50, 100)
    # Our access log (service.api.access) replaces uvicorn's; log_config=None keeps
    # uvicorn's own lines on the root handler, in REPLAY_LOG_FORMAT.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        log_config=None,
        # SIGTERM: uvicorn stops accepting and sse-starlette ends every stream; the
        # appends in flight finish within this bound, then the lifespan closes the rest.
        timeout_graceful_shutdown=max(1, round(settings.shutdown_grace_seconds)),
    )
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


@contextmanager
def _database(args: argparse.Namespace) -> Iterator[str]:
    """--database-url, else REPLAY_DATABASE_URL, else the embedded database (migrated)."""
    settings = Settings()
    url = args.database_url or settings.database_url
    if url:
        yield url
        return
    from service import migrate
    from service.embedded import embedded_postgres

    with embedded_postgres(args.data_dir or settings.data_dir) as embedded:
        migrate.upgrade(embedded)
        yield embedded


def _failing(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Refusals as one line on stderr: exit 2 for bad input, 1 for the rest."""

    def run(args: argparse.Namespace) -> int:
        from service.errors import InvalidInput, ReplayError

        try:
            return command(args)
        except ReplayError as exc:
            print(f"replay {args.command}: {exc.message}", file=sys.stderr)
            return 2 if isinstance(exc, InvalidInput) else 1
        except OSError as exc:
            print(f"replay {args.command}: {exc}", file=sys.stderr)
            return 2

    return run


def _export(args: argparse.Namespace) -> int:
    from service.archive.commands import export_to

    with _database(args) as url:
        events = asyncio.run(
            export_to(url, run_id=args.run_id, thread_id=args.thread_id, out=args.out)
        )
    if args.out is not None:
        print(f"replay export: wrote {events} events to {args.out}", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    from service.archive.commands import import_archive
    from service.archive.reader import read_archive

    archive = read_archive(args.file.read_bytes())  # a bad file never reaches the database
    with _database(args) as url:
        report = asyncio.run(import_archive(url, archive))
    events = sum(len(run.events) for run in archive.runs if run.record.run_id in report.created)
    print(
        f"replay import: {len(report.created)} runs imported ({events} events), "
        f"{len(report.unchanged)} already stored and unchanged"
    )
    return 0


def _transcript(args: argparse.Namespace) -> int:
    from service.archive.commands import archive_from_database
    from service.archive.reader import read_archive
    from service.transcript import from_archive, render

    if args.file is not None:
        archive = read_archive(args.file.read_bytes())  # no database, no server
    else:
        with _database(args) as url:
            archive = asyncio.run(
                archive_from_database(url, run_id=args.run_id, thread_id=args.thread_id)
            )
    text = render(from_archive(archive, normalize=args.normalize), args.format)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
    return 0


def _when(text: str) -> datetime:
    moment = datetime.fromisoformat(text)  # a date alone is its midnight
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _prune(args: argparse.Namespace) -> int:
    from service.archive.commands import prune_closed

    before: datetime = args.closed_before
    with _database(args) as url:
        report = asyncio.run(
            prune_closed(url, before, dry_run=args.dry_run, batch_events=args.batch_events)
        )
    verb = "would delete" if args.dry_run else "deleted"
    span = (
        f"; closed {report.oldest.isoformat()} to {report.newest.isoformat()}"
        if report.oldest and report.newest
        else ""
    )
    print(
        f"replay prune: {verb} {report.runs} runs and {report.events} events "
        f"closed before {before.isoformat()}{span}"
    )
    return 0


def _add_database(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database-url", help="overrides REPLAY_DATABASE_URL")
    parser.add_argument("--data-dir", type=Path, help="embedded database home (REPLAY_DATA_DIR)")


def _add_offline(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = sub.add_parser("export", help="write a run or a thread as an export file")
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", dest="run_id", metavar="ID")
    which.add_argument("--thread", dest="thread_id", metavar="ID")
    export.add_argument("--out", type=Path, help="file to write (default: stdout)")
    _add_database(export)
    export.set_defaults(run=_failing(_export))

    load = sub.add_parser("import", help="load an export file (idempotent, all or nothing)")
    load.add_argument("file", type=Path)
    _add_database(load)
    load.set_defaults(run=_failing(_import))

    transcript = sub.add_parser("transcript", help="a readable transcript of a file, run or thread")
    source = transcript.add_mutually_exclusive_group(required=True)
    source.add_argument("file", nargs="?", type=Path, help="export file (no database needed)")
    source.add_argument("--run", dest="run_id", metavar="ID")
    source.add_argument("--thread", dest="thread_id", metavar="ID")
    transcript.add_argument("--format", choices=("markdown", "json", "html"), default="markdown")
    transcript.add_argument("--out", type=Path, help="file to write (default: stdout)")
    transcript.add_argument("--normalize", action="store_true")
    _add_database(transcript)
    transcript.set_defaults(run=_failing(_transcript))

    prune = sub.add_parser("prune", help="delete closed runs older than a date, in small batches")
    prune.add_argument("--closed-before", type=_when, required=True, metavar="DATE")
    prune.add_argument("--dry-run", action="store_true", help="only say what would go")
    prune.add_argument("--batch-events", type=int, default=10_000, help="events per transaction")
    _add_database(prune)
    prune.set_defaults(run=_failing(_prune))


def _tail(args: argparse.Namespace) -> int:
    from service.console.tail import TailOptions
    from service.console.tail import main as tail_main

    offset = "start" if args.from_start else ("now" if args.offset is None else str(args.offset))
    mode = "raw" if args.raw else ("json" if args.json else "pretty")
    options = TailOptions(args.url, args.api_key, offset, mode, args.retry_seconds)
    return tail_main(args.run_id, args.thread_id, options)


def _seq(text: str) -> int:
    if not text.isdigit() or not text.isascii():
        raise argparse.ArgumentTypeError(f"{text!r} is not a seq (0 or more)")
    return int(text)


def _add_tail(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tail = sub.add_parser(
        "tail",
        help="follow a run (or a thread's runs) live over HTTP",
        description="Follow a run through the service's HTTP stream, resuming after a dropped "
        "connection. Exit codes: 0 done, 1 API error, 3 no such run or thread, 4 key refused, "
        "5 service unreachable, 130 interrupted.",
    )
    which = tail.add_mutually_exclusive_group(required=True)
    which.add_argument("run_id", nargs="?", metavar="RUN_ID")
    which.add_argument(
        "--thread",
        dest="thread_id",
        metavar="THREAD_ID",
        help="the thread's newest run, then each next one",
    )
    tail.add_argument(
        "--url",
        default=os.environ.get("REPLAY_URL", "http://127.0.0.1:8000"),
        help="the service (REPLAY_URL, default http://127.0.0.1:8000)",
    )
    tail.add_argument(
        "--api-key",
        default=os.environ.get("REPLAY_API_KEY") or None,
        help="sent as Authorization: Bearer (REPLAY_API_KEY)",
    )
    start = tail.add_mutually_exclusive_group()
    start.add_argument("--from-start", action="store_true", help="replay the run from its start")
    start.add_argument(
        "--offset", type=_seq, metavar="N", help="start after seq N (default: only what comes next)"
    )
    shape = tail.add_mutually_exclusive_group()
    shape.add_argument("--raw", action="store_true", help="the stored chunks as JSON Lines")
    shape.add_argument(
        "--json",
        action="store_true",
        help='the decoded stream as JSON Lines ({"seq", "chunk", "decoded"?})',
    )
    tail.add_argument(
        "--retry-seconds",
        type=float,
        default=30.0,
        help="how long to keep resuming after the connection drops",
    )
    tail.set_defaults(run=_tail)


def build_parser() -> argparse.ArgumentParser:
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
    _add_offline(sub)
    _add_tail(sub)
    return parser


def _log_format() -> logs.LogFormat:
    # Read alone: a command must not fail on some other setting before it can say why.
    return "json" if os.environ.get("REPLAY_LOG_FORMAT", "").strip().lower() == "json" else "text"


def main(argv: Sequence[str] | None = None) -> int:
    logs.configure(_log_format())
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
