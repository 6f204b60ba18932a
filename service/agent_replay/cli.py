"""The `replay` command: serve, migrate, and the offline tools."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_replay import logs
from agent_replay.config import Settings

if TYPE_CHECKING:  # generic only to the type checker
    from agent_replay.ingest import Rules
    from agent_replay.log.values import RunRecord

    _Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

EXAMPLES = """\
examples:
  agent-replay serve                                  # :8000, embedded PostgreSQL in ./.replay
  agent-replay tail run-1 --from-start                # follow a run live over HTTP
  agent-replay transcript --run run-1                 # Markdown, from the database
  agent-replay transcript --thread t-1 --format html --out t-1.html
  agent-replay export --thread t-1 --out t-1.jsonl    # then agent-replay import it elsewhere
  agent-replay export --run run-1 --out r.jsonl --sign-key ed25519.pem   # a signed export
  agent-replay verify r.jsonl --public-key ed25519.pub.pem               # 0 intact, 1 altered
  agent-replay project chunks.jsonl                   # UIMessage[] from a file; no database
  curl -s localhost:8000/v1/runs/run-1/events | jq -c '.events[].chunk' | agent-replay project -
  agent-replay prune --closed-before 30d --dry-run    # what retention would delete
  agent-replay verify --thread t-1                    # exit 1 naming the first altered seq
  agent-replay erase --thread t-1 --reason "request 42"   # tombstones left; exit 1: unknown
  REPLAY_DATABASE_URL=postgresql://me@db/replay agent-replay migrate

