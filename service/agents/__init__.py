"""Hosted runs: the service drives agents itself and logs what they stream.

An agent is an upstream AG-UI HTTP endpoint or an in-process async generator
of chunks; a driver task owned by the process (not by any request) appends
its events to the log, so the run outlives the client that started it.
"""

from service.agents.catalog import Agent, AgentCatalog, HttpAgent, PythonAgent, load_catalog
from service.agents.driver import Drivers

__all__ = ["Agent", "AgentCatalog", "Drivers", "HttpAgent", "PythonAgent", "load_catalog"]
