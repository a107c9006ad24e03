"""What the owned add and search do around their engine call: the body checked, the call made.

Both take the ASGI scope, not a Starlette request: the search is served as raw ASGI, like the
pass-through (gateway/routes/search.py), and the add shares the same two steps.
"""

from __future__ import annotations

from typing import Any

from starlette.types import Scope, Send

from gateway import tracing
from gateway.errors import UserIdRequired, ValidationFailed
from gateway.identity import acting
from gateway.routes.common import MAX_BODY_DEPTH, nesting_exceeds, relayed_headers
from gateway.services import Services
from gateway.serving import jsonio
from gateway.upstream.headers import upstream_headers
from gateway.upstream.json_body import JsonBody, json_bytes, json_object, nested_deeper
from gateway.upstream.proxy import TARGET_KEY
from gateway.upstream.routes import EngineRoute, Named, named_in, named_in_json
from gateway.upstream.target import Target

Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


async def checked_json(svc: Services, scope: Scope, raw: bytes, entry: EngineRoute
                       ) -> tuple[str, JsonBody, Named]:
    """The body read once as strict JSON, and the identity policy run on it (SPEC §3, §5):
    the user the request acts as, the body as read, and the ids it names."""
    data = json_bytes(scope["headers"], raw)
    if data is None:
        raise ValidationFailed("the body must be a JSON object", field="body")
    target: Target | None = scope.get(TARGET_KEY)
    query = target.query if target else {}
    with tracing.span("route model"):
        if nested_deeper(data, MAX_BODY_DEPTH):  # its bytes say so: parsed, unless not JSON
            payload = json_object(data)
            if nesting_exceeds(payload, MAX_BODY_DEPTH):
                raise ValidationFailed(f"request body is nested deeper than {MAX_BODY_DEPTH} "
                                       "levels", field="body")
            named, read = named_in(entry, payload, query, {}), JsonBody(data, payload)
        else:
            named, checked = named_in_json(entry, data, query, {})
            assert checked is not None
            read = checked
    with tracing.span("owner checks"):
        caller = await acting.settle_user(scope, named, svc.erased_users.is_refused)
        scoped = await svc.rules.check_named(named, caller, claims=entry.claims)
    if entry.scoped and not scoped:
        raise UserIdRequired(field="user_id")
    return caller, read, named


async def forward(scope: Scope, svc: Services, caller: str, path: str, raw: bytes,
                  rewritten: dict[str, Any] | None = None) -> Answer:
    """POST to the engine: the client's bytes, or the payload the flavour made of them."""
    with tracing.span("engine call"):  # the engine's traceparent names this span
        headers = upstream_headers(scope, svc.settings, caller, scope["request_id"])
        if rewritten is not None:
            raw = jsonio.dumps(rewritten)
            headers = [(k, v) for k, v in headers if k.lower() not in ("content-length",
                                                                        "content-type")]
            headers.append(("Content-Type", "application/json"))
        return await svc.upstream.call("POST", path, headers, raw)


_JSON_TYPE = (b"content-type", b"application/json")


async def send_json(send: Send, status: int, body: bytes) -> None:
    """A JSON answer the gateway wrote, in one head and one body message."""
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(body)).encode()), _JSON_TYPE]})
    await send({"type": "http.response.body", "body": body})


async def send_relayed(send: Send, answer: Answer) -> None:
    """An engine answer passed back unchanged."""
    status, headers, body = answer
    await send({"type": "http.response.start", "status": status,
                "headers": relayed_headers(headers, body)})
    await send({"type": "http.response.body", "body": body})