Commands that read a run or thread use --database-url (or REPLAY_DATABASE_URL), else the
embedded database in --data-dir (or REPLAY_DATA_DIR, default .replay). `agent-replay COMMAND -h`
lists each command's options and their defaults.
"""

# Commands whose INFO lines (migrations, the embedded cluster) are noise next to their own
# output; -v shows them.
_QUIET = frozenset({"project", "export", "import", "transcript", "prune", "tail", "verify"})


def _positive(text: str) -> int:
    value = int(text) if text.isascii() and text.isdigit() else 0
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1 to 64")
    return value


def _plural(count: int, noun: str, plural: str | None = None) -> str:
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def _uvicorn_options(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    from agent_replay.api.connections import ConnectionLimits, GuardedHttpToolsProtocol

    limits = ConnectionLimits(
        header_seconds=settings.header_timeout_seconds,
        body_seconds=settings.body_timeout_seconds,
        max_connections=settings.max_connections,
    )
    # Our access log (agent_replay.api.access) replaces uvicorn's; log_config=None keeps
    # uvicorn's own lines on the root handler, in REPLAY_LOG_FORMAT.
    return {
        # uvicorn takes a factory as its protocol class; a partial of a module-level
        # class pickles into `--workers` processes.
        "http": functools.partial(GuardedHttpToolsProtocol, limits=limits),
        "timeout_keep_alive": settings.keep_alive_seconds,
        "host": args.host,
        "port": args.port,
        "log_level": args.log_level,
        "access_log": False,
        "log_config": None,
        # SIGTERM: uvicorn stops accepting and sse-starlette ends every stream; the
        # appends in flight finish within this bound, then the lifespan closes the rest.
        "timeout_graceful_shutdown": max(1, round(settings.shutdown_grace_seconds)),
    }


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from agent_replay.api.app import create_app
    from agent_replay.workers import tune_collector

    settings = Settings()
    if args.database_url:
        settings.database_url = args.database_url
    if args.data_dir:
        settings.data_dir = args.data_dir
    workers = args.workers or settings.workers
    where = (
        settings.database_url and "the configured database"
    ) or f"embedded PostgreSQL in {settings.data_dir}/pg"
    logs.configure(settings.log_format, args.log_level)
    logging.getLogger("replay").info(
        "serving on http://%s:%s with %s%s",
        args.host,
        args.port,
        where,
        f", {workers} worker processes" if workers > 1 else "",
    )
    if workers > 1:
        return _serve_workers(args, settings, workers)
    app = create_app(settings, migrate_on_start=True if args.migrate else None)
    tune_collector()
    uvicorn.run(app, **_uvicorn_options(args, settings))
    return 0


def _serve_workers(args: argparse.Namespace, settings: Settings, workers: int) -> int:
    """`workers` processes on one port, each the whole service (as replicas are).

    The database is settled once, here, before any worker starts: the embedded
    cluster is started (and stopped after the last worker) by this process, and
    migrations run once, not once per worker racing the others. Each worker
    then makes its app from the environment (`agent_replay.api.app:worker_app`).
    """
    import uvicorn

    from agent_replay import migrate
    from agent_replay.embedded import embedded_postgres
    from agent_replay.workers import WORKER_LOG_LEVEL

    with contextlib.ExitStack() as stack:
        url = settings.database_url
        if url is None:
            url = stack.enter_context(embedded_postgres(settings.data_dir))
        if args.migrate or settings.database_url is None:
            migrate.upgrade(url)
        # Spawned workers inherit the environment: what they must agree on goes there.
        os.environ["REPLAY_DATABASE_URL"] = url
        os.environ[WORKER_LOG_LEVEL] = args.log_level
        uvicorn.run(
            "agent_replay.api.app:worker_app",
            factory=True,
            workers=workers,
            **_uvicorn_options(args, settings),
        )
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from agent_replay import migrate
    from agent_replay.embedded import embedded_postgres

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
        current = asyncio.run(migrate.current_revision(url))
        print(f"schema at {current}")
        if not args.downgrade and current == migrate.head_revision():
            # Runs stored before the hash chain get theirs (resumable: runs again here).
            report = asyncio.run(migrate.chain_backfill(url))
            if report.runs:
                print(f"chained {_plural(report.runs, 'run')} stored before the hash chain")
        return 0

    if url:
        return run(url)
    with embedded_postgres(args.data_dir or settings.data_dir) as embedded_url:
        return run(embedded_url)


def _project(args: argparse.Namespace) -> int:
    from agent_replay.projector import cli as projector_cli  # type: ignore[attr-defined,unused-ignore]

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
    from agent_replay import migrate
    from agent_replay.embedded import embedded_postgres

    with embedded_postgres(args.data_dir or settings.data_dir) as embedded:
        migrate.upgrade(embedded)
        yield embedded


def _failing(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Refusals as one line on stderr: exit 2 for bad input, 1 for the rest."""

    def run(args: argparse.Namespace) -> int:
        from agent_replay.errors import InvalidInput, ReplayError

        try:
            return command(args)
        except ReplayError as exc:
            print(f"agent-replay {args.command}: {exc.message}", file=sys.stderr)
            return 2 if isinstance(exc, InvalidInput) else 1
        except OSError as exc:
            print(f"agent-replay {args.command}: {exc}", file=sys.stderr)
            return 2

    return run


def _export(args: argparse.Namespace) -> int:
    from agent_replay.archive.commands import export_to
    from agent_replay.archive.signing import private_key

    # Read before the database is: a key that will not do fails before any work.
    key = None if args.sign_key is None else private_key(args.sign_key.read_bytes())
    # A standby serves the events only with the configured primary (not --database-url's).
    read_url = None if args.database_url else Settings().read_database_url
    with _database(args) as url:
        events = asyncio.run(
            export_to(
                url,
                run_id=args.run_id,
                thread_id=args.thread_id,
                out=args.out,
                read_url=read_url,
                sign_key=key,
            )
        )
    if args.out is not None:
        print(
            f"agent-replay export: wrote {_plural(events, 'event')} to {args.out}", file=sys.stderr
        )
    return 0


