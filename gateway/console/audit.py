"""`/console/audit`: the admin audit log, console actions included, filterable by action."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import guard
from gateway.console.calls import as_admin, query_string
from gateway.console.rendering import next_url, page

CONSOLE_ACTIONS = ("console.sign_in", "console.sign_out", "console.key_create",
                   "console.key_revoke", "console.user_export", "console.user_erase")
API_ACTIONS = ("keys.create", "keys.revoke", "users.export", "users.erase")


async def audit_log(request: Request) -> Response:
    who = await guard.operator(request)
    action = request.query_params.get("action", "")
    cursor = request.query_params.get("cursor", "")
    found = (await as_admin(request, who, "GET", "/admin/audit",
                            query=query_string(action=action, cursor=cursor))).json()
    return page(request, "audit.html", who, entries=found["items"], action=action,
                actions=(*API_ACTIONS, *CONSOLE_ACTIONS),
                next_url=next_url(request, found["nextCursor"]))


routes = [Route("/console/audit", audit_log, methods=["GET"])]
