"""The pure parts of the batch layout: rows packed and cut back into events, and the
tight parse of a body's values, each against the plain per-event form."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_replay.config import Settings
from agent_replay.durable.bodies import message_chunk
from agent_replay.errors import InvalidEvent
from agent_replay.log import chunks, rows
from agent_replay.log.chunks import loads, stored, stored_token, stored_values
from agent_replay.log.sql import SOURCE
from agent_replay.log.values import StoredChunk

# Texts as the log holds them: no raw newline (see agent_replay.log.rows).
texts = st.text(st.characters(blacklist_characters="\n"), max_size=8)


def _packed(types: list[str], texts: list[str], least: int) -> Any:
    pairs = zip(types, texts, strict=True)
    return rows.packed([chunks.StoredChunk(t, c, None, None) for t, c in pairs], least)


def _rows_of(sizes: list[int]) -> tuple[list[tuple[int, int, str, str, str]], list[int]]:
    """Rows for appends of `sizes` (each packed as the writer packs it), and every seq."""
    out: list[tuple[int, int, str, str, str]] = []
    seq = 0
    for size in sizes:
        types = [f"T{seq + i}" for i in range(size)]
        chunks = [f'{{"i":{seq + i}}}' for i in range(size)]
        packed = _packed(types, chunks, 2)
        if packed is not None:
            out += [(seq + last, n, t, c, "at") for last, n, t, c in packed]
        else:
            out += [(seq + i + 1, 1, types[i], chunks[i], "at") for i in range(size)]
        seq += size
    return out, list(range(1, seq + 1))


@given(
    sizes=st.lists(st.integers(1, 600), min_size=1, max_size=5),
    after=st.integers(0, 3000),
    upto=st.none() | st.integers(0, 3000),
    limit=st.none() | st.integers(1, 700),
)
def test_rows_when_cut_from_any_seq_to_any_bound_then_each_event_once_in_order(
    sizes: list[int], after: int, upto: int | None, limit: int | None
) -> None:
    stored_rows, seqs = _rows_of(sizes)
    assert all(n <= rows.BATCH_MAX for _, n, _, _, _ in stored_rows)
    want = [s for s in seqs if s > after and (upto is None or s <= upto)][:limit]
    # What a read's WHERE keeps: rows holding any seq in the range (agent_replay.log.rows).
    kept = [r for r in stored_rows if r[0] > after and (upto is None or r[0] - r[1] < upto)]
    events = rows.events_of(kept, after, upto, limit)
    assert [(seq, kind, chunk) for seq, kind, chunk, _ in events] == [
        (s, f"T{s - 1}", f'{{"i":{s - 1}}}') for s in want
    ]
    chunks = rows.chunks_of([(r[0], r[1], r[3]) for r in kept], after, upto, limit)
    assert chunks == [(s, f'{{"i":{s - 1}}}') for s in want]


@given(st.lists(texts, min_size=1, max_size=40), st.lists(texts, min_size=1, max_size=40))
def test_packed_when_a_newline_in_any_type_or_text_then_a_row_per_event(
    types: list[str], chunks: list[str]
) -> None:
    chunks = (chunks * len(types))[: len(types)]
    packed = _packed(types, chunks, 1)
    assert packed is not None and sum(n for _, n, _, _ in packed) == len(chunks)
    assert _packed([*types, "A\nB"], [*chunks, "{}"], 1) is None
    assert _packed([*types, "A"], [*chunks, '{"a":\n1}'], 1) is None
    assert _packed(types, chunks, len(chunks) + 1) is None


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
# What a text column cannot hold (NUL, lone surrogates) next to what it can.
awkward = st.text(st.sampled_from(["a", "\x00", "\ud83d", "\udc00", "é", "\n"]), max_size=4)
events = st.fixed_dictionaries(
    {"type": st.text(min_size=1, max_size=6) | awkward.filter(bool)},
    optional={
        "messageId": awkward | st.integers(),
        "toolCallId": awkward,
        "delta": json_values,
    },
)


@given(st.lists(events | json_values, max_size=12))
def test_stored_values_when_any_json_then_same_as_one_chunk_at_a_time(
    values: list[Any],
) -> None:
    assert stored_values(values, untyped=True) == [
        message_chunk(v, i) for i, v in enumerate(values)
    ]
    try:
        one_by_one = [stored(v, i) for i, v in enumerate(values)]
    except InvalidEvent as expected:
        with pytest.raises(InvalidEvent) as caught:
            stored_values(values)
        assert caught.value.message == expected.message
    else:
        assert stored_values(values) == one_by_one


# Agent events as they mostly come: ASCII types and ids, any payload (strings that
# hold the separator `},{`, lists of objects, non-ASCII text).
plain_ids = st.text(st.sampled_from(["a", "b", "-", "_", "0"]), min_size=1, max_size=4)
tricky_text = st.text(st.sampled_from(["a", "}", ",", "{", '"', "\\", "é", "\x00"]), max_size=6)
plain_events = st.fixed_dictionaries(
    {"type": plain_ids},
    optional={
        "messageId": plain_ids | st.none(),
        "toolCallId": plain_ids,
        "delta": tricky_text | json_values,
        "args": st.lists(st.dictionaries(plain_ids, json_values, max_size=2), max_size=3),
    },
)


@given(st.lists(plain_events, min_size=2, max_size=12))
def test_stored_values_when_plain_events_then_column_path_same_as_one_at_a_time(
    values: list[Any],
) -> None:
    one_by_one = [stored(v, i) for i, v in enumerate(values)]
    assert stored_values(values) == one_by_one
    assert stored_values(values, untyped=True) == one_by_one
    fast = chunks._columns(values)
    # The column path declines what it cannot cut exactly, and never answers otherwise.
    assert fast is None or fast == one_by_one


def _needs_no_repair(value: Any) -> bool:
    """An object whose type is a non-empty string and whose ids are absent or strings,
    all ASCII without NUL, and whose every value JSON holds as orjson writes it (no
    lone surrogate, no integer past 64 bits)."""
    if type(value) is not dict or type(value.get("type")) is not str or not value["type"]:
        return False
    ids = [value.get("messageId"), value.get("toolCallId")]
    if any(v is not None and type(v) is not str for v in ids):
        return False
    columns = "".join([value["type"], *filter(None, ids)])
    if not columns.isascii() or "\x00" in columns:
        return False
    try:
        json.dumps(value, ensure_ascii=False).encode()  # a lone surrogate cannot be
    except UnicodeEncodeError:
        return False
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is int and not -(2**63) <= item < 2**64:
            return False
        stack.extend(item.values() if type(item) is dict else item if type(item) is list else [])
    return True


@given(events | plain_events | json_values, st.integers(0, 3))
def test_stored_token_when_any_json_then_a_list_of_one_object_is_stored_as_sent_or_declined(
    value: Any, shape: int
) -> None:
    """A list of one object that needs no repair is stored as sent: its text parses back
    to the very value, its type and ids are the value's. Anything else is declined
    (None) for the general way to decide, and so is every other shape of list."""
    chunks: Any = [[value], [value, value], [], value][shape]
    got = stored_token(chunks)
    if shape != 0:
        assert got is None
        return
    if got is None:
        assert not _needs_no_repair(value)
        return
    [chunk] = got
    assert type(chunk) is StoredChunk and type(got) is list and got is not chunks
    assert json.dumps(loads(chunk.text)) == json.dumps(value)
    assert chunk.type == value["type"] and chunk.type.isascii()
    assert (chunk.message_id, chunk.tool_call_id) == (
        value.get("messageId"),
        value.get("toolCallId"),
    )


@pytest.mark.parametrize(
    "odd",
    [
        {"type": "B", "delta": "\ud83d"},  # a lone surrogate: orjson cannot encode it
        {"type": "B", "n": 2**70},  # nor an integer past 64 bits
        {"type": "B", "messageId": "caf\u00e9"},  # an id that `storable` must look at
        {"type": "B", "toolCallId": 7},  # an id that is no string
        {"type": ""},  # no type: refused by the loop, value by value
    ],
)
def test_stored_values_when_one_value_is_odd_then_fast_paths_decline_and_loop_decides(
    odd: dict[str, Any],
) -> None:
    values = [{"type": "A", "delta": "x"}, odd]
    assert chunks._columns(values) is None
    try:
        expected = [stored(v, i) for i, v in enumerate(values)]
    except InvalidEvent:
        with pytest.raises(InvalidEvent):
            stored_values(values)
    else:
        assert stored_values(values) == expected
    assert stored_token([odd]) is None


def test_queries_when_they_bound_a_rows_span_then_by_batch_max_and_the_settings_default() -> None:
    """The statements bound a read's index range by one row's span and cap their sums below
    the bigint limit: written as literals there, so they are checked against the layout's
    constants here (a larger BATCH_MAX with a stale 256 would skip events)."""
    text = SOURCE.read_text("utf-8")
    spans = re.findall(r"seq < least\([^)]*\)(?: \+ \$\d)? \+ (\d+)", text)
    assert len(spans) >= 10 and set(spans) == {str(rows.BATCH_MAX)}
    largest = 2**63 - 1
    caps = set(map(int, re.findall(r"\b\d{19}\b", text)))
    assert caps == {largest, largest - rows.BATCH_MAX, largest - 2**40}
    assert Settings().batch_min_events == rows.BATCH_MIN
