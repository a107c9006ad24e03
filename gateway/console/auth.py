"""Signing in with an admin key and signing out (SPEC §20)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.console import guard
from gateway.console.rendering import page
from gateway.errors import Forbidden, GatewayError
from gateway.services import services
from gateway.store import console_sessions


def _login_form(request: Request, error: str = "", status: int = 200) -> Response:
    """The form with a fresh sign-in token, also set as the login cookie it must match."""
    token = guard.new_token()
    response = page(request, "login.html", None, status=status, error=error, login_token=token)
    guard.set_cookie(request, response, guard.LOGIN_COOKIE, token, guard.LOGIN_TTL_S)
    return response


async def login_form(request: Request) -> Response:
    return _login_form(request)


async def sign_in(request: Request) -> Response:
    if not guard.same_origin(request.headers, guard.own_origins(request)):
        raise Forbidden("this form did not come from the console's own pages",
                        code="cross_origin_request")
    form = await guard.read_form(request)
    sent = form.get(guard.CSRF_FIELD)
    expected = request.cookies.get(guard.LOGIN_COOKIE, "")
    if not isinstance(sent, str) or not expected or not guard.tokens_equal(sent, expected):
        raise Forbidden("the form's CSRF token is missing or wrong", code="csrf_token_invalid")
    key = form.get("admin_key")
    svc = services(request)
    principal = None
    if isinstance(key, str) and key.strip():
        try:
            principal = await svc.authenticator.principal_for(None, key.strip())
        except GatewayError:
            principal = None
    if principal is None or principal.kind != "admin":
        return _login_form(request, "That is not a valid admin key.", status=401)
    token = guard.new_token()
    now = guard.now_ms()
    ttl_s = svc.settings.console.session_ttl_s
    await console_sessions.begin(svc.db, token, principal.credential_id, now, now + ttl_s * 1000)
    response = RedirectResponse("/console", status_code=303)
    guard.set_cookie(request, response, guard.SESSION_COOKIE, token, ttl_s)
    guard.clear_cookie(request, response, guard.LOGIN_COOKIE)
    return response


async def sign_out(request: Request) -> Response:
    who, _ = await guard.change(request)
    await console_sessions.end(services(request).db, who.token, who.key_id)
    response = RedirectResponse("/console/login", status_code=303)
    guard.clear_cookie(request, response, guard.SESSION_COOKIE)
    return response


routes = [
    Route("/console/login", login_form, methods=["GET"]),
    Route("/console/login", sign_in, methods=["POST"]),
    Route("/console/logout", sign_out, methods=["POST"]),
]
