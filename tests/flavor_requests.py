"""A faked engine that answers every route, for the flavour tests of route models: it echoes the
user header as the owner (so a route by id's owner read passes) and answers an empty result in
every engine's shape."""

from __future__ import annotations

import httpx
import respx

from tests.engine_fixtures import USER_HEADER


def every_route(engine: respx.MockRouter) -> respx.Route:
    """Answer any method and path with 200 and an empty result owned by the caller."""
    return engine.route().mock(side_effect=lambda request: httpx.Response(200, json={
        "user_id": request.headers.get(USER_HEADER), "results": [], "data": {}}))


def forwarded(route: respx.Route, before: int) -> list[httpx.Request]:
    """The requests the engine got since it had `before` calls."""
    return [call.request for call in route.calls[before:]]
