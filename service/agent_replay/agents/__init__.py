"""Hosted runs: the service drives agents itself and logs what they stream.

An agent is an upstream AG-UI HTTP endpoint or an in-process async generator
of chunks; a driver task owned by the process (not by any request) appends
its events to the log, so the run outlives the client that started it.

    drivers.py   Drivers: the registry (start, cancel, shutdown, closed elsewhere)
    driver.py    Driver: one run (reader, appender, lease renewal)
    reaper.py    Reaper: closes runs whose driver's process died
    endings.py   EndReason -> (status, error code, message), in one table
    budget.py    a run's budget: parsed, tightened, its events metered
    upstream.py  where events come from (AG-UI over HTTP, a Python generator)
"""

from agent_replay.agents.catalog import Agent, AgentCatalog, HttpAgent, PythonAgent, load_catalog
from agent_replay.agents.driver import Driver
from agent_replay.agents.drivers import Drivers
from agent_replay.agents.endings import ENDINGS, Ending, EndReason
from agent_replay.agents.reaper import Reaper

__all__ = [
    "ENDINGS",
    "Agent",
    "AgentCatalog",
    "Driver",
    "Drivers",
    "EndReason",
    "Ending",
    "HttpAgent",
    "PythonAgent",
    "Reaper",
    "load_catalog",
]
