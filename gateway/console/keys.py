"""`/console/keys`: every key, filterable by user; create one (its token shown once) or revoke
one, through the admin API."""

from __future__ import annotations

import calendar
import time
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.console import guard
from gateway.console.calls import Refused, as_admin, query_string
from gateway.console.rendering import next_url, page
from gateway.services import services
from gateway.store import audit

EXPIRES_FORMAT = "%Y-%m-%d"


async def _listing(request: Request, who: guard.Operator, user: str) -> dict[str, Any]:
    cursor = request.query_params.get("cursor", "")
    found = (await as_admin(request, who, "GET", "/admin/keys",
                            query=query_string(userId=user, cursor=cursor))).json()
    return {"keys": found["items"], "user": user,
            "next_url": next_url(request, found["nextCursor"])}


async def list_keys(request: Request) -> Response:
    who = await guard.operator(request)
    user = request.query_params.get("user", "").strip()
    return page(request, "keys.html", who, new_key=None, error="", form={},
                **await _listing(request, who, user))


def _expires_at(text: str) -> int | None:
    """A date (YYYY-MM-DD, UTC midnight) in ms since the epoch; None when left empty."""
    if not text.strip():
        return None
    try:
        day = time.strptime(text.strip(), EXPIRES_FORMAT)
    except ValueError:
        raise Refused(422, "Expires: a date as YYYY-MM-DD") from None
    return calendar.timegm(day) * 1000


def _key_request(form: FormData) -> dict[str, object]:
    scopes = [value for value in form.getlist("scopes") if isinstance(value, str)]
    body: dict[str, object] = {
        "userId": str(form.get("user", "")).strip(),
        "kind": str(form.get("kind", "user")),
        "scopes": scopes,
        "name": str(form.get("name", "")),
        "users": str(form.get("users", "")).strip(),
    }
    expires = _expires_at(str(form.get("expires", "")))
    if expires is not None:
        body["expiresAt"] = expires
    return body


async def create_key(request: Request) -> Response:
    who, form = await guard.change(request)
    shown = {name: str(form.get(name, "")) for name in ("user", "kind", "name", "expires",
                                                         "users")}
    try:
        made = (await as_admin(request, who, "POST", "/admin/keys",
                               json=_key_request(form))).json()
    except Refused as exc:
        if exc.status == 403:
            raise
        return page(request, "keys.html", who, status=exc.status, new_key=None,
                    error=exc.message, form=shown, **await _listing(request, who, ""))
    await audit.record(services(request).db, who.key_id, "console.key_create", made["id"])
    return page(request, "keys.html", who, status=201, new_key=made, error="", form={},
                **await _listing(request, who, made["userId"]))


async def revoke_key(request: Request) -> Response:
    who, _ = await guard.change(request)
    key_id = request.path_params["key_id"]
    shown = (await as_admin(request, who, "GET", f"/admin/keys/{key_id}")).json()
    await as_admin(request, who, "DELETE", f"/admin/keys/{key_id}")
    await audit.record(services(request).db, who.key_id, "console.key_revoke", key_id)
    return RedirectResponse(f"/console/keys?{query_string(user=shown['userId'])}",
                            status_code=303)


routes = [
    Route("/console/keys", list_keys, methods=["GET"]),
    Route("/console/keys", create_key, methods=["POST"]),
    Route("/console/keys/{key_id}/revoke", revoke_key, methods=["POST"]),
]
