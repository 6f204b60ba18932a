"""The typewriter decoder: for every split of a document, the decoded values, never retracted."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_replay.projector.jsvalues import MAX_DEPTH
from agent_replay.projector.typewriter import Decoder, Piece, pointer

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
)
strings = st.text(st.characters(codec="utf-8"), max_size=30) | st.sampled_from(
    ['line\n"quoted"\\', "😀 emoji", "tab\there", "\u2028", "~/a/b~1", ""]
)
documents = st.recursive(
    scalars | strings,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(strings, children, max_size=4)
    ),
    max_leaves=12,
)


def leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """The strings and scalars of a document, in document order, with their paths."""
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in leaves(v, pointer(path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in leaves(v, pointer(path, i))]
    return [(path, value)]


def decode_all(deltas: list[str]) -> tuple[Decoder, list[list[Piece]]]:
    decoder = Decoder()
    feeds = [decoder.feed(delta) for delta in deltas]
    feeds.append(decoder.finish())
    return decoder, feeds


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def replayed(feeds: list[list[Piece]]) -> list[tuple[str, Any]]:
    """Fold the pieces as a display would, checking it never has to go back."""
    order: list[str] = []
    texts: dict[str, str] = {}
    values: dict[str, Any] = {}
    done: set[str] = set()
    for pieces in feeds:
        for piece in pieces:
            path = piece.path
            assert path not in done, f"{path!r} emitted after it was complete"
            assert path not in values, f"{path!r} scalar emitted twice"
            if path not in texts:
                order.append(path)
            if piece.text is None:
                assert path not in texts
                values[path] = piece.value
                done.add(path)
            else:
                texts[path] = texts.get(path, "") + piece.text
                if piece.done:
                    done.add(path)
    assert set(texts) <= done, "a string never closed"
    return [(p, texts[p] if p in texts else values[p]) for p in order]


@settings(max_examples=300)
@given(
    doc=documents,
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 0, 2]),
)
def test_decoder_when_document_split_anywhere_then_texts_and_scalars_equal_decoded_values(
    doc: Any, cuts: list[int], ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(doc, ensure_ascii=ascii_only, indent=indent)
    decoder, feeds = decode_all(split(text, cuts))
    assert decoder.failed is None
    assert decoder.complete
    assert replayed(feeds) == leaves(json.loads(text))


@settings(max_examples=100)
@given(doc=documents)
def test_decoder_when_fed_one_character_at_a_time_then_same_as_whole(doc: Any) -> None:
    text = json.dumps(doc)
    _, whole = decode_all([text])
    _, chars = decode_all(list(text))
    assert replayed(chars) == replayed(whole) == leaves(doc)


def test_decoder_when_content_streams_then_real_line_breaks_and_quotes_grow() -> None:
    deltas = [
        '{"filePath": "src/App.tsx", "conte',
        'nt": "import React fro',
        "m 'react';\\n\\nfunction App",
        '() { return \\"hi\\" }\\n"}',
    ]
    decoder = Decoder()
    out = [[p.to_json() for p in decoder.feed(d)] for d in deltas]
    assert out == [
        [{"path": "/filePath", "text": "src/App.tsx", "done": True}],
        [{"path": "/content", "text": "import React fro"}],
        [{"path": "/content", "text": "m 'react';\n\nfunction App"}],
        [{"path": "/content", "text": '() { return "hi" }\n', "done": True}],
    ]
    assert decoder.complete


def test_decoder_when_escaped_surrogate_pair_split_across_deltas_then_one_character() -> None:
    decoder = Decoder()
    first = decoder.feed('{"s": "a\\ud83d')
    second = decoder.feed('\\ude00b"}')
    assert [p.text for p in first] == ["a"]
    assert [p.text for p in second] == ["😀b"]


def test_decoder_when_raw_surrogate_halves_split_across_deltas_then_joined() -> None:
    # What a UTF-16 producer cutting an emoji in two leaves in each delta.
    decoder = Decoder()
    pieces = decoder.feed('["x\ud83d') + decoder.feed('\ude00"]')
    assert "".join(p.text or "" for p in pieces) == "x😀"


def test_decoder_when_escape_cut_inside_hex_digits_then_resolved_on_next_delta() -> None:
    decoder = Decoder()
    pieces = [*decoder.feed('"caf\\u0'), *decoder.feed("0e"), *decoder.feed('9!"')]
    assert "".join(p.text or "" for p in pieces) == "café!"
    assert pieces[-1].done


def test_decoder_when_scalars_cut_then_emitted_once_complete() -> None:
    decoder = Decoder()
    assert decoder.feed('{"n": 12') == []
    assert [p.to_json() for p in decoder.feed('34, "ok": tr')] == [{"path": "/n", "value": 1234}]
    assert [p.to_json() for p in decoder.feed('ue, "z": null}')] == [
        {"path": "/ok", "value": True},
        {"path": "/z", "value": None},
    ]


def test_decoder_when_root_is_a_number_then_finish_completes_it() -> None:
    decoder = Decoder()
    assert decoder.feed("-1.5e") == []
    assert decoder.feed("3") == []
    assert [p.to_json() for p in decoder.finish()] == [{"path": "", "value": -1500.0}]


def test_decoder_when_input_malformed_then_fails_and_keeps_what_it_emitted() -> None:
    decoder = Decoder()
    good = decoder.feed('{"a": "kept", "b": ')
    assert decoder.feed("}") == []
    assert decoder.failed is not None and "expected a value" in decoder.failed
    assert [p.to_json() for p in good] == [{"path": "/a", "text": "kept", "done": True}]
    assert decoder.feed('"more"') == []


def test_decoder_when_keys_need_escaping_then_paths_are_json_pointers() -> None:
    decoder = Decoder()
    pieces = decoder.feed('{"a/b": {"~k": [1, "x"]}}')
    assert [p.path for p in pieces] == ["/a~1b/~0k/0", "/a~1b/~0k/1"]


def test_decoder_when_empty_string_value_then_path_still_reported_done() -> None:
    decoder = Decoder()
    assert [p.to_json() for p in decoder.feed('{"e": ""}')] == [
        {"path": "/e", "text": "", "done": True}
    ]


def _raw_and_decoded(feeds: list[list[Piece]]) -> tuple[str, list[list[Piece]]]:
    raw = "".join(p.text or "" for pieces in feeds for p in pieces if p.raw)
    return raw, [[p for p in pieces if not p.raw] for pieces in feeds]


@settings(max_examples=100)
@given(
    doc=documents,
    past=st.integers(1, 40),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_decoder_when_nested_past_max_depth_then_the_rest_is_raw_text_whatever_the_split(
    doc: Any, past: int, cuts: list[int]
) -> None:
    """What precedes the too-deep array is decoded as usual; from the array that would
    open past MAX_DEPTH on, the input is passed on exactly as sent."""
    levels = MAX_DEPTH + past
    head = '{"before":' + json.dumps(doc) + ',"deep":' + "[" * (MAX_DEPTH - 1)
    text = head + "[" * (levels - MAX_DEPTH + 1) + "]" * levels + "}"
    decoder, feeds = decode_all(split(text, cuts))
    raw, decoded = _raw_and_decoded(feeds)
    assert decoder.raw and decoder.failed is None and not decoder.complete
    assert raw == text[len(head) :]
    assert replayed(decoded) == leaves({"before": doc})


def test_decoder_when_paths_outgrow_the_input_then_the_rest_is_raw_text() -> None:
    """Scalars under a very long key: each path repeats the key, which would make the
    decoded output the square of the input; past the allowance the rest goes raw."""
    key = "k" * 200_000
    text = '{"' + key + '":[' + "1," * 100_000 + "1]}"
    decoder, feeds = decode_all(split(text, list(range(0, len(text), 65_536))))
    raw, decoded = _raw_and_decoded(feeds)
    assert decoder.raw and raw and text.endswith(raw)
    paths = sum(len(p.path) for pieces in decoded for p in pieces)
    assert paths <= 32 * len(text) + (1 << 20)
    values = [p.value for pieces in decoded for p in pieces]
    assert values and set(values) == {1}


def test_decoder_when_400000_levels_then_linear_and_the_rest_raw() -> None:
    text = '{"a":' + "[" * 400_000 + "]" * 400_000 + "}"
    decoder, feeds = decode_all(split(text, list(range(0, len(text), 100_000))))
    raw, decoded = _raw_and_decoded(feeds)
    assert decoder.raw and text.endswith(raw) and len(text) - len(raw) == 5 + MAX_DEPTH - 1
    assert sum(map(len, decoded)) == 0
