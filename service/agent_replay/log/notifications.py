"""The log's notifications: one definition of the channel and its payload.

The append statements (`queries.sql`) queue a NOTIFY on `CHANNEL` at commit;
the LISTEN connection (`agent_replay.log.listener`) decodes it here. Unless the
group closed a run, they queue it only when a process other than the committing
one listens (`log_listeners`, where each LISTEN connection registers): a lone
process hears its own commits in-process. `queries.sql` names the channels as
psql variables, filled in from here (`agent_replay.log.sql`): these are their
one definition. A payload is one line per run the commit changed:

    <run_id> <last_seq>[ c]          "c": the commit closed the run

Run ids never hold a space or a line break (`check_run_id`). The version is in
the channel's name: a new payload format (or a new rule for when one is sent,
as version 2's registration) gets a new channel, so a process of
one version never misreads another's (during a rolling upgrade the old and
new processes simply do not hear each other, and the stream's slow re-check
covers the difference). A notification is only a hint: late, lost or repeated
ones change when a reader reads, never what.

A second channel, `READERS_CHANNEL`, says which hosted runs have just lost
their last reader on every process (`readers_left` in `queries.sql`): one run
id a line. The run's driver, on whichever process, judges its disconnect
policy at once instead of at its next poll; the poll stays, for what a lost
notification or a dead process leaves unsaid.

A third, `THREADS_CHANNEL`, says a run was made on a thread (`create_run`
and `create_run_if_missing` in `queries.sql`), so a thread's followers on every
process learn of it at once (`agent_replay.stream.thread`). A payload is one line, the
thread's key: `thread_key(thread_id)`, the MD5 hex of the thread id as stored. A
thread id may hold any text (line breaks, thousands of characters); its key is
32 characters a payload always carries, and the follower compares keys. Sent on
every creation, heard by this process's own listener too: creations are rare, and
no in-process hook tells of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from agent_replay.log.values import Notice

VERSION = 2
CHANNEL = f"replay_events_v{VERSION}"
READERS_CHANNEL = f"replay_readers_v{VERSION}"
THREADS_CHANNEL = f"replay_threads_v{VERSION}"


def encode(notices: Iterable[Notice]) -> str:
    """A payload, as the append statement's `note` step writes it (tests use this)."""
    return "\n".join(f"{n.run_id} {n.last_seq}{' c' if n.closed else ''}" for n in notices)


def decode(payload: str) -> list[Notice]:
    """The notices in a payload; a line that does not parse is skipped (a hint, not a record)."""
    notices = []
    for line in payload.split("\n"):
        run_id, _, rest = line.partition(" ")
        seq, _, flag = rest.partition(" ")
        if run_id and seq.isascii() and seq.isdigit() and flag in ("", "c"):
            notices.append(Notice(run_id, int(seq), flag == "c"))
    return notices


def decode_left(payload: str) -> list[str]:
    """The runs in a `READERS_CHANNEL` payload (a line each; blank ones skipped)."""
    return [line for line in payload.split("\n") if line and " " not in line]


def thread_key(thread_id: str) -> str:
    """What a `THREADS_CHANNEL` line names a thread by: PostgreSQL's `md5(thread_id)`
    (of the id as stored, `agent_replay.log.chunks.storable`)."""
    return hashlib.md5(thread_id.encode("utf-8", "surrogatepass")).hexdigest()


def decode_threads(payload: str) -> list[str]:
    """The thread keys in a `THREADS_CHANNEL` payload (a line each; others skipped)."""
    return [line for line in payload.split("\n") if len(line) == 32 and line.isalnum()]
