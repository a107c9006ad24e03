"""Prometheus metrics: one registry per app, a few counters and a latency histogram.

Label values are bounded on purpose: a request's `route` is the owned route's path template,
`proxy` for pass-through or `unmatched` when no handler ran (bad key, unknown owned path), never
the raw path; unusual methods count as `OTHER`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

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


class Metrics:
    """The app's metrics; feature code calls the small methods below, never prometheus directly."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "gateway_requests", "Requests answered, by route template, method and status",
            ["route", "method", "status"], registry=self.registry,
        )
        self.duration = Histogram(
            "gateway_request_duration_seconds", "Time to answer a request, by route template",
            ["route"], buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.upstream_errors = Counter(
            "gateway_upstream_errors", "Upstream transport failures answered 502/503/504, by kind",
            ["kind"], registry=self.registry,
        )
        self.recorded = Counter(
            "gateway_attachments_recorded", "Attachment mappings committed, by source",
            ["source"], registry=self.registry,
        )
        self.matched = Counter(
            "gateway_attachments_matched", "Attachments attached to search results",
            registry=self.registry,
        )
        self.resolutions = Counter(
            "gateway_resolutions", "Target resolutions, by resolution mode",
            ["mode"], registry=self.registry,
        )
        for kind in UPSTREAM_ERROR_KINDS.values():
            self.upstream_errors.labels(kind)  # present at 0, so alerts can use rate()
        # Label lookups cost more than the increments: children are cached per label tuple.
        self._request_children: dict[tuple[str, str, int], Any] = {}
        self._duration_children: dict[str, Any] = {}

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        if method not in METHODS:
            method = "OTHER"
        key = (route, method, status)
        counter = self._request_children.get(key)
        if counter is None:
            counter = self._request_children[key] = self.requests.labels(route, method, status)
        counter.inc()
        timer = self._duration_children.get(route)
        if timer is None:
            timer = self._duration_children[route] = self.duration.labels(route)
        timer.observe(seconds)

    def gateway_error(self, exc: GatewayError) -> None:
        """Count an error answered to a client when it is an upstream failure."""
        kind = UPSTREAM_ERROR_KINDS.get(type(exc))
        if kind is not None:
            self.upstream_errors.labels(kind).inc()

    def attachments_recorded(self, mappings: Iterable[HasSource]) -> None:
        for mapping in mappings:
            self.recorded.labels(mapping.source).inc()

    def attachments_matched(self, count: int) -> None:
        if count:
            self.matched.inc(count)

    def resolution(self, mode: str) -> None:
        self.resolutions.labels(mode).inc()

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)
