"""Whether checking a credential takes the same time whichever it is (no timing oracle).

    python ops/bench/key_compare.py [--keys 20] [--rounds 30] [--json FILE]

An API key is looked up by comparing its digest with every configured key's
(`agent_replay.access.keys.KeyRing`), a token's signature by PyJWT's constant-time
comparison (`agent_replay.access.tokens.TokenSigner`). This times, interleaved
round by round, the lookup of the first configured key (the baseline), of
the last, of an unknown secret of the same length and of one differing from
a key in its last character only; and the refusal of a token whose signature
differs from the right one in its first byte (the baseline) against one whose
signature differs late (a good token is shown too: it costs more, as its claims
are then read). Each figure is the
median over rounds of the mean of a batch, printed as a ratio to the
baseline in the same run: ratios near 1.0 mean position and prefix say
nothing. No database and no server: the pure functions only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent_replay.access import KeyRing, TokenScope, TokenSigner
from agent_replay.access.tokens import TokenInvalid

BATCH = 2000


def _batch_seconds(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    for _ in range(BATCH):
        fn()
    return (time.perf_counter() - started) / BATCH


def _verify(signer: TokenSigner, token: str) -> Callable[[], object]:
    def check() -> object:
        try:
            return signer.verify(token)
        except TokenInvalid:
            return None

    return check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    secrets = [f"key-{i:04d}-{'s' * 40}" for i in range(args.keys)]
    ring = KeyRing(",".join(f"{s}:read" for s in secrets))
    signer = TokenSigner("bench-token-secret-0123456789abcdef-0123456789")
    token, _ = signer.mint(thread_id="t", scopes=[TokenScope.READ], ttl_seconds=3600)
    head, payload, signature = token.split(".")

    def flip(at: int) -> str:
        # (Not the last character: its low bits are padding, ignored when decoded.)
        changed = "B" if signature[at] == "A" else "A"
        return f"{head}.{payload}.{signature[:at]}{changed}{signature[at + 1 :]}"

    cases: dict[str, Callable[[], object]] = {
        "first key": lambda: ring.scopes(secrets[0]),
        "last key": lambda: ring.scopes(secrets[-1]),
        "unknown, same length": lambda: ring.scopes("x" * len(secrets[0])),
        "unknown, last char differs": lambda: ring.scopes(secrets[-1][:-1] + "!"),
        "token, first byte differs": _verify(signer, flip(0)),
        "token, a late byte differs": _verify(signer, flip(len(signature) - 2)),
        "token, good (does more)": _verify(signer, token),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, fn in cases.items():
            times[name].append(_batch_seconds(fn))
    medians = {name: statistics.median(t) for name, t in times.items()}
    base_key, base_token = medians["first key"], medians["token, first byte differs"]
    result = {}
    for name, median in medians.items():
        base = base_token if name.startswith("token") else base_key
        result[name] = {"us": round(median * 1e6, 3), "ratio": round(median / base, 3)}
        print(f"{name:30s} {median * 1e6:8.2f} µs  {median / base:5.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"keys": args.keys, "rounds": args.rounds, **result}))


if __name__ == "__main__":
    main()
