"""Prometheus metrics: the registry, what the layers count, and what is sampled when scraped.

Counters and histograms are bumped where the thing happens: the HTTP edge
(append requests and their duration, every request by route), the group
committer (events appended, group sizes), a follower's writes (events sent,
lag), the lease reaper. Those bumped per commit or per follower write are
`LoopCounter`s and `LoopHistogram`s: prometheus_client takes a lock per bump,
which at every follower's every write was a few percent of a busy server's
CPU; these are plain numbers, bumped only from the event loop's thread and read
at scrape time, exposed as prometheus_client's own. Gauges are never kept in
step by hand: the app registers a reading (its hub's followers, its drivers'
runs, its pools) with `sample`, and the collector reads them at scrape time,
summed over whatever registered (one app per process in production; several in
a test process).

This module imports nothing else of the service, so any layer may call it.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client import gc_collector as _gc
from prometheus_client import platform_collector as _platform
from prometheus_client import process_collector as _process
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

# How prometheus_client writes a bucket's `le` (its own histograms' form); untyped there.
_le = cast(Callable[[float], str], floatToGoString)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

REGISTRY = CollectorRegistry(auto_describe=True)
_process.ProcessCollector(registry=REGISTRY)
_platform.PlatformCollector(registry=REGISTRY)
_gc.GCCollector(registry=REGISTRY)

_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

APPEND_REQUESTS = Counter(
    "replay_append_requests",
    "POST /v1/runs/{run_id}/events requests by outcome (ok, or the error code answered).",
    ["outcome"],
    registry=REGISTRY,
)
APPEND_DURATION = Histogram(
    "replay_append_duration_seconds",
    "Acknowledged appends: from the request's arrival to its commit being acknowledged.",
    buckets=_SECONDS,
    registry=REGISTRY,
)
LEASES_REAPED = Counter(
    "replay_leases_reaped",
    "Hosted runs closed by this process because their driver died (its lease ran out, or"
    " it was an earlier life of this instance): interrupted, or budget_exhausted if their"
    " time budget was out.",
    registry=REGISTRY,
)
BUDGETS_EXHAUSTED = Counter(
    "replay_budgets_exhausted",
    "Hosted runs this process closed budget_exhausted, by the budget that ran out"
    " (max_seconds, max_events, max_tool_calls, max_output_tokens).",
    ["budget"],
    registry=REGISTRY,
)
REPLICA_READS = Counter(
    "replay_replica_reads",
    "Catch-up reads with a standby configured, by who served them: standby (all of it),"
    " topped_up (the primary completed what the standby had not replayed), primary"
    " (the standby lacked the run or failed).",
    ["served"],
    registry=REGISTRY,
)
REDACTIONS = Counter(
    "replay_redactions",
    "Matches of each redaction rule replaced before the log stored them (never the text).",
    ["rule"],
    registry=REGISTRY,
)
HTTP_REQUESTS = Counter(
    "replay_http_requests",
    "HTTP requests by method, route template and status.",
    ["method", "route", "status"],
    registry=REGISTRY,
)


@dataclass(frozen=True, slots=True)
class _Gauge:
    help: str
    labels: tuple[str, ...] = ()


GAUGES: dict[str, _Gauge] = {
    "replay_stream_followers": _Gauge("Stream followers (open SSE / NDJSON responses)."),
    "replay_stream_runs_followed": _Gauge("Runs with at least one follower in this process."),
    "replay_stream_thread_followers": _Gauge(
        "Thread stream followers (open `/v1/threads/{id}/stream` responses)."
    ),
    "replay_stream_reads": _Gauge(
        "Reads of the log for followers so far, by who read: channel (one per wake-up,"
        " shared by a run's followers) or follower (catch-up, or fallen behind the buffer).",
        ("by",),
    ),
    "replay_hosted_runs": _Gauge("Hosted runs this process is driving."),
    "replay_draining": _Gauge("1 while this process drains before it stops (SIGTERM), else 0."),
    "replay_listen_connected": _Gauge("1 while the LISTEN connection is up, else 0."),
    "replay_db_pool_in_use": _Gauge("Database connections checked out.", ("pool",)),
    "replay_db_pool_size": _Gauge("Database connections open.", ("pool",)),
    "replay_db_pool_max_size": _Gauge("Most database connections the pool opens.", ("pool",)),
}


@dataclass(frozen=True, slots=True)
class _Reading:
    name: str
    labels: tuple[str, ...]
    read: Callable[[], float]


class _Sampled(Collector):
    def __init__(self) -> None:
        self._readings: list[_Reading] = []

    def add(self, reading: _Reading) -> Callable[[], None]:
        self._readings.append(reading)

        def remove() -> None:
            if reading in self._readings:
                self._readings.remove(reading)

        return remove

    def collect(self) -> Iterator[Metric]:
        for name, gauge in GAUGES.items():
            family = GaugeMetricFamily(name, gauge.help, labels=gauge.labels)
            totals: dict[tuple[str, ...], float] = {}
            for reading in self._readings:
                if reading.name == name:
                    totals[reading.labels] = totals.get(reading.labels, 0.0) + reading.read()
            if not totals and not gauge.labels:
                totals[()] = 0.0
            for labels, value in totals.items():
                family.add_metric(list(labels), value)
            yield family


_SAMPLED = _Sampled()
REGISTRY.register(_SAMPLED)


class LoopCounter:
    """A counter without a lock: bump it from the event loop's thread only."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class LoopHistogram:
    """A histogram without a lock: observe from the event loop's thread only."""

    __slots__ = ("bounds", "counts", "created", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.created = time.time()
        self.bounds = tuple(float(bound) for bound in bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        # The first bound at or above `amount`: buckets are `le` (inclusive).
        self.counts[bisect_left(self.bounds, amount)] += 1
        self.sum += amount

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        """The `le` buckets as Prometheus has them, counts summed upward."""
        buckets, total = [], 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += count
            buckets.append((_le(bound), float(total)))
        return buckets


class _Unlocked(Collector):
    """The loop's counters and histograms, as prometheus_client's own expose them."""

    def __init__(self) -> None:
        # name, help, label name (or none), {label value (or ""): counter}
        self._counters: list[tuple[str, str, str | None, dict[str, LoopCounter]]] = []
        self._histograms: list[tuple[str, str, LoopHistogram]] = []

    def counter(self, name: str, help: str) -> LoopCounter:
        counter = LoopCounter()
        self._counters.append((name, help, None, {"": counter}))
        return counter

    def counters(self, name: str, help: str, label: str, *values: str) -> dict[str, LoopCounter]:
        """A counter per value of its one label."""
        children = {value: LoopCounter() for value in values}
        self._counters.append((name, help, label, children))
        return children

    def histogram(self, name: str, help: str, bounds: Sequence[float]) -> LoopHistogram:
        histogram = LoopHistogram(bounds)
        self._histograms.append((name, help, histogram))
        return histogram

    def collect(self) -> Iterator[Metric]:
        for name, help, label, children in self._counters:
            family = CounterMetricFamily(name, help, labels=[label] if label else [])
            for value, counter in children.items():
                family.add_metric([value] if label else [], counter.value, created=counter.created)
            yield family
        for name, help, histogram in self._histograms:
            buckets = HistogramMetricFamily(name, help)
            buckets.add_metric([], histogram.cumulative(), histogram.sum)
            buckets.samples.append(Sample(f"{name}_created", {}, histogram.created))
            yield buckets


_UNLOCKED = _Unlocked()
REGISTRY.register(_UNLOCKED)

EVENTS_APPENDED = _UNLOCKED.counter(
    "replay_events_appended",
    "Events committed by this process's append path (HTTP, hosted runs, in-process writers).",
)
STREAM_BUFFERED = _UNLOCKED.counters(
    "replay_stream_buffered_events",
    "Events a followed run's channel buffered, by source: commit (rows this process"
    " committed, handed over without a read) or read (read back from the log).",
    "source",
    "commit",
    "read",
)
GROUP_COMMIT_EVENTS = _UNLOCKED.histogram(
    "replay_group_commit_events",
    "Events per group commit (one transaction, one fsync).",
    (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000),
)
STREAM_EVENTS_SENT = _UNLOCKED.counters(
    "replay_stream_events_sent",
    "Events written to stream followers (SSE and NDJSON), by who wrote them: the"
    " follower's own task, or the commit that buffered them for a follower waiting"
    " caught up.",
    "by",
    "follower",
    "commit",
)
FOLLOWER_LAG = _UNLOCKED.histogram(
    "replay_stream_follower_lag_events",
    "Per write to a follower: events the log is known to hold past what it has been sent.",
    (0, 1, 10, 100, 1000, 10_000, 100_000, 1_000_000),
)


def sample(name: str, read: Callable[[], float], **labels: str) -> Callable[[], None]:
    """Report `read()` as gauge `name` at every scrape; returns the function that stops it."""
    gauge = GAUGES[name]
    if tuple(labels) != gauge.labels:
        raise ValueError(f"{name} takes labels {gauge.labels}, not {tuple(labels)}")
    return _SAMPLED.add(_Reading(name, tuple(labels.values()), read))


def exposition() -> bytes:
    """The registry in Prometheus text format."""
    return generate_latest(REGISTRY)
