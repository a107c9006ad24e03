"""The pure parts of fair share: which class each route counts against, from every flavour's
table, and the token-bucket arithmetic behind the RateLimit headers."""

from __future__ import annotations

import math

import pytest
from starlette.routing import Route

from gateway.config import Settings
from gateway.limits import buckets as buckets_module
from gateway.limits.buckets import Grant, LocalBuckets, Policy, standing
from gateway.limits.classes import (
    ENGINE_READ,
    ENGINE_WRITE,
    OWNED,
    UPLOAD,
    engine_class,
    owned_classes,
)
from gateway.limits.limiter import class_policy
from gateway.routes import all_routes
from gateway.upstream.flavors import FLAVORS

# (flavour, method, path) -> class: the engine's reads by POST, and writes of every kind.
KNOWN = [
    ("everos", "POST", "/api/v2/memory/get", ENGINE_READ),
    ("everos", "POST", "/api/v1/memory/get", ENGINE_READ),
    ("everos", "POST", "/api/v2/memory/flush", ENGINE_WRITE),
    ("everos", "GET", "/api/v2/tasks", ENGINE_READ),
    ("everos", "POST", "/api/v2/memory/add", ENGINE_WRITE),
    ("everos", "POST", "/api/v2/memory/search", ENGINE_READ),
    ("everos-cloud", "POST", "/api/v2/memory/delete", ENGINE_WRITE),
    ("everos-cloud", "POST", "/api/v2/memory/edit", ENGINE_WRITE),
    ("everos-cloud", "POST", "/api/v2/memory/get", ENGINE_READ),
    ("everos-cloud-v1", "POST", "/api/v1/memories/get", ENGINE_READ),
    ("everos-cloud-v1", "PATCH", "/api/v1/groups/g1", ENGINE_WRITE),
    ("mem0", "GET", "/memories", ENGINE_READ),
    ("mem0", "DELETE", "/memories", ENGINE_WRITE),
    ("mem0", "PUT", "/memories/m1", ENGINE_WRITE),
    ("mem0", "POST", "/v3/memories/", ENGINE_READ),
    ("mem0", "POST", "/v1/exports/", ENGINE_WRITE),
    ("mem0", "POST", "/v1/exports/get/", ENGINE_READ),
    ("mem0", "POST", "/search", ENGINE_READ),
    ("memos", "POST", "/product/get_all", ENGINE_READ),
    ("memos", "POST", "/product/delete_memory", ENGINE_WRITE),
    ("memos", "POST", "/product/chat/complete", ENGINE_WRITE),
    ("memos", "POST", "/product/add", ENGINE_WRITE),
]


@pytest.mark.parametrize(("flavor", "method", "path", "expected"), KNOWN)
def test_engine_routes_are_classed_by_what_the_engine_does(
    flavor: str, method: str, path: str, expected: str
) -> None:
    segments = tuple(part for part in path.split("/") if part)
    found = FLAVORS[flavor].routes.find(method, segments)
    assert found is not None, path
    assert engine_class(found[0]) == expected


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_every_safe_method_route_is_a_read_and_every_add_a_write(flavor: str) -> None:
    for route in FLAVORS[flavor].routes.routes:
        if route.method in ("GET", "HEAD", "OPTIONS") or route.handled == "search":
            assert engine_class(route) == ENGINE_READ, route.pattern
        if route.claims:
            assert engine_class(route) == ENGINE_WRITE, route.pattern


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_the_owned_routes_classed_as_engine_calls_or_uploads_exist(flavor: str) -> None:
    settings = Settings().with_values(upstream={"flavor": flavor,
                                                "base_url": "http://engine.test"})
    served = {(method, route.path) for route in all_routes(settings)
              if isinstance(route, Route) for method in route.methods or ()}
    classes = owned_classes(FLAVORS[flavor])
    assert set(classes) <= served
    assert classes[("POST", "/resources")] == UPLOAD
    assert classes[("POST", "/memories/add")] == ENGINE_WRITE
    assert classes[("POST", "/memories/search")] == ENGINE_READ
    assert ("GET", "/resources") not in classes  # listing is the gateway's own: OWNED
    signs = FLAVORS[flavor].signs_files
    assert signs == (flavor in ("everos", "everos-cloud", "everos-cloud-v1"))
    assert (classes.get(("POST", "/api/v2/object/sign")) == UPLOAD) is signs