def _verify_stored(args: argparse.Namespace) -> int:
    """Exit 0 when every run is intact, 1 when one is altered, 3 when there is no such
    run or thread, 4 when runs were erased (and the others are intact); a refusal of the
    input: 2."""
    from agent_replay.archive.commands import verify_in
    from agent_replay.audit.integrity import ERASED, thread_json
    from agent_replay.errors import NotFound

    try:
        with _database(args) as url:
            verdicts = asyncio.run(verify_in(url, run_id=args.run_id, thread_id=args.thread_id))
    except NotFound as exc:
        print(f"agent-replay verify: {exc.message}", file=sys.stderr)
        return 3
    if args.json:
        body = verdicts[0].to_json() if args.run_id else thread_json(args.thread_id, verdicts)
        print(json.dumps(body))
    for v in verdicts:
        if v.ok:
            line = f"run {v.run_id}: intact, {_plural(v.events, 'event')}, head {v.head}"
        elif v.reason == ERASED:
            line = f"run {v.run_id}: erased, {_plural(v.events, 'event')}, head {v.head} then"
        elif v.first_bad_seq is None:
            line = f"run {v.run_id}: not verified ({v.reason})"
        else:
            line = f"run {v.run_id}: altered at seq {v.first_bad_seq} ({v.reason})"
        print(line, file=sys.stderr if args.json else sys.stdout)
    if all(v.ok for v in verdicts):
        return 0
    # Erased is no alteration: 4 when every run that is not intact was erased.
    return 4 if all(v.ok or v.reason == ERASED for v in verdicts) else 1


def _import(args: argparse.Namespace) -> int:
    from agent_replay.archive.commands import import_archive, read_signed
    from agent_replay.archive.signing import public_key
    from agent_replay.ingest.imported import redact_loaded

    key = None if args.public_key is None else public_key(args.public_key.read_bytes())
    # A bad file (or one not signed by the key) never reaches the database.
    archive = read_signed(args.file.read_bytes(), key)
    # Stored text like any producer's: the service's redaction rules apply (and the run's
    # agent's, as on a hosted run), before the database is touched.
    runs, renumbered = redact_loaded(archive.runs, _import_rules())
    archive = replace(archive, runs=runs)
    with _database(args) as url:
        report = asyncio.run(import_archive(url, archive))
    loaded = [run for run in archive.runs if run.record.run_id in report.created]
    events = sum(len(run.events) for run in loaded)
    chain = (
        "chain checked"
        if archive.chained
        else "unchained: a version 1 file carries no hash chain, none was checked"
    )
    print(
        f"agent-replay import: {_plural(len(report.created), 'run')} imported "
        f"({_plural(events, 'event')}), {len(report.unchanged)} already stored and unchanged; "
        f"{chain}"
    )
    counts: Counter[str] = Counter()
    for run in loaded:
        counts.update(run.redactions or {})
    if counts:
        matches = ", ".join(f"{rule} {n}" for rule, n in sorted(counts.items()))
        changed = [run_id for run_id in renumbered if run_id in report.created]
        print(
            f"agent-replay import: redacted by REPLAY_REDACT before storing ({matches}); "
            f"{_plural(len(changed), 'run')} renumbered from seq 1: {', '.join(changed)}"
        )
    return 0


def _import_rules() -> Callable[[RunRecord], Rules | None]:
    """The rules an import applies to a run: the service's, plus its agent's if known."""
    from agent_replay.agents.catalog import load_catalog
    from agent_replay.ingest import Rules, parse_rules

    settings = Settings()
    window = settings.redact_max_window
    service = parse_rules(settings.redact, "REPLAY_REDACT", window)
    agents = load_catalog(settings.agents, {}, redact_max_window=window).agents
    compiled: dict[str | None, Rules | None] = {}

    def rules_for(record: RunRecord) -> Rules | None:
        name = record.agent if record.agent in agents else None
        if name not in compiled:
            rules = service if name is None else service.plus(agents[name].redact)
            compiled[name] = Rules(rules) if rules else None
        return compiled[name]

    return rules_for


