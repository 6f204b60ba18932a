"""Redaction in ingest: what the log is handed never holds a match, however it was split."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.errors import InvalidRedaction
from agent_replay.ingest.redact import Redactor
from agent_replay.ingest.rules import BUILTIN, parse_rules
from agent_replay.log.chunks import stored
from agent_replay.log.values import StoredChunk
from tests.ingest.secrets import FILLER, SECRETS, escaped_json, secret, splits

RULES = parse_rules("default", "test")


def _chunks(events: list[dict[str, Any]]) -> list[StoredChunk]:
    return [stored(e, i) for i, e in enumerate(events)]


def _interleave(data: st.DataObject, *streams: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The streams' events merged in an order Hypothesis picks, each stream's kept."""
    queues = [list(s) for s in streams if s]
    out: list[dict[str, Any]] = []
    while queues:
        queue = queues[data.draw(st.integers(0, len(queues) - 1))]
        out.append(queue.pop(0))
        queues = [q for q in queues if q]
    return out


def _feed(redactor: Redactor, chunks: list[StoredChunk], data: st.DataObject) -> list[StoredChunk]:
    """The chunks fed in reads (or requests) of sizes Hypothesis picks, then finished."""
    out: list[StoredChunk] = []
    at = 0
    while at < len(chunks):
        size = data.draw(st.integers(1, max(1, len(chunks) - at)))
        out.extend(redactor.chunks(chunks[at : at + size]))
        at += size
    return out + redactor.finish()


def _deltas(chunks: list[StoredChunk], kind: str, field: str, ident: str) -> list[str]:
    values = [json.loads(c.text) for c in chunks if c.type == kind]
    return [v["delta"] for v in values if v.get(field) == ident]


def _shape(chunks: Sequence[StoredChunk]) -> tuple[list[str], dict[str, str]]:
    """The events without a delta, in order, and each streamed type's deltas joined."""
    others: list[str] = []
    deltas: dict[str, str] = {}
    for c in chunks:
        value = json.loads(c.text)
        if "delta" in value:
            deltas[c.type] = deltas.get(c.type, "") + value["delta"]
        else:
            others.append(c.text)
    return others, deltas


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    return []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret(), FILLER, FILLER, FILLER, st.data())
def test_a_secret_split_anywhere_never_reaches_the_log_and_clean_text_is_kept_whole(
    found: tuple[str, str], before: str, after: str, clean: str, data: st.DataObject
) -> None:
    rule, value = found
    marker = f"[REDACTED:{rule}]"
    said = f"{before} {value} {after}"
    args = {"query": f"{after} {value} {before}", "n": [1, True, None]}
    args_text = escaped_json(args, data)
    m1 = [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": d}
          for d in splits(said, data)),
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    ]  # fmt: skip
    t1 = [
        {"type": "TOOL_CALL_START", "toolCallId": "t1", "toolCallName": "search"},
        *({"type": "TOOL_CALL_ARGS", "toolCallId": "t1", "delta": d}
          for d in splits(args_text, data)),
        {"type": "TOOL_CALL_END", "toolCallId": "t1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": "t1",
         "content": f"found {value}"},
    ]  # fmt: skip
    m2 = [
        {"type": "REASONING_MESSAGE_START", "messageId": "m2", "role": "reasoning"},
        *({"type": "REASONING_MESSAGE_CONTENT", "messageId": "m2", "delta": d}
          for d in splits(clean, data) if d),
        {"type": "REASONING_MESSAGE_END", "messageId": "m2"},
    ]  # fmt: skip
    state = [{"type": "STATE_SNAPSHOT", "snapshot": {"notes": [{"text": value}]}}]
    events = [
        {"type": "RUN_STARTED", "threadId": "th", "runId": "r"},
        *_interleave(data, m1, t1, m2, state),
        {"type": "RUN_FINISHED", "threadId": "th", "runId": "r"},
    ]
    redactor = Redactor(RULES)
    out = _feed(redactor, _chunks(events), data)

    for chunk in out:
        assert value not in chunk.text
        decoded = json.loads(chunk.text)
        assert all(value not in s for s in _strings(decoded))
        if "delta" in decoded:
            assert decoded["delta"] != ""
    assert "".join(_deltas(out, "TEXT_MESSAGE_CONTENT", "messageId", "m1")) == (
        f"{before} {marker} {after}"
    )
    stored_args = "".join(_deltas(out, "TOOL_CALL_ARGS", "toolCallId", "t1"))
    assert json.loads(stored_args) == {**args, "query": f"{after} {marker} {before}"}
    # Clean text keeps every character as sent.
    assert "".join(_deltas(out, "REASONING_MESSAGE_CONTENT", "messageId", "m2")) == clean
    assert redactor.counts == {rule: 4}
    assert [c.type for c in out][-1] == "RUN_FINISHED"
    assert not redactor.holding


