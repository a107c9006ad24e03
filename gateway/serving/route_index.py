"""The owned routes indexed by path: a request tries only the routes that may match its path,
in their order (the same route, and the same method error, as trying them all), and a path one
plain route alone may match runs that route without matching at all (gateway/app.py `_route`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Scope


def route_groups(routes: list[BaseRoute]
                 ) -> tuple[dict[str, tuple[BaseRoute, ...]], tuple[BaseRoute, ...]]:
    """The routes that may match a path, by its first segment, in their order: those whose
    path starts with that segment, and those whose first segment is a parameter (also the
    second value: what a path of any other first segment may match)."""
    def first_segment(route: BaseRoute) -> str | None:
        path = getattr(route, "path", None)
        if not isinstance(path, str) or not path.startswith("/"):
            return None  # matched by rules of its own: a candidate for every path
        segment = path[1:].partition("/")[0]
        return None if "{" in segment else segment

    firsts = [first_segment(route) for route in routes]
    any_start = tuple(route for route, first in zip(routes, firsts, strict=True) if first is None)
    groups = {
        segment: tuple(route for route, first in zip(routes, firsts, strict=True)
                       if first in (segment, None))
        for segment in {first for first in firsts if first is not None}
    }
    return groups, any_start


def exact_routes(routes: list[BaseRoute]) -> dict[str, tuple[BaseRoute, ...]]:
    """For each owned route's path without parameters, the routes that may match that very
    path, in their order: those whose pattern matches it and those matched by rules of their
    own. A request to one of these paths (`/memories/search`) tries one or two routes rather
    than its first segment's group (`route_groups`)."""
    def may_match(route: BaseRoute, path: str) -> bool:
        pattern = getattr(route, "path_regex", None)
        return pattern is None or pattern.match(path) is not None

    static = {path for route in routes
              if isinstance(path := getattr(route, "path", None), str)
              and path.startswith("/") and "{" not in path}
    return {path: tuple(route for route in routes if may_match(route, path)) for path in static}


class PlainRoute(NamedTuple):
    route: Route
    methods: frozenset[str]
    app: ASGIApp  # what Route.handle runs for one of `methods`


def plain_routes(exact: dict[str, tuple[BaseRoute, ...]]) -> dict[str, PlainRoute]:
    """The paths only one route may match, a Starlette `Route` without path parameters that
    lists its methods: a request to one for one of them runs that route without matching."""
    plain = {}
    for path, (route, *others) in exact.items():
        if (not others and isinstance(route, Route) and type(route).matches is Route.matches
                and type(route).handle is Route.handle and not route.param_convertors
                and route.methods and route.path == path):
            plain[path] = PlainRoute(route, frozenset(route.methods), route.app)
    return plain


def route_path(scope: Scope) -> str:
    """The path routes match: without the root path, as Starlette's `get_route_path` takes
    it off."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root):len(root) + 1] in ("", "/"):
        path = path[len(root):]
    return path


class RouteIndex:
    """The owned routes, indexed so that a request tries only those that may match its path,
    in their order: the same route, and the same method error, as trying them all."""

    def __init__(self, routes: list[BaseRoute], prefixes: Iterable[str] = ()) -> None:
        # Fast pre-check: only paths starting like an owned route go through route matching.
        self.starts = owned_path_starts(routes, prefixes)
        self.groups, self.any_start = route_groups(routes)
        self.exact = exact_routes(routes)
        self.plain = plain_routes(self.exact)

    def candidates(self, scope: Scope) -> tuple[BaseRoute, ...]:
        path = route_path(scope)
        found = self.exact.get(path)
        if found is None:
            found = self.groups.get(path[1:].partition("/")[0], self.any_start)
        return found


def owned_path_starts(routes: list[BaseRoute], prefixes: Iterable[str] = ()) -> tuple[str, ...]:
    """The literal start of every owned route's path, plus the owned prefixes."""
    starts = set(prefixes)
    for route in routes:
        path = getattr(route, "path", "")
        starts.add(path.split("{", 1)[0] or "/")
    return tuple(sorted(starts))
