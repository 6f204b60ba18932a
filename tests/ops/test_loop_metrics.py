"""The loop's lock-free counters and histograms expose what prometheus_client's would."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from agent_replay.metrics import LoopCounter, LoopHistogram, _Unlocked

_BOUNDS = (0, 1, 10, 100, 1000, 10_000, 100_000, 1_000_000)


def _lines(registry: CollectorRegistry) -> list[str]:
    """The exposition without the `_created` samples' values (each its own clock)."""
    text = generate_latest(registry).decode()
    return sorted(line.split(" ")[0] if "_created" in line else line for line in text.splitlines())


@given(
    st.lists(st.one_of(st.integers(-5, 2_000_000), st.sampled_from(_BOUNDS)), max_size=40),
    st.lists(st.integers(0, 1000), max_size=10),
)
def test_loop_metrics_when_bumped_then_exposed_as_prometheus_clients_own(
    observed: list[int], increments: list[int]
) -> None:
    """Bucket edges included (`le` is inclusive), values past the last bound, sums."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    unlocked = _Unlocked()
    ours.register(unlocked)
    lag = unlocked.histogram("lag", "Lag.", _BOUNDS)
    sent = unlocked.counter("sent", "Sent.")
    by = unlocked.counters("buffered", "Buffered.", "source", "commit", "read")
    their_lag = Histogram("lag", "Lag.", buckets=_BOUNDS, registry=theirs)
    their_sent = Counter("sent", "Sent.", registry=theirs)
    their_by = Counter("buffered", "Buffered.", ["source"], registry=theirs)
    their_by.labels("commit")
    their_by.labels("read")
    for value in observed:
        lag.observe(value)
        their_lag.observe(value)
    for amount in increments:
        sent.inc(amount)
        their_sent.inc(amount)
        by["read"].inc(amount)
        their_by.labels("read").inc(amount)
    assert _lines(ours) == _lines(theirs)


def test_loop_counter_and_histogram_when_new_then_zero() -> None:
    assert LoopCounter().value == 0
    histogram = LoopHistogram(_BOUNDS)
    assert histogram.sum == histogram.count == 0 and histogram.cumulative()[-1] == ("+Inf", 0.0)