@settings(max_examples=100, deadline=None)
@given(st.lists(FILLER.filter(bool), min_size=1, max_size=20))
def test_text_without_secrets_fed_in_one_read_is_passed_on_as_the_same_chunks(
    texts: list[str],
) -> None:
    events: list[dict[str, Any]] = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": t} for t in texts
    ]
    events.append({"type": "TEXT_MESSAGE_END", "messageId": "m"})
    chunks = _chunks(events)
    assert Redactor(RULES).chunks(chunks) is chunks


@settings(max_examples=100, deadline=None)
@given(st.lists(FILLER, min_size=1, max_size=20), st.data())
def test_a_run_without_secrets_is_passed_on_as_the_same_chunks(
    texts: list[str], data: st.DataObject
) -> None:
    events: list[dict[str, Any]] = [
        {"type": "TOOL_CALL_ARGS", "toolCallId": "t", "delta": escaped_json({"q": t}, data)}
        for t in texts
    ]
    events.append({"type": "CUSTOM", "name": "n", "value": {"v": texts}})
    chunks = _chunks(events)
    assert Redactor(RULES).chunks(chunks) is chunks


def test_a_delta_held_whole_is_not_stored_and_goes_out_with_the_next() -> None:
    events = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "mail bob@exa"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "mple.co"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "m now"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    ]
    out = Redactor(RULES).chunks(_chunks(events))
    assert [json.loads(c.text).get("delta") for c in out] == [
        "mail ",
        # The second delta lies inside the address: not stored; the match goes out whole
        # with the delta it ends in.
        "[REDACTED:email] now",
        None,
    ]


def test_a_held_tail_is_stored_before_the_messages_end() -> None:
    events = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hello world"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    ]
    redactor = Redactor(RULES)
    # Two reads: the first ends in a word that could still begin an address.
    out = [*redactor.chunks(_chunks(events[:1])), *redactor.chunks(_chunks(events[1:]))]
    assert [json.loads(c.text) for c in out] == [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hello "},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "world"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    ]


def test_a_raw_event_of_a_redacted_delta_is_not_stored() -> None:
    events = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "key sk-ant-" + "a" * 30 + " !",
         "rawEvent": {"choices": [{"delta": "key sk-ant-"}]}},
    ]  # fmt: skip
    (out,) = Redactor(RULES).chunks(_chunks(events))
    assert json.loads(out.text) == {
        "type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "key [REDACTED:anthropic_key] !",
    }  # fmt: skip


def test_a_card_number_failing_luhn_is_kept() -> None:
    events = [
        {"type": "CUSTOM", "name": "n", "value": "order 4111 1111 1111 1112 and 4111111111111111"}
    ]
    (out,) = Redactor(RULES).chunks(_chunks(events))
    assert json.loads(out.text)["value"] == "order 4111 1111 1111 1112 and [REDACTED:card]"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nope", "no detector named 'nope'"),
        ("x=[a-z]+", "unbounded text"),
        ("x=a{1,2000}", "2000 characters"),
        ("x=(?:a{1,3}){1,3}", "quantifier inside another"),
        ("x=(?:ab|cd){1,3}", "alternation under a quantifier"),
        ("x=(a)\\1", "backreferences"),
        ("x=a?", "empty text"),
        ("x=[", "not a regular expression"),
        ("Bad=abc", "a name is"),
        ("email=abc", "built-in detector's name"),
        ("x=abc,x=abd", "already defined with another pattern"),
    ],
)
def test_a_malformed_rule_is_refused_with_its_own_code(spec: str, says: str) -> None:
    with pytest.raises(InvalidRedaction, match=says) as caught:
        parse_rules(spec, "REPLAY_REDACT")
    assert caught.value.code == "invalid_redaction"
    assert caught.value.status == 422


def test_rules_are_detectors_defaults_and_custom_patterns_with_commas() -> None:
    rules = parse_rules("email, ticket=T-[0-9]{2,6},default", "REPLAY_REDACT")
    assert rules.names == ["email", "ticket", *[n for n in BUILTIN if n != "email"]]
    assert rules.describe()[1] == "ticket=T-[0-9]{2,6}"
    added = rules.plus(parse_rules(["ticket=T-[0-9]{2,6}", "card"], "run"))
    assert added.names == rules.names


