"""Secrets of every built-in detector, drawn by Hypothesis, and AG-UI runs that carry them."""

from __future__ import annotations

import base64
import itertools
import json
import string
from typing import Any

from hypothesis import strategies as st

_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "-_"


def _luhn_complete(digits: str) -> str:
    total = 0
    for i, c in enumerate(reversed(digits + "0")):
        d = int(c)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return digits + str((10 - total % 10) % 10)


@st.composite
def card(draw: st.DrawFn) -> str:
    digits = _luhn_complete(
        draw(st.sampled_from("345")) + draw(st.text("0123456789", min_size=14, max_size=14))
    )
    sep = draw(st.sampled_from(["", " ", "-"]))
    return sep.join(digits[i : i + 4] for i in range(0, 16, 4))


@st.composite
def jwt(draw: st.DrawFn) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    header = part({"alg": "HS256", "typ": "JWT"})
    payload = part({"sub": draw(st.text(_ALNUM, min_size=1, max_size=20))})
    sig = draw(st.text(_URLSAFE, min_size=20, max_size=43))
    return f"{header}.{payload}.{sig}"


@st.composite
def private_key(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["RSA ", "EC ", "OPENSSH ", ""]))
    body = base64.b64encode(draw(st.binary(min_size=48, max_size=400))).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{lines}\n-----END {kind}PRIVATE KEY-----"


SECRETS: dict[str, st.SearchStrategy[str]] = {
    "openai_key": st.builds(
        lambda p, b: p + b,
        st.sampled_from(["sk-", "sk-proj-", "sk-svcacct-"]),
        st.text(_URLSAFE, min_size=24, max_size=60).filter(lambda b: not b.startswith("ant-")),
    ),
    "anthropic_key": st.builds(
        lambda b: "sk-ant-api03-" + b, st.text(_URLSAFE, min_size=24, max_size=90)
    ),
    "aws_access_key": st.builds(
        lambda p, b: p + b,
        st.sampled_from(["AKIA", "ASIA"]),
        st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16),
    ),
    "github_token": st.one_of(
        st.builds(lambda b: "ghp_" + b, st.text(_ALNUM, min_size=36, max_size=40)),
        st.builds(lambda b: "github_pat_" + b, st.text(_ALNUM + "_", min_size=22, max_size=82)),
    ),
    "jwt": jwt(),
    "private_key": private_key(),
    "card": card(),
    "email": st.builds(
        lambda local, domain, tld: f"{local}@{domain}.{tld}",
        st.text(_ALNUM + "._+-", min_size=1, max_size=20).filter(
            lambda s: s[0].isalnum() and s[-1].isalnum()
        ),
        st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=15),
        st.sampled_from(["com", "io", "co.uk", "example"]),
    ),
}

# Text no rule matches (no digits, no "@", no key prefixes): a secret's surroundings.
FILLER = st.text(string.ascii_lowercase + " ,.!?\n'é😀", max_size=40).map(
    lambda s: s.replace("sk", "s k")
)


@st.composite
def secret(draw: st.DrawFn) -> tuple[str, str]:
    rule = draw(st.sampled_from(sorted(SECRETS)))
    return rule, draw(SECRETS[rule])


def splits(text: str, data: st.DataObject, most: int = 50) -> list[str]:
    """`text` cut into 1 to `most` non-empty deltas at positions Hypothesis picks (a cut may
    fall anywhere, inside a surrogate pair's escape or an escape included)."""
    if len(text) < 2:
        return [text]
    cuts = data.draw(
        st.sets(st.integers(1, len(text) - 1), max_size=min(most - 1, len(text) - 1)).map(sorted)
    )
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def escaped_json(value: Any, data: st.DataObject) -> str:
    """`value` as JSON text with some characters of its strings written as `\\uXXXX`."""
    plain = json.dumps(value, ensure_ascii=False)
    out = []
    in_string = escape = False
    for ch in plain:
        if in_string and not escape and ch not in '"\\' and data.draw(st.integers(0, 5)) == 0:
            out.append("".join(f"\\u{u:04x}" for u in _utf16(ch)))
            continue
        out.append(ch)
        if escape:
            escape = False
        elif ch == "\\":
            escape = True
        elif ch == '"':
            in_string = not in_string
    return "".join(out)


def _utf16(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]
