"""The chain's definition, checked against values computed by hand and by PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib

import asyncpg
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_replay.chain import GENESIS, fold, step


def test_first_event_hash_equals_sha256_of_zero_head_seq_and_chunk() -> None:
    expected = hashlib.sha256(bytes(32) + b"\x00\x00\x00\x00\x00\x00\x00\x01" + b'{"a":"\xc3\xa9"}')
    assert step(GENESIS, 1, '{"a":"é"}') == expected.digest()


def test_fold_of_no_events_is_the_genesis_hash() -> None:
    assert fold([]) == bytes(32)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=5), st.integers(1, 2**40))
def test_postgres_sha256_of_int8send_matches_the_python_step(chunks: list[str], first: int) -> None:
    async def in_postgres() -> bytes:
        conn = await asyncpg.connect("postgresql://root@127.0.0.1:5432/test")
        try:
            head = GENESIS
            for offset, chunk in enumerate(chunks):
                head = await conn.fetchval(
                    "SELECT sha256($1::bytea || int8send($2::bigint) || convert_to($3, 'UTF8'))",
                    head,
                    first + offset,
                    chunk.replace("\x00", ""),
                )
            return bytes(head)
        finally:
            await conn.close()

    pg = asyncio.run(in_postgres())
    assert pg == fold((first + i, c.replace("\x00", "")) for i, c in enumerate(chunks))
