"""Prometheus metrics: one registry per app, a few counters and a latency histogram.

Label values are bounded on purpose: a request's `route` is the owned route's path template,
`proxy` for pass-through or `unmatched` when no handler ran (bad key, unknown owned path), never
the raw path; unusual methods count as `OTHER`.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gateway.errors import (
    GatewayError,
    UpstreamAnswerTooLarge,
    UpstreamBadResponse,
    UpstreamPoolExhausted,
    UpstreamTimeout,
    UpstreamUnavailable,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST
PROXY_ROUTE = "proxy"
UNMATCHED_ROUTE = "unmatched"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Pass-through is ~1 ms; uploads and slow engine searches take seconds.
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)
UPSTREAM_ERROR_KINDS: dict[type[GatewayError], str] = {
    UpstreamUnavailable: "unavailable",
    UpstreamTimeout: "timeout",
    UpstreamPoolExhausted: "pool_exhausted",
    UpstreamBadResponse: "bad_response",
    UpstreamAnswerTooLarge: "answer_too_large",
}


class HasSource(Protocol):
    @property
    def source(self) -> str: ...


class RequestStats(Collector):
    """Every request's count and latency, kept as plain numbers and rendered when scraped.

    It runs once per request, so it costs what a few list and dict updates cost: prometheus's
    own counters and histograms take a lock per update and were about 4 % of a pass-through
    request's work (docs/decisions.md). One event loop per process updates them, so no lock is
    needed; a scrape runs on the same loop."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, int], int] = {}
        # route -> per-bucket counts (the last one is +Inf, not cumulative) and their sum
        self.latency: dict[str, tuple[list[int], list[float]]] = {}

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        counts = self.counts
        counts[key] = counts.get(key, 0) + 1
        observed = self.latency.get(route)
        if observed is None:
            observed = self.latency[route] = ([0] * (len(LATENCY_BUCKETS) + 1), [0.0])
        observed[0][bisect_left(LATENCY_BUCKETS, seconds)] += 1  # `le` bounds are inclusive
        observed[1][0] += seconds

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "gateway_requests", "Requests answered, by route template, method and status",
            labels=["route", "method", "status"])
        for (route, method, status), count in list(self.counts.items()):
            requests.add_metric([route, method, str(status)], count)
        yield requests
        duration = HistogramMetricFamily(
            "gateway_request_duration_seconds", "Time to answer a request, by route template",
            labels=["route"])
        for route, (counts, total) in list(self.latency.items()):
            cumulative, buckets = 0, []
            for bound, count in zip((*LATENCY_BUCKETS, float("inf")), counts, strict=True):
                cumulative += count
                buckets.append((_go_float(bound), cumulative))
            duration.add_metric([route], buckets, total[0])
        yield duration


def _go_float(bound: float) -> str:
    """A bucket bound as prometheus_client writes it: `0.001`, `1.0`, `+Inf`."""
    return "+Inf" if bound == float("inf") else repr(bound)


class PlainCounter(Collector):
    """A counter without labels kept as a plain number, rendered when scraped: it is updated
    on every search, on the event loop (see RequestStats)."""

    def __init__(self, name: str, documentation: str) -> None:
        self.name = name
        self.documentation = documentation
        self.value = 0

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(self.name, self.documentation, value=self.value)


class RecentAnswers:
    """Answers of the last hour by minute: all, 4xx, 5xx and 429 (the console's overview).

    A ring of 60 minutes, each slot stamped with its minute; a stale slot is reset when reused
    and skipped when summed. One event loop per process updates it, so no lock is needed."""

    SLOTS = 60

    def __init__(self) -> None:
        self._minute = [-1] * self.SLOTS
        self._counts = [[0, 0, 0, 0] for _ in range(self.SLOTS)]

    def add(self, status: int, now_s: float | None = None) -> None:
        minute = int((time.time() if now_s is None else now_s) // 60)
        slot = minute % self.SLOTS
        counts = self._counts[slot]
        if self._minute[slot] != minute:
            self._minute[slot] = minute
            counts[0] = counts[1] = counts[2] = counts[3] = 0
        counts[0] += 1
        if 400 <= status < 500:
            counts[1] += 1
            if status == 429:
                counts[3] += 1
        elif status >= 500:
            counts[2] += 1

    def last_hour(self, now_s: float | None = None) -> dict[str, int]:
        minute = int((time.time() if now_s is None else now_s) // 60)
        total = [0, 0, 0, 0]
        for stamp, counts in zip(self._minute, self._counts, strict=True):
            if minute - self.SLOTS < stamp <= minute:
                total = [a + b for a, b in zip(total, counts, strict=True)]
        return dict(zip(("requests", "4xx", "5xx", "429"), total, strict=True))


class Metrics:
    """The app's metrics; feature code calls the small methods below, never prometheus directly."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = RequestStats()
        self.recent = RecentAnswers()
        self.registry.register(self.requests)
        self.upstream_errors = Counter(
            "gateway_upstream_errors", "Upstream transport failures answered 502/503/504, by kind",
            ["kind"], registry=self.registry,
        )
        self.recorded = Counter(
            "gateway_attachments_recorded", "Attachment mappings committed, by source",
            ["source"], registry=self.registry,
        )
        self.matched = PlainCounter(
            "gateway_attachments_matched", "Attachments attached to search results")
        self.registry.register(self.matched)
        self.resolutions = Counter(
            "gateway_resolutions", "Target resolutions, by resolution mode",
            ["mode"], registry=self.registry,
        )
        for kind in UPSTREAM_ERROR_KINDS.values():
            self.upstream_errors.labels(kind)  # present at 0, so alerts can use rate()
        # prometheus-client's default collectors: process_* (CPU, memory, open files, start
        # time), python_gc_* and python_info, as every Prometheus client exposes them
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.request(route, method if method in METHODS else "OTHER", status, seconds)
        self.recent.add(status)

    def gateway_error(self, exc: GatewayError) -> None:
        """Count an error answered to a client when it is an upstream failure."""
        kind = UPSTREAM_ERROR_KINDS.get(type(exc))
        if kind is not None:
            self.upstream_errors.labels(kind).inc()

    def attachments_recorded(self, mappings: Iterable[HasSource]) -> None:
        for mapping in mappings:
            self.recorded.labels(mapping.source).inc()

    def attachments_matched(self, count: int) -> None:
        self.matched.value += count

    def resolution(self, mode: str) -> None:
        self.resolutions.labels(mode).inc()

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)
