"""Hosted runs across two replicas on Citus: leases, the reaper, one driver per run
(tests/agents/test_processes.py's tests, with `database_url` the coordinator's)."""

from __future__ import annotations

from tests.agents.test_processes import (
    test_driver_killed_9_then_survivor_closes_run_interrupted_and_reader_ends,
    test_driver_process_stopped_gracefully_then_run_closed_interrupted_at_once,
    test_two_processes_start_same_run_then_exactly_one_drives_it,
    two_processes,
)

__all__ = [
    "test_driver_killed_9_then_survivor_closes_run_interrupted_and_reader_ends",
    "test_driver_process_stopped_gracefully_then_run_closed_interrupted_at_once",
    "test_two_processes_start_same_run_then_exactly_one_drives_it",
    "two_processes",
]