@pytest.mark.parametrize(("tokens", "elapsed", "left", "allowed"), [
    (3.0, 0.0, 2.0, True),  # a full bucket
    (0.0, 0.0, 0.0, False),  # empty
    (0.0, 0.5, 0.0, True),  # half a second at 2/s: one token, spent
    (0.5, 0.1, 0.7, False),  # not yet a whole token
    (2.5, 10.0, 2.0, True),  # refilled up to the capacity, not beyond
    (1.0, -5.0, 0.0, True),  # a clock that stepped back refills nothing
])
def test_a_draw_refills_at_the_rate_up_to_the_capacity(
    tokens: float, elapsed: float, left: float, allowed: bool
) -> None:
    buckets = LocalBuckets(clock=lambda: 100.0 + elapsed)
    buckets._buckets["k"] = [tokens, 100.0]
    after = buckets.tokens_after("k", Policy(rate=2.0, capacity=3))
    assert (after >= 0) is allowed  # below 0, by one, when refused
    assert after + (0 if allowed else 1) == pytest.approx(left)
    assert buckets._buckets["k"][0] == pytest.approx(left)  # a refusal takes nothing


def test_grant_headers_count_whole_tokens_and_seconds() -> None:
    policy = Policy(rate=0.5, capacity=10)
    assert Grant(True, policy, 4.5).headers() == [
        (b"ratelimit-limit", b"10"), (b"ratelimit-remaining", b"4"),
        (b"ratelimit-reset", b"11")]  # 5.5 tokens to full at 0.5/s
    refused = dict(Grant(False, policy, 0.25).headers())
    assert refused[b"ratelimit-remaining"] == b"0"
    assert refused[b"retry-after"] == b"2"  # 0.75 of a token at 0.5/s


@pytest.mark.parametrize(("rate", "capacity"), [(0.5, 10), (2.0, 3), (1_000_000.0, 1_000_000),
                                                 (3.0, 1)])
def test_a_full_buckets_headers_are_kept_and_say_what_they_would_compute(
    rate: float, capacity: int
) -> None:
    policy = Policy(rate=rate, capacity=capacity)
    full = standing(policy, capacity - 1.0)
    assert full is standing(policy, capacity - 1.0)  # made once per policy
    remaining = capacity - 1
    assert dict(full) == {b"ratelimit-limit": b"%d" % capacity,
                          b"ratelimit-remaining": b"%d" % remaining,
                          b"ratelimit-reset": b"%d" % math.ceil(1 / rate)}
    assert list(full) == Grant(True, policy, capacity - 1.0).headers()
    # any other standing is computed: a token less, or part of one
    assert dict(standing(policy, max(0.0, capacity - 1.5)))[b"ratelimit-remaining"] == (
        b"%d" % math.floor(max(0.0, capacity - 1.5)))


def test_local_buckets_refill_by_their_clock() -> None:
    now = [100.0]
    buckets = LocalBuckets(clock=lambda: now[0])
    policy = Policy(rate=1.0, capacity=2)

    def take(key: str = "k") -> bool:
        return buckets.tokens_after(key, policy) >= 0

    assert [take(), take(), take()] == [True, True, False]
    assert take("other")  # a bucket per key
    now[0] += 1.0
    assert [take(), take()] == [True, False]
    now[0] += 60.0
    assert [take(), take(), take()] == [True, True, False]


def test_a_class_inherits_what_it_does_not_set() -> None:
    settings = Settings().with_values(rate_limits={"requests_per_s": 10, "burst": 20},
                                      rate_limits_upload={"requests_per_s": 1})
    assert class_policy(settings, UPLOAD) == Policy(rate=1.0, capacity=20)
    assert class_policy(settings, OWNED) == Policy(rate=10.0, capacity=20)
    assert class_policy(Settings(), OWNED) is None  # off by default
    only_uploads = Settings().with_values(rate_limits_upload={"requests_per_s": 2})
    assert class_policy(only_uploads, UPLOAD) == Policy(rate=2.0, capacity=1)
    assert class_policy(only_uploads, ENGINE_READ) is None


def test_past_max_buckets_only_buckets_full_again_are_forgotten(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(buckets_module, "MAX_BUCKETS", 3)
    now = [0.0]
    buckets = LocalBuckets(clock=lambda: now[0])
    policy = Policy(rate=1.0, capacity=2)  # full again 2 s after a draw
    for key in ("a", "b"):
        buckets.tokens_after(key, policy)
    now[0] = 5.0
    buckets.tokens_after("c", policy)
    buckets.tokens_after("c", policy)  # "c" is empty now
    buckets.tokens_after("d", policy)  # the fourth: "a" and "b" (full again) are forgotten
    assert sorted(buckets._buckets) == ["c", "d"]
    assert buckets.tokens_after("c", policy) < 0  # what was kept still counts
