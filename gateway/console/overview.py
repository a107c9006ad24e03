"""`/console`: the engine's readiness, the last hour's answers, users, keys and erasures."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import guard
from gateway.console.calls import public
from gateway.console.rendering import page
from gateway.services import services
from gateway.store import user_rows, users


async def overview(request: Request) -> Response:
    who = await guard.operator(request)
    svc = services(request)
    ready = await public(request, who, "/readyz")
    checks = ready.json().get("checks", {}) if ready.body else {}
    return page(
        request, "overview.html", who,
        ready=ready.ok, checks=checks,
        metrics_on=svc.settings.metrics.enabled,
        last_hour=svc.metrics.recent.last_hour(),
        totals=await users.totals(svc.db),
        erasing=await user_rows.unfinished(svc.db),
    )


routes = [Route("/console", overview, methods=["GET"])]
