"""Who may see the console and who may change anything through it (SPEC §20).

A page needs a console session: a cookie naming a row of `console_sessions` whose admin key is
still live. Every change is a POST carrying the session's CSRF token and proof that it came from
one of the console's own pages (`same_origin`). The sign-in form has its own token, held in a
short-lived cookie of its own, since there is no session yet.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import Forbidden, PayloadTooLarge
from gateway.identity.principal import Principal
from gateway.services import services
from gateway.store import console_sessions, keys

SESSION_COOKIE = "mgw_console"
LOGIN_COOKIE = "mgw_console_login"
LOGIN_TTL_S = 3600
COOKIE_PATH = "/console"
CSRF_FIELD = "csrf_token"
MAX_FORM_BYTES = 64 * 1024  # the console's forms are a few short fields


class SignInNeeded(Exception):
    """No valid console session: the page answers with a redirect to the login form."""


@dataclass(frozen=True)
class Operator:
    """A signed-in operator: the admin key's principal and the session's token."""

    principal: Principal
    token: str

    @property
    def key_id(self) -> str:
        return self.principal.credential_id

    @property
    def may_change(self) -> bool:
        return self.principal.allows("write")

    @property
    def csrf_token(self) -> str:
        return csrf_for(self.token)


def now_ms() -> int:
    return int(time.time() * 1000)


def new_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_for(session_token: str) -> str:
    """The CSRF token bound to a session: derived from its token, never stored."""
    return hashlib.sha256(b"console-csrf\x00" + session_token.encode()).hexdigest()


def tokens_equal(sent: str, expected: str) -> bool:
    return bool(sent) and hmac.compare_digest(sent.encode(), expected.encode())


def origin_of(url: str) -> str | None:
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def own_origins(request: Request) -> set[str]:
    """The origins the console's pages are served from: the request's own host, and
    `server.public_url`'s when one is set (behind a proxy)."""
    found = {f"{request.url.scheme}://{request.headers.get('host', '').lower()}"}
    public = origin_of(services(request).settings.server.public_url)
    if public is not None:
        found.add(public)
    return found


def same_origin(headers: Mapping[str, str], origins: set[str]) -> bool:
    """Proof that a POST came from the console's own pages: `Sec-Fetch-Site: same-origin`, or
    where the browser sends none a same-origin `Origin`, or else `Referer`. `Origin: null`
    alone, a cross-site fetch, a foreign origin or no proof at all is refused."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin = headers.get("origin")
    if origin is not None and origin != "null":
        return origin.lower() in origins
    referer = headers.get("referer")
    if referer:
        return origin_of(referer) in origins
    return False


def secure_cookies(request: Request) -> bool:
    return services(request).settings.server.public_url.lower().startswith("https://")


def set_cookie(request: Request, response: Response, name: str, value: str,
               max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, path=COOKIE_PATH, httponly=True,
                        samesite="strict", secure=secure_cookies(request))


def clear_cookie(request: Request, response: Response, name: str) -> None:
    response.delete_cookie(name, path=COOKIE_PATH, httponly=True, samesite="strict",
                           secure=secure_cookies(request))


async def operator(request: Request) -> Operator:
    """The signed-in operator of this request; SignInNeeded without a live session (whatever
    Authorization or X-API-Key it carries: no other credential opens the console)."""
    token = request.cookies.get(SESSION_COOKIE, "")
    if not token:
        raise SignInNeeded
    db = services(request).db
    session = await console_sessions.find(db, token, now_ms())
    if session is None:
        raise SignInNeeded
    key = await keys.find(db, session.admin_key_id)
    if key is None or key.kind != "admin" or key.state != "active":
        raise SignInNeeded  # the key was revoked or expired since: its sessions end with it
    principal = Principal("admin", key.id, key.user_id, frozenset(key.scopes))
    return Operator(principal, token)


async def read_form(request: Request) -> FormData:
    """The POST's url-encoded form, read up to MAX_FORM_BYTES (413 past that, before the rest
    of the body is read)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise PayloadTooLarge(f"a console form is at most {MAX_FORM_BYTES} bytes")
    fields: list[tuple[str, str | UploadFile]] = list(
        parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return FormData(fields)


async def change(request: Request) -> tuple[Operator, FormData]:
    """The operator and form of a POST that changes something: refused (403, nothing done)
    without same-origin proof or the session's CSRF token."""
    who = await operator(request)
    if not same_origin(request.headers, own_origins(request)):
        raise Forbidden("this form did not come from the console's own pages",
                        code="cross_origin_request")
    form = await read_form(request)
    sent = form.get(CSRF_FIELD)
    if not isinstance(sent, str) or not tokens_equal(sent, who.csrf_token):
        raise Forbidden("the form's CSRF token is missing or wrong", code="csrf_token_invalid")
    return who, form
