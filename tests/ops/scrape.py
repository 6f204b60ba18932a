"""Reading `/metrics` as Prometheus does: the text format, parsed by prometheus-client's parser."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(http: httpx.AsyncClient, **headers: str) -> Samples:
    response = await http.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, labels: Mapping[str, str] | None = None) -> float:
    """A sample's value; 0 for a labelled series not yet created (a counter never bumped)."""
    return samples.get((name, frozenset((labels or {}).items())), 0.0)


def delta(
    before: Samples, after: Samples, name: str, labels: Mapping[str, str] | None = None
) -> float:
    return value(after, name, labels) - value(before, name, labels)
