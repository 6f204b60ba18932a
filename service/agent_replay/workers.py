"""`agent-replay serve --workers N`: what each worker process sets up for itself.

The parent (`agent_replay.cli`) settles the database once and hands the workers its
URL and log level in the environment, which spawned processes inherit; each
worker then makes its app from there (`agent_replay.api.app.worker_app`).
"""

from __future__ import annotations

import gc
import os

from agent_replay import logs
from agent_replay.config import Settings

# The parent's --log-level, for its workers.
WORKER_LOG_LEVEL = "REPLAY_WORKER_LOG_LEVEL"


def tune_collector() -> None:
    """Fewer, cheaper collections: a server holding thousands of live streams keeps
    hundreds of thousands of tracked objects, and CPython's default thresholds walk
    them all every few seconds (long pauses under a large fan-out: the fan-out of
    ops/bench/stream.py, docs/benchmarks.md)."""
    gc.set_threshold(20_000, 50, 100)


def worker_settings() -> Settings:
    """A worker's settings: its parent's, from the environment, with a name of its own
    (a configured instance id would otherwise be shared by every worker's leases)."""
    settings = Settings()
    if settings.instance_id:
        settings.instance_id = f"{settings.instance_id}:{os.getpid()}"
    logs.configure(settings.log_format, os.environ.get(WORKER_LOG_LEVEL, "info"))
    tune_collector()
    return settings
