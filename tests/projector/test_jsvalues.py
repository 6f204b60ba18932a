"""JavaScript rules the reference inherits; expected values are what Node 20 prints."""

from __future__ import annotations

import math

import pytest

from agent_replay.projector.jsvalues import (
    JSONParseError,
    number_text,
    parse_date,
    parse_json,
    stringify,
    trim,
)
from agent_replay.projector.partial_json import NO_VALUE, parse_partial


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (0.5, "0.5"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (123456789012345680000.0, "123456789012345680000"),
        (-0.0, "0"),
        (2**60, "1152921504606847000"),
        (math.inf, "Infinity"),
    ],
)
def test_number_text_when_formatting_then_matches_js_tostring(value: float, text: str) -> None:
    assert number_text(value) == text


def test_stringify_when_object_has_index_keys_then_they_come_first_ascending() -> None:
    value = {"b": 1, "10": 2, "2": 3, "a": [1.0, None, math.nan], "01": 4}
    assert stringify(value) == '{"2":3,"10":2,"b":1,"a":[1,null,null],"01":4}'


def test_stringify_when_string_has_non_ascii_and_lone_surrogate_then_only_surrogate_escaped() -> (
    None
):
    assert stringify("é\n\u2028\ud83d") == '"é\\n\u2028\\ud83d"'


def test_parse_json_when_nan_or_infinity_then_raises() -> None:
    for text in ("NaN", "[Infinity]", "-Infinity"):
        with pytest.raises(JSONParseError):
            parse_json(text)


def test_parse_json_when_integer_beyond_2_53_then_becomes_the_js_double() -> None:
    assert parse_json("12345678901234567890") == 12345678901234567000
    assert parse_json("1e400") == math.inf


def test_parse_json_when_argument_not_a_string_then_stringified_first() -> None:
    assert parse_json(["5"]) == 5
    with pytest.raises(JSONParseError):
        parse_json({"a": 1})


def test_trim_when_js_whitespace_then_removed_but_not_nel_or_separators() -> None:
    assert trim("\u3000\ufeff x \u2029\t") == "x"
    assert trim("\u0085") == "\u0085"
    assert trim("\u001c") == "\u001c"


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2024-01-02T03:04:05.678Z", "2024-01-02T03:04:05.678Z"),
        ("2024-01-02", "2024-01-02T00:00:00.000Z"),
        ("2024-01-02T03:04:05+02:00", "2024-01-02T01:04:05.000Z"),
        ("2024-02-30", "2024-03-01T00:00:00.000Z"),
        ("2024-02-32", None),
        ("Tue, 02 Jan 2024 03:04:05 GMT", "2024-01-02T03:04:05.000Z"),
        ("yesterday", None),
    ],
)
def test_parse_date_when_iso_text_then_to_iso_string(text: str, iso: str | None) -> None:
    assert parse_date(text) == iso


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a":1} trailing', {"a": 1}),
        ("[1,,2]", [1]),
        ('{"a": nulll}', {"a": None}),
        ("[12.", []),
        ('{"n":34.5e', {"n": 34.5}),
        ('{"n":1E', {}),
        ('"ab\\u12', "ab"),
        ('{"a":"x\\', {"a": "x"}),
        ('{"a":[1,{"b":tr', {"a": [1, {"b": True}]}),
        ('{"__proto__":{"x":1},"b":2', {"b": 2}),
    ],
)
def test_parse_partial_when_cut_or_malformed_then_as_npm_partial_json(
    text: str, value: object
) -> None:
    assert parse_partial(text) == value


@pytest.mark.parametrize("text", ["", "  \n", "-", "12.", "1E", "}"])
def test_parse_partial_when_nothing_usable_then_no_value(text: str) -> None:
    assert parse_partial(text) is NO_VALUE