def _verify_file(args: argparse.Namespace) -> int:
    from agent_replay.archive.commands import verify_path

    verdict = verify_path(args.file, args.public_key)
    if verdict.status != "intact":
        where = "" if verdict.line is None else f" at line {verdict.line}"
        print(f"agent-replay verify: {verdict.status}{where}: {verdict.reason}", file=sys.stderr)
        return verdict.exit_code
    for run in verdict.runs:
        print(f"run {run.run_id}: {_plural(run.events, 'event')}, head {run.head.hex()}")
    if verdict.signature_checked:
        signature = f"signature valid, by the key with public key sha256 {verdict.signed_by}"
    elif verdict.signed_by is not None:
        signature = (
            f"signed by the key with public key sha256 {verdict.signed_by}, not checked "
            "(give --public-key)"
        )
    else:
        signature = "unsigned"
    events = sum(run.events for run in verdict.runs)
    print(
        f"agent-replay verify: intact: {_plural(len(verdict.runs), 'run')}, "
        f"{_plural(events, 'event')}, every chain holds; {signature}"
    )
    return 0


def _verify(args: argparse.Namespace) -> int:
    """An export file needs no database; a run or thread is checked where it is stored."""
    if args.file is not None:
        if args.json:
            raise SystemExit("agent-replay verify: --json is for --run and --thread")
        return _verify_file(args)
    if args.public_key is not None:
        raise SystemExit("agent-replay verify: --public-key is for an export FILE")
    return _verify_stored(args)


def _transcript(args: argparse.Namespace) -> int:
    from agent_replay.archive.commands import archive_from_database
    from agent_replay.archive.reader import read_archive
    from agent_replay.transcript import from_archive, render

    if args.file is not None:
        archive = read_archive(args.file.read_bytes())  # no database, no server
    else:
        with _database(args) as url:
            archive = asyncio.run(
                archive_from_database(url, run_id=args.run_id, thread_id=args.thread_id)
            )
    transcript = from_archive(archive, normalize=args.normalize, thread_id=args.thread_id)
    text = render(transcript, args.format)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
    return 0


DATE_FORMATS = (
    "ISO 8601 (2026-11-30, 2026-11-30T12:00, 2026-11-30T12:00:00+02:00; UTC unless an offset "
    "is given) or an age before now (90s, 30m, 12h, 2d, 1w)"
)
_AGES = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def when(text: str, now: datetime | None = None) -> datetime:
    """A moment: ISO 8601 (a date alone is its midnight, UTC unless an offset is given),
    or an age such as `2d` or `12h` meaning that long before `now`."""
    text = text.strip()
    number, unit = text[:-1], text[-1:].lower()
    if unit in _AGES and number.isascii() and number.isdigit():
        return (now or datetime.now(UTC)) - timedelta(seconds=int(number) * _AGES[unit])
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date: use {DATE_FORMATS}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _prune(args: argparse.Namespace) -> int:
    from agent_replay.archive.commands import prune_closed, sweep_expired_streams

    if args.closed_before is None and not args.expired_streams:
        print(
            "agent-replay prune: give --closed-before DATE, --expired-streams or both",
            file=sys.stderr,
        )
        return 2
    verb = "would delete" if args.dry_run else "deleted"
    with _database(args) as url:
        if args.expired_streams:
            swept = asyncio.run(
                sweep_expired_streams(
                    url,
                    dry_run=args.dry_run,
                    batch_events=args.batch_events,
                    max_rate=args.max_rate,
                )
            )
            left = f"; {_plural(swept.failed, 'stream')} failed, left whole" if swept.failed else ""
            print(
                f"agent-replay prune: {verb} {_plural(swept.streams, 'expired stream')} and "
                f"{_plural(swept.events, 'event')}{left}"
            )
        if args.closed_before is None:
            return 1 if swept.failed else 0
        before: datetime = args.closed_before
        report = asyncio.run(
            prune_closed(
                url,
                before,
                dry_run=args.dry_run,
                batch_events=args.batch_events,
                max_rate=args.max_rate,
                whole_months=not args.rows_only,
            )
        )
    span = (
        f"; closed {report.oldest.isoformat()} to {report.newest.isoformat()}"
        if report.oldest and report.newest
        else ""
    )
    print(
        f"agent-replay prune: {verb} {_plural(report.runs, 'run')} and "
        f"{_plural(report.events, 'event')} closed before {before.isoformat()}{span}"
    )
    if report.partitions:
        months = ", ".join(f"{m:%Y-%m}" for m in report.partitions)
        dropped = "would drop" if args.dry_run else "dropped"
        print(f"agent-replay prune: {dropped} whole months of events: {months}")
    for month, why in sorted(report.held.items()):
        print(
            f"agent-replay prune: kept month {month:%Y-%m} whole ({why}); its other runs row by row"
        )
    return 0