def test_every_detector_has_a_secret_strategy() -> None:
    assert set(SECRETS) == set(BUILTIN)


def test_a_request_of_one_delta_per_message_is_stored_as_sent_unless_it_holds_a_match() -> None:
    events = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hello wor", "timestamp": 5},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "t", "delta": '{"q": "bob@exa'},
    ]
    chunks = _chunks(events)
    assert Redactor(RULES).request(chunks) is chunks
    said = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "mail bob@example.com"}]
    (out,) = Redactor(RULES).request(_chunks(said))
    assert json.loads(out.text)["delta"] == "mail [REDACTED:email]"


@settings(max_examples=200, deadline=None)
@given(secret(), FILLER, st.data())
def test_one_request_holding_a_whole_split_secret_stores_none_of_it(
    found: tuple[str, str], before: str, data: st.DataObject
) -> None:
    rule, value = found
    events = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": d}
        for d in splits(f"{before} {value} {before}", data)
    ]
    out = Redactor(RULES).request(_chunks(events))
    assert all(value not in c.text for c in out)
    text = "".join(json.loads(c.text)["delta"] for c in out)
    assert text == f"{before} [REDACTED:{rule}] {before}"


def test_rules_naming_the_same_group_still_redact() -> None:
    rules = parse_rules(["a=(?P<n>A-[0-9]{3})", "b=(?P<n>B-[0-9]{3})"], "run")
    said = [{"type": "CUSTOM", "name": "n", "value": "A-123 and B-456 and C-789"}]
    (out,) = Redactor(rules).request(_chunks(said))
    assert json.loads(out.text)["value"] == "[REDACTED:a] and [REDACTED:b] and C-789"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret(), FILLER, st.data())
def test_a_redactor_restored_from_its_state_between_requests_stores_what_one_redactor_would(
    found: tuple[str, str], clean: str, data: st.DataObject
) -> None:
    rule, value = found
    # Escapes of characters the database's jsonb and text refuse decoded, held and kept.
    args_text = escaped_json({"q": f"{clean} {value}", "esc": "@"}, data).replace(
        '"@"', '"\\u0000\\ud800"'
    )
    t1 = [{"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "s", "delta": ""}]
    t1 += [{"type": "TOOL_CALL_CHUNK", "delta": d} for d in splits(args_text, data)]
    m1 = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": d}
          for d in splits(f"{clean} {value} {clean}", data)]  # fmt: skip
    m1.append({"type": "TEXT_MESSAGE_END", "messageId": "m1"})
    events = [*_interleave(data, t1, m1), {"type": "RUN_FINISHED"}]
    chunks = _chunks(events)
    whole = Redactor(RULES)
    expected = list(whole.chunks(chunks))

    out: list[StoredChunk] = []
    counts: dict[str, int] = {}
    held: str | None = None
    at = 0
    while at < len(chunks):
        size = data.draw(st.integers(1, len(chunks) - at))
        state = None if held is None else json.loads(held)
        redactor = Redactor.restore(RULES, state)
        out.extend(redactor.append(chunks[at : at + size], close=False))
        for name, n in redactor.counts.items():
            counts[name] = counts.get(name, 0) + n
        kept = redactor.state()
        # As the log keeps it: JSON text, every non-ASCII character escaped.
        held = None if kept is None else json.dumps(kept, ensure_ascii=True)
        at += size
    # Where a text's deltas are cut may differ (a request's deltas are matched together),
    # what each stream says, and every other event, may not.
    assert _shape(out) == _shape(expected)
    assert _shape(out)[1]["TEXT_MESSAGE_CONTENT"] == f"{clean} [REDACTED:{rule}] {clean}"
    assert counts == dict(whole.counts) == {rule: 2}
    assert held is None  # the run's end released everything
    assert all(value not in c.text for c in out)


def test_shed_when_over_the_bound_then_the_longest_open_streams_go_out_first_whole() -> None:
    redactor = Redactor(RULES)
    events = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}", "delta": f"to bob{i}@exa"}
        for i in range(3)
    ]
    assert [json.loads(c.text)["delta"] for c in redactor.chunks(_chunks(events))] == ["to "] * 3
    held = len("bob0@exa")
    assert redactor.shed(3 * held) == []
    released = redactor.shed(held)
    # Matched as complete text (no address without its domain's end), oldest first.
    assert [(json.loads(c.text)["messageId"], json.loads(c.text)["delta"]) for c in released] == [
        ("m0", "bob0@exa"),
        ("m1", "bob1@exa"),
    ]
    state = redactor.state()
    assert state is not None and [s[1] for s in state["streams"]] == ["m2"]
