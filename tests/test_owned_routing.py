"""The owned routes are matched among those their whole path or its first segment allows
(gateway/serving/route_index.py `RouteIndex`): always the route, and the method error, that
trying them all would give."""

from __future__ import annotations

import re

import pytest
from starlette.routing import BaseRoute, Match, Route

from gateway.config import Settings
from gateway.routes import all_routes
from gateway.serving.route_index import (
    RouteIndex,
    exact_routes,
    plain_routes,
    route_groups,
    route_path,
)
from gateway.upstream.flavors import FLAVORS


def first_match(routes: tuple[BaseRoute, ...] | list[BaseRoute], scope: dict
                ) -> tuple[BaseRoute | None, BaseRoute | None]:
    """(the route matching fully, the first matching all but the method), as `_route` finds."""
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route, partial
        if match is Match.PARTIAL and partial is None:
            partial = route
    return None, partial


def paths_for(routes: list[BaseRoute]) -> list[str]:
    """Each route's path with its parameters filled in, and near misses."""
    out = ["/", "/nothing", "/memories", "/api", "/api/v9/memory/add"]
    for route in routes:
        path = getattr(route, "path", "")
        filled = re.sub(r"\{[^}]+\}", "x1", path)
        out += [filled, filled + "/more", filled.rsplit("/", 1)[0] or "/"]
    return out


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_grouped_routing_finds_what_trying_every_route_finds(flavor: str) -> None:
    settings = Settings().with_values(upstream={"flavor": flavor,
                                                "base_url": "http://engine.test"})
    routes = all_routes(settings)
    groups, any_start = route_groups(routes)
    index = RouteIndex(routes)
    methods = sorted({m for r in routes if isinstance(r, Route) for m in r.methods or ()})
    checked = 0
    for path in paths_for(routes):
        for method in methods:
            for root in ("", "/gw"):
                scope = {"type": "http", "method": method, "path": root + path,
                         "root_path": root}
                expected = first_match(routes, scope)
                first = route_path(scope)[1:].partition("/")[0]
                assert first_match(groups.get(first, any_start), scope) == expected, (method, path)
                assert first_match(index.candidates(scope), scope) == expected, (method, path)
                plain = None if root else index.plain.get(path)
                if plain is not None and method in plain.methods:  # served without matching
                    assert expected == (plain.route, None), (method, path)
                checked += 1
    assert checked > 1000
    assert "/memories/search" in index.plain  # the search runs its route without matching
    assert "/memories/search" in index.exact and len(index.exact) > 10  # looked up whole


def test_a_route_whose_first_segment_is_a_parameter_is_tried_for_every_path() -> None:
    async def endpoint(request: object) -> None: ...

    routes: list[BaseRoute] = [Route("/a/b", endpoint), Route("/{anything}/b", endpoint),
                               Route("/c", endpoint)]
    groups, any_start = route_groups(routes)
    assert groups["a"] == tuple(routes[:2])
    assert groups["c"] == tuple(routes[1:])
    assert any_start == (routes[1],)


def test_a_path_without_parameters_tries_only_the_routes_that_may_match_it_in_order() -> None:
    async def endpoint(request: object) -> None: ...

    routes: list[BaseRoute] = [Route("/a/{x}", endpoint), Route("/a/b", endpoint),
                               Route("/a/b/c", endpoint), Route("/c", endpoint)]
    exact = exact_routes(routes)
    assert exact["/a/b"] == tuple(routes[:2])  # the parameter's route comes first, as it did
    assert exact["/a/b/c"] == (routes[2],)
    assert exact["/c"] == (routes[3],)
    assert "/a/{x}" not in exact


def test_only_a_path_one_plain_route_may_match_is_served_without_matching() -> None:
    async def endpoint(request: object) -> None: ...

    class OwnMatching(Route):
        def matches(self, scope: dict) -> tuple[Match, dict]:  # type: ignore[override]
            return Match.NONE, {}

    routes: list[BaseRoute] = [Route("/a/{x}", endpoint), Route("/a/b", endpoint),
                               Route("/c", endpoint, methods=["POST"]),
                               OwnMatching("/d", endpoint), Route("/e", endpoint),
                               Route("/e", endpoint, methods=["POST"])]
    plain = plain_routes(exact_routes(routes))
    assert set(plain) == {"/c"}  # /a/b may be /a/{x}, /d matches its own way, /e has two
    assert plain["/c"].route is routes[2] and plain["/c"].methods == {"POST"}