def _erase(args: argparse.Namespace) -> int:
    import getpass

    from agent_replay.archive.commands import erase_thread

    with _database(args) as url:
        tombstones = asyncio.run(
            erase_thread(
                url, args.thread_id, erased_by=f"cli:{getpass.getuser()}", reason=args.reason
            )
        )
    # The tombstones as the API answers them: a line each.
    for tombstone in tombstones:
        print(json.dumps(tombstone.to_json(), ensure_ascii=False))
    events = sum(t.events for t in tombstones)
    print(
        f"agent-replay erase: thread {args.thread_id!r}: {_plural(len(tombstones), 'run')} "
        f"erased ({_plural(events, 'event')}), a tombstone each",
        file=sys.stderr,
    )
    return 0


_DATABASE_URL = "PostgreSQL URL (default: REPLAY_DATABASE_URL, else the embedded database)"
_DATA_DIR = (
    "the embedded database's home, used without a URL (default: REPLAY_DATA_DIR, else .replay)"
)


def _add_database(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database-url", metavar="URL", help=_DATABASE_URL)
    parser.add_argument("--data-dir", type=Path, metavar="DIR", help=_DATA_DIR)


def _add_offline(sub: _Subparsers, common: argparse.ArgumentParser) -> None:
    export = _command(sub, common, "export", "write a run or a thread as an export file")
    which = export.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", dest="run_id", metavar="ID", help="the run to export")
    which.add_argument("--thread", dest="thread_id", metavar="ID", help="every run of a thread")
    export.add_argument("--out", type=Path, metavar="FILE", help="file to write (default: stdout)")
    export.add_argument(
        "--sign-key",
        type=Path,
        metavar="FILE",
        help="an Ed25519 private key in PEM (openssl genpkey -algorithm ed25519): end the file"
        " with a signature line (default: unsigned)",
    )
    _add_database(export)
    export.set_defaults(run=_failing(_export))

    verify = _command(
        sub,
        common,
        "verify",
        "check a stored run (or a thread's runs) or an export file against its hash chain:"
        " exit 0 intact, 1 altered (the first altered seq or line and why), 2 bad arguments or"
        " key, 3 no such run or thread, or a file that is unreadable or not an export, 4 erased"
        " runs (the others intact)",
    )
    # Exactly one of these.
    target = verify.add_mutually_exclusive_group(required=True)
    target.add_argument("file", nargs="?", type=Path, help="an export file (no database needed)")
    target.add_argument("--run", dest="run_id", metavar="ID", help="the stored run to verify")
    target.add_argument("--thread", dest="thread_id", metavar="ID", help="every run of a thread")
    verify.add_argument(
        "--public-key",
        type=Path,
        metavar="FILE",
        help="with FILE: the signer's Ed25519 public key in PEM (openssl pkey -pubout): the file"
        " must be signed by it (default: the signature, if any, is not checked)",
    )
    verify.add_argument(
        "--json",
        action="store_true",
        help="with --run or --thread: print the answer of GET /v1/runs/{id}/verify (or of a"
        " thread's) on stdout (default: lines of text)",
    )
    _add_database(verify)
    verify.set_defaults(run=_failing(_verify))

    load = _command(
        sub,
        common,
        "import",
        "load an export file (idempotent, all or nothing; REPLAY_REDACT applies)",
    )
    load.add_argument("file", type=Path, help="an export file (from agent-replay export)")
    load.add_argument(
        "--public-key",
        type=Path,
        metavar="FILE",
        help="import only if the file is signed by this Ed25519 public key in PEM"
        " (default: a signature is not required; the chain is always checked)",
    )
    _add_database(load)
    load.set_defaults(run=_failing(_import))

    transcript = _command(
        sub, common, "transcript", "a readable transcript of an export file, a run or a thread"
    )
    source = transcript.add_mutually_exclusive_group(required=True)
    source.add_argument("file", nargs="?", type=Path, help="an export file (no database needed)")
    source.add_argument("--run", dest="run_id", metavar="ID", help="a run from the database")
    source.add_argument(
        "--thread", dest="thread_id", metavar="ID", help="a thread's runs from the database"
    )
    transcript.add_argument(
        "--format",
        choices=("markdown", "json", "html"),
        default="markdown",
        help="output format (default: markdown)",
    )
    transcript.add_argument(
        "--out", type=Path, metavar="FILE", help="file to write (default: stdout)"
    )
    transcript.add_argument(
        "--normalize",
        action="store_true",
        help="apply the legacy server normalization to messages (default: off)",
    )
    _add_database(transcript)
    transcript.set_defaults(run=_failing(_transcript))

    prune = _command(
        sub,
        common,
        "prune",
        "delete closed runs older than a date, and expired streams, in small batches",
    )
    prune.add_argument(
        "--closed-before",
        type=when,
        metavar="DATE",
        help=f"delete runs closed before this moment: {DATE_FORMATS}"
        " (default: none; give this, --expired-streams or both)",
    )
    prune.add_argument(
        "--expired-streams",
        action="store_true",
        help="delete Durable Streams past their TTL or expiry, with their runs, as the"
        " service's own sweep does (default: off)",
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="only say what would go (default: delete)"
    )
    prune.add_argument(
        "--batch-events",
        type=int,
        default=10_000,
        metavar="N",
        help="events deleted per transaction (default: 10000)",
    )
    prune.add_argument(
        "--max-rate",
        type=float,
        metavar="EVENTS_PER_S",
        help="delete at most this many events a second, sparing the appends' I/O"
        " (default: as fast as it goes)",
    )
    prune.add_argument(
        "--rows-only",
        action="store_true",
        help="delete row by row even where a whole month's partition could be dropped"
        " (default: drop those; for comparison, as ops/bench/prune.py does)",
    )
    _add_database(prune)
    prune.set_defaults(run=_failing(_prune))

    erase = _command(
        sub,
        common,
        "erase",
        "erase every run of a thread in one transaction, leaving a tombstone each"
        " (exit 0: erased or already erased; 1: no such thread, or the database refused;"
        " 2: bad input)",
    )
    erase.add_argument("--thread", dest="thread_id", metavar="ID", required=True,
                       help="the thread to erase")  # fmt: skip
    erase.add_argument(
        "--reason", metavar="TEXT", help="why, kept in each tombstone (default: none)"
    )
    _add_database(erase)
    erase.set_defaults(run=_failing(_erase))


def _tail(args: argparse.Namespace) -> int:
    from agent_replay.console.tail import TailOptions
    from agent_replay.console.tail import main as tail_main

    offset = "start" if args.from_start else ("now" if args.offset is None else str(args.offset))
    mode = "raw" if args.raw else ("json" if args.json else "pretty")
    options = TailOptions(args.url, args.api_key, offset, mode, args.retry_seconds)
    return tail_main(args.run_id, args.thread_id, options)


def _seq(text: str) -> int:
    if not text.isdigit() or not text.isascii():
        raise argparse.ArgumentTypeError(f"{text!r} is not a seq (0 or more)")
    return int(text)


def _add_tail(sub: _Subparsers, common: argparse.ArgumentParser) -> None:
    tail = sub.add_parser(
        "tail",
        parents=[common],
        help="follow a run (or a thread's runs) live over HTTP",
        description="Follow a run through the service's HTTP stream, resuming after a dropped "
        "connection. Exit codes: 0 done, 1 API error, 3 no such run or thread, 4 key refused, "
        "5 service unreachable, 130 interrupted.",
    )
    which = tail.add_mutually_exclusive_group(required=True)
    which.add_argument("run_id", nargs="?", metavar="RUN_ID", help="the run to follow")
    which.add_argument(
        "--thread",
        dest="thread_id",
        metavar="THREAD_ID",
        help="the thread's newest run, then each next one as it starts (waits for a first)",
    )
    tail.add_argument(
        "--url",
        default=os.environ.get("REPLAY_URL", "http://127.0.0.1:8000"),
        help="the service (REPLAY_URL, default http://127.0.0.1:8000)",
    )
    tail.add_argument(
        "--api-key",
        default=os.environ.get("REPLAY_API_KEY") or None,
        help="sent as Authorization: Bearer (default: REPLAY_API_KEY, else none)",
    )
    start = tail.add_mutually_exclusive_group()
    start.add_argument(
        "--from-start",
        action="store_true",
        help="replay the run from its start (default: only what comes next)",
    )
    start.add_argument(
        "--offset", type=_seq, metavar="N", help="start after seq N (default: only what comes next)"
    )
    shape = tail.add_mutually_exclusive_group()
    shape.add_argument(
        "--raw",
        action="store_true",
        help="the stored chunks as JSON Lines (default: readable text)",
    )
    shape.add_argument(
        "--json",
        action="store_true",
        help='the decoded stream as JSON Lines ({"seq", "chunk", "decoded"?}) '
        "(default: readable text)",
    )
    tail.add_argument(
        "--retry-seconds",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to keep resuming after the connection drops (default: 30)",
    )
    tail.set_defaults(run=_tail)


def _command(
    sub: _Subparsers, common: argparse.ArgumentParser, name: str, summary: str
) -> argparse.ArgumentParser:
    description = summary[0].upper() + summary[1:] + "."
    return sub.add_parser(name, help=summary, description=description, parents=[common])


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also log migrations and the embedded database (default: only warnings, "
        "except for serve and migrate)",
    )
    parser = argparse.ArgumentParser(
        prog="agent-replay",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = _command(sub, common, "serve", "run the HTTP service")
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
    )
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    _add_database(serve)
    serve.add_argument(
        "--migrate",
        action="store_true",
        help="apply migrations before serving (default: only on the embedded database)",
    )
    serve.add_argument(
        "--workers",
        type=_positive,
        default=None,
        help="processes serving the port, each with its own pool and event loop "
        "(default: REPLAY_WORKERS, else 1; about one per core the database leaves free)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=("critical", "error", "warning", "info", "debug"),
        help="log level (default: info)",
    )
    serve.set_defaults(run=_serve)

    mig = _command(sub, common, "migrate", "alembic upgrade to head (or --check, --downgrade REV)")
    _add_database(mig)
    mig.add_argument(
        "--revision", default="head", metavar="REV", help="upgrade to this revision (default: head)"
    )
    mig.add_argument(
        "--downgrade", metavar="REV", help="downgrade to this revision instead (default: none)"
    )
    mig.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 unless the schema is at head (default: upgrade)",
    )
    mig.set_defaults(run=_migrate)

    project = _command(
        sub, common, "project", "project chunks or an export file to UIMessage[] (no database)"
    )
    project.add_argument(
        "file",
        help="chunks as JSON Lines or one JSON array, or an export file; - reads standard input",
    )
    project.add_argument(
        "--snapshots",
        action="store_true",
        help="print the messages after every chunk, one line each (default: only the final ones)",
    )
    project.add_argument(
        "--normalize",
        action="store_true",
        help="apply the legacy server normalization (default: off)",
    )
    project.set_defaults(run=_project)
    _add_offline(sub, common)
    _add_tail(sub, common)
    return parser


def _log_format() -> logs.LogFormat:
    # Read alone: a command must not fail on some other setting before it can say why.
    return "json" if os.environ.get("REPLAY_LOG_FORMAT", "").strip().lower() == "json" else "text"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    quiet = args.command in _QUIET and not args.verbose
    logs.configure(_log_format(), logging.WARNING if quiet else logging.INFO)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except BrokenPipeError:
        # The reader went away (`agent-replay project f | head`): stop quietly, as a tool killed
        # by SIGPIPE would. stdout points at /dev/null so the interpreter's last flush
        # cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
