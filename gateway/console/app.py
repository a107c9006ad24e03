"""The console's ASGI app: its routes, its static files, the headers every answer carries, and
the pages of refusals (a redirect to the login form without a session)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Router
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from gateway.console import (
    audit,
    auth,
    keys,
    overview,
    resolutions,
    search,
    tool_calls,
    users,
)
from gateway.console.calls import CONSOLE_KEY, CallsAs, Refused
from gateway.console.guard import SignInNeeded
from gateway.console.rendering import SECURITY_HEADERS, STATIC, page
from gateway.errors import GatewayError

CONSOLE_PREFIX = "/console"


def _not_found(request: Request) -> Response:
    return page(request, "error.html", None, status=404, message="No such page.")


class Console:
    """Serves every path under /console; `gateway` is the door into the REST routes."""

    def __init__(self, gateway: CallsAs) -> None:
        self.gateway = gateway
        routes = [
            *auth.routes, *overview.routes, *keys.routes, *users.routes, *audit.routes,
            *search.routes, *resolutions.routes, *tool_calls.routes,
            Mount("/console/static", StaticFiles(directory=STATIC), name="static"),
        ]
        self.router = Router(routes=routes, default=self._default)

    async def _default(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _not_found(Request(scope))(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[CONSOLE_KEY] = self
        started = False

        async def secured(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                names = {name for name, _ in SECURITY_HEADERS}
                headers = [h for h in message.get("headers", ()) if h[0].lower() not in names]
                message["headers"] = [*headers, *SECURITY_HEADERS]
            await send(message)

        request = Request(scope, receive)
        try:
            await self.router(scope, receive, secured)
        except SignInNeeded:
            if started:
                raise
            await RedirectResponse("/console/login", status_code=303)(scope, receive, secured)
        except (GatewayError, Refused) as exc:
            if started:
                raise
            status = exc.status
            await page(request, "error.html", None, status=status, message=exc.message)(
                scope, receive, secured)

