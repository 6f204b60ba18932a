"""The pure parts of agent_replay.access, for any input: keys, tokens, and what tampering does."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_replay.access import KeyRing, Scope, TokenScope, TokenSigner
from agent_replay.access.tokens import TokenInvalid

SECRET = "rules-token-secret-0123456789abcdef-0123456789"
# Secrets as an operator writes them: no commas or spaces, no ':' (that starts the scopes).
secret_text = st.text(string.ascii_letters + string.digits + "-_.~+/=", min_size=1, max_size=40)
scope_sets = st.sets(st.sampled_from(list(Scope)), min_size=1)


@settings(max_examples=200, deadline=None)
@given(keys=st.dictionaries(secret_text, scope_sets, min_size=1, max_size=8), other=secret_text)
def test_keyring_when_any_keys_then_each_has_its_scopes_and_nothing_else_is_a_key(
    keys: dict[str, set[Scope]], other: str
) -> None:
    spec = ", ".join(f"{s}:{'+'.join(sorted(g))}" for s, g in keys.items())
    ring = KeyRing(spec)
    for secret, granted in keys.items():
        assert ring.scopes(secret) == frozenset(granted)
        # A prefix or an extension of a key is not that key.
        for near in (secret[:-1], secret + "x", secret.upper() if secret.upper() != secret else ""):
            if near and near not in keys:
                assert ring.scopes(near) is None
    if other not in keys:
        assert ring.scopes(other) is None


def test_keyring_when_bare_secret_then_admin_and_empty_spec_is_open() -> None:
    assert KeyRing("plain").scopes("plain") == frozenset({Scope.ADMIN})
    assert KeyRing(" , ").open and not KeyRing("a").open
    with pytest.raises(ValueError, match="unknown scope"):
        KeyRing("s3cret:reed")


@given(
    now=st.floats(min_value=1e9, max_value=4e9, allow_nan=False),
    ttl=st.integers(min_value=1, max_value=86_400),
)
def test_token_when_minted_at_any_instant_then_lives_at_least_its_ttl(now: float, ttl: int) -> None:
    """`exp` is whole seconds: a token minted late in a second still lives the whole ttl it
    was asked for (cut down to the second, a 1 s token minted at .9 lived 0.1 s), and at
    most a second more."""
    _, expires = TokenSigner(SECRET).mint(
        thread_id="t", scopes=[TokenScope.READ], ttl_seconds=ttl, now=now
    )
    assert now + ttl <= expires < now + ttl + 1


@settings(max_examples=100, deadline=None)
@given(
    thread=st.text(min_size=1, max_size=60),
    chat=st.booleans(),
    at=st.integers(min_value=0),
    to=st.sampled_from("AQgw_-9z"),
)
def test_token_when_any_one_character_changed_then_refused(
    thread: str, chat: bool, at: int, to: str
) -> None:
    signer = TokenSigner(SECRET)
    scopes = [TokenScope.READ, TokenScope.CHAT] if chat else [TokenScope.READ]
    token, expires = signer.mint(thread_id=thread, scopes=scopes, ttl_seconds=60)
    claims = signer.verify(token)
    assert (claims.thread_id, claims.run_id, claims.expires_at) == (thread, None, expires)
    assert claims.scopes == frozenset(scopes)
    # Any character but the signature's last (whose low bits base64 ignores when decoding).
    at %= len(token) - 1
    if token[at] == to or token[at] == ".":
        return
    changed = token[:at] + to + token[at + 1 :]
    with pytest.raises(TokenInvalid):
        signer.verify(changed)
