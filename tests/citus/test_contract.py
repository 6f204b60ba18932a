"""The log's `LogStore` contract suite, run by `EventLog` through a Citus coordinator."""

from __future__ import annotations

from tests.log.test_eventlog_contract import TestEventLog as _OnPostgreSQL


class TestEventLogOnCitus(_OnPostgreSQL):
    """Every contract test, both row layouts, with `database_url` the coordinator's."""
