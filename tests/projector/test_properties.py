"""Properties of the projector over generated logs."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_replay.projector import Projector, project
from agent_replay.projector.jsvalues import join_surrogates, stringify
from tests.projector.strategies import logs

FAST = settings(max_examples=150, deadline=None)


def as_text(messages: list[dict[str, Any]]) -> str:
    # A canonical text form: NaN from a partial parse would defeat ==.
    return stringify(messages)


@FAST
@given(logs)
def test_projection_when_read_after_every_chunk_then_equals_batch(
    log: list[dict[str, Any]],
) -> None:
    projector = Projector()
    seen = []
    for chunk in log:
        projector.apply(chunk)
        seen.append(as_text(projector.messages))
    projector.finalize()
    assert as_text(projector.messages) == as_text(project(log))
    # reading must not disturb what earlier reads returned
    replay = Projector()
    for chunk, earlier in zip(log, seen, strict=True):
        replay.apply(chunk)
        assert as_text(replay.messages) == earlier


@FAST
@given(logs)
def test_projection_when_log_is_arbitrary_then_never_raises(log: list[dict[str, Any]]) -> None:
    project(log, normalize=True)
    project(log, finalize=False)


def utf16_units(text: str) -> list[str]:
    """The UTF-16 code units of ``text``, each as a one-character string."""
    data = text.encode("utf-16-le", "surrogatepass")
    return [data[i : i + 2].decode("utf-16-le", "surrogatepass") for i in range(0, len(data), 2)]


STREAMS = {
    "text": "Héllo 🚀 wörld\n\u2028 🎉 done",
    "args": '{"path":"a\\u00e9\\n.txt","content":"🚀 \\"q\\" \\\\ end","n":[1,2.5e3]}',
    "thinking": "plan 🧠: step\t1 → 2",
}


def build_log(pieces: dict[str, list[str]], order: list[str]) -> list[dict[str, Any]]:
    """A run streaming text and tool arguments interleaved in ``order``, then
    reasoning. (Text and thinking are not interleaved: text that resumes
    after a thinking part repeats its segment in a new part, by design.)"""
    log: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "STEP_STARTED", "stepName": "s"},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "t",
            "toolCallName": "write",
            "parentMessageId": "m",
        },
    ]
    queues = {kind: list(items) for kind, items in pieces.items()}
    make = {
        "text": lambda d: {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": d},
        "args": lambda d: {"type": "TOOL_CALL_ARGS", "toolCallId": "t", "delta": d},
        "thinking": lambda d: {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rs", "delta": d},
    }
    for kind in order:
        if queues[kind]:
            log.append(make[kind](queues[kind].pop(0)))
    for kind in ("text", "args", "thinking"):
        rest = queues[kind]
        log.extend(make[kind](d) for d in rest)
    log += [{"type": "TOOL_CALL_END", "toolCallId": "t"}, {"type": "RUN_FINISHED", "runId": "r"}]
    return log


@st.composite
def splits(draw: st.DrawFn, text: str) -> list[str]:
    units = utf16_units(text)
    cuts = sorted(draw(st.sets(st.integers(1, len(units) - 1), max_size=len(units) - 1)))
    bounds = [0, *cuts, len(units)]
    # Within one delta a pair is one character (as JSON decoding yields it);
    # only a cut between the halves leaves lone surrogates at the edges.
    return [join_surrogates("".join(units[a:b])) for a, b in itertools.pairwise(bounds)]


@FAST
@given(
    st.fixed_dictionaries({kind: splits(text) for kind, text in STREAMS.items()}),
    st.lists(st.sampled_from(["text", "args"]), max_size=60),
)
def test_final_messages_when_deltas_split_anywhere_then_unchanged(
    pieces: dict[str, list[str]], order: list[str]
) -> None:
    whole = project(build_log({kind: [text] for kind, text in STREAMS.items()}, []))
    call = next(p for p in whole[0]["parts"] if p["type"] == "tool-call")
    assert call["input"]["content"] == '🚀 "q" \\ end'  # the unsplit log is sane
    assert project(build_log(pieces, order)) == whole
