"""Request ids the service makes up (agent_replay.api.access.fresh_request_id)."""

from __future__ import annotations

import os
import re

from agent_replay.api.access import fresh_request_id


def test_fresh_request_id_when_drawn_many_times_then_32_hex_digits_all_distinct() -> None:
    ids = [fresh_request_id() for _ in range(10_000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_fresh_request_id_when_process_forks_then_child_draws_another_prefix() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report one id, leave at once
        os.write(write, fresh_request_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    parent = fresh_request_id()
    assert re.fullmatch(r"[0-9a-f]{32}", child)
    assert child[:16] != parent[:16]
