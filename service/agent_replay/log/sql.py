"""The log's SQL: `queries.sql`, parsed once into named, literal statements.

As procrastinate keeps its queries: one file a person can read (and paste into
psql) next to the code, each statement under `-- name: <name>` with the
comment lines after it saying what it does. Statements are sent as written;
nothing is assembled from fragments at run time. The one thing filled in, once,
at parse: the NOTIFY channels' names, written in the file as psql variables
(`:'events_channel'`) so that `agent_replay.log.notifications` alone defines them.

    _READ_EVENTS = QUERIES["read_events"]   # at import: a misspelt name fails at once
    await conn.fetch(_READ_EVENTS, run_id, after, limit)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from agent_replay.log.notifications import CHANNEL, READERS_CHANNEL, THREADS_CHANNEL

SOURCE = Path(__file__).with_name("queries.sql")

_NAME = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)

# psql's quoted variables (`:'name'`) and the values they stand for.
_VARIABLE = re.compile(r":'([a-z_]+)'")
VARIABLES: Mapping[str, str] = MappingProxyType(
    {
        "events_channel": CHANNEL,
        "readers_channel": READERS_CHANNEL,
        "threads_channel": THREADS_CHANNEL,
    }
)


def _literal(match: re.Match[str]) -> str:
    value = VARIABLES.get(match[1])
    if value is None:
        raise ValueError(f"{SOURCE.name}: no value for the variable :'{match[1]}'")
    return "'" + value.replace("'", "''") + "'"


def parse(text: str) -> Mapping[str, str]:
    """{name: statement} from `-- name:` blocks; each statement ends with `;`.

    The doc comment right after the name line is left out of the statement
    (comments inside it stay); text between blocks is the file's own prose.
    """
    queries: dict[str, str] = {}
    parts = _NAME.split(text)
    for name, block in zip(parts[1::2], parts[2::2], strict=True):
        lines = block.strip().splitlines()
        while lines and lines[0].startswith("--"):
            lines.pop(0)
        body = "\n".join(lines)
        end = body.find(";\n")
        statement = (body if end < 0 else body[: end + 1]).strip()
        if not statement.endswith(";") or name in queries:
            raise ValueError(f"{SOURCE.name}: query {name!r} is unterminated or named twice")
        queries[name] = _VARIABLE.sub(_literal, statement[:-1])
    return MappingProxyType(queries)


QUERIES = parse(SOURCE.read_text("utf-8"))


# The append statements (agent_replay.log.request.Group.statement picks one per group).
APPEND = QUERIES["append"]
APPEND_ONES = QUERIES["append_ones"]
