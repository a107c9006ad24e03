"""The pass-through of the engine routes the flavour's table lists, and nothing else (SPEC §5).

Raw ASGI on purpose: this is the hot path, and Starlette's Request/StreamingResponse machinery
cost more than the whole forward (docs/decisions.md). Request bodies are read whole (up to
`limits.max_body_bytes`) and checked; answers are buffered when small, else streamed, and reach
the client byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import Receive, Scope, Send

from gateway import tracing
from gateway.attachments.add_body import attachment_items
from gateway.attachments.fetch_guard import FetchGuard, item_uris
from gateway.attachments.uris import check_uris
from gateway.config import Settings
from gateway.errors import NotFound, RouteNotFound, UserIdRequired
from gateway.identity import acting
from gateway.identity.named import Named
from gateway.identity.ownership import OwnershipRules
from gateway.identity.principal import PRINCIPAL_KEY
from gateway.limits.concurrency import EngineSlots
from gateway.serving.asgi import ParsingBudget, read_body
from gateway.upstream.client import Body, UpstreamClient, UpstreamResponse
from gateway.upstream.closed_routes import closed_route_message
from gateway.upstream.headers import response_headers, upstream_headers
from gateway.upstream.json_body import json_bytes
from gateway.upstream.routes import EngineRoute, RouteTable, named_in_json
from gateway.upstream.target import Target

TARGET_KEY = "gateway.target"  # scope key: the request target as parsed once (app.py)
Claim = Callable[[Named, str], Awaitable[None]]
# Admission of a request to its route before its body is read (rate limits, gateway/limits/):
# None once admitted, else what to await first (a draw from a shared bucket).
Admit = Callable[[Scope, EngineRoute], Awaitable[None] | None]
# (caller, the items of an answer, its bytes) -> the bytes answered (gateway/search/answers.py)
FilterAnswer = Callable[[str, Callable[[Any], list[Any]], bytes], Awaitable[bytes]]

# Bodies of these types may be large and are never identity-checked: they stream.
_STREAMED_TYPES = (b"multipart/", b"application/octet-stream", b"image/", b"audio/", b"video/")


def upstream_target(path: str, query: str = "") -> str:
    """The origin-form target sent upstream: a normalised, percent-encoded path plus the query.

    The path comes from a route table entry (gateway/upstream/routes.py), never from the raw
    request target; the client sends it to its configured origin only (gateway/upstream/origin.py),
    so nothing a client writes can name another host or userinfo.
    """
    if not path.startswith("/") or "@" in path or "?" in path or "#" in path:
        raise ValueError(f"not a normalised path: {path!r}")
    return f"{path}?{query}" if query else path


async def relay_response(
    response: UpstreamResponse, scope: Scope, send: Send, buffer_limit: int
) -> None:
    """Send an upstream response to the client unchanged: buffered when small, else streamed."""
    headers = response_headers(response.headers)
    length = response.content_length
    no_body = scope["method"] == "HEAD" or response.status in (204, 304)
    if no_body or (length is not None and length <= buffer_limit):
        body = b"" if no_body else await response.read()
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    async for chunk in response.chunks():
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


class Proxy:
    """Forwards what the flavour's route table lists, after the identity policy (SPEC §5)."""

    def __init__(self, settings: Settings, upstream: UpstreamClient, rules: OwnershipRules,
                 table: RouteTable, fetch_guard: FetchGuard, claim: Claim | None = None,
                 filter_answer: FilterAnswer | None = None):
        self.settings = settings
        # Process-wide (one proxy per app, one app per process); the owned JSON routes of
        # /memories share it (gateway/routes/memories.py).
        self.parsing = ParsingBudget(settings.limits.max_parsing_bytes)
        self.filter_answer = filter_answer
        self.upstream = upstream
        self.rules = rules
        self.table = table
        self.fetch_guard = fetch_guard
        self.claim = claim
        # Whether a user id was erased and may not come back (gateway/userdata/refusal.py).
        self.refused: Callable[[str], Awaitable[bool]] | None = None
        self.admit: Admit | None = None
        # Each user's engine calls at once (rate_limits.engine_concurrency_per_user): the
        # pass-through takes its slot itself, so its requests carry no ticket (app.py).
        self.slots: EngineSlots | None = None

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, user_id: str, request_id: str
    ) -> None:
        target: Target = scope[TARGET_KEY]
        found = self.table.find(scope["method"], target.segments)
        if found is None:
            raise RouteNotFound(closed_route_message(self.settings.upstream.flavor,
                                                     scope["method"], target.path))
        route, params = found
        acting.require_scope(scope[PRINCIPAL_KEY], route.read_only)
        if self.admit is not None and (waiting := self.admit(scope, route)) is not None:
            await waiting
        with self.parsing.held(scope):
            # What is read of the body is dropped on leaving: only its bytes are forwarded.
            body: bytes | None = await read_body(scope, receive,
                                                 self.settings.limits.max_body_bytes)
            user_id = await self.check(scope, route, body, target, params)
        if not body and scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            body = None
        slots = self.slots
        if slots is None or not user_id:
            await self.engine(scope, send, user_id, request_id, body, route, params, target)
            return
        slots.enter(user_id)  # held from the first engine call to the answer's last byte
        try:
            await self.engine(scope, send, user_id, request_id, body, route, params, target)
        finally:
            slots.leave(user_id)

    async def engine(self, scope: Scope, send: Send, user_id: str, request_id: str, body: Body,
                     route: EngineRoute, params: dict[str, str], target: Target) -> None:
        """The checked request's engine calls: the owner probe, then the forward."""
        if route.owner_probe is not None:
            await self.probe_owner(route.owner_probe, params, scope, user_id, request_id)
        path = route.render(params)
        query = target.upstream_query(route.forwarded_query)
        if route.answer_items is not None and self.filter_answer is not None:
            await self.filtered(scope, send, user_id, request_id, body, path, query, route)
            return
        await self.forward(scope, send, user_id, request_id, body, path, query)

    async def filtered(self, scope: Scope, send: Send, user_id: str, request_id: str,
                       body: Body, path: str, query: str, route: EngineRoute) -> None:
        """A read answered like a search: buffered, other users' items dropped (SPEC §9)."""
        assert route.answer_items is not None and self.filter_answer is not None
        headers = upstream_headers(scope, self.settings, user_id, request_id)
        status, answer_headers, answer = await self.upstream.call(
            scope["method"], upstream_target(path, query), headers,
            body if isinstance(body, bytes) else None)
        if 200 <= status < 300:
            answer = await self.filter_answer(user_id, route.answer_items, answer)
            answer_headers = [(k, v) for k, v in answer_headers
                              if k.lower() not in (b"content-length", b"content-encoding")]
            answer_headers.append((b"content-length", str(len(answer)).encode()))
        await send({"type": "http.response.start", "status": status,
                    "headers": response_headers(answer_headers)})
        await send({"type": "http.response.body", "body": answer})

    async def check(self, scope: Scope, route: EngineRoute, body: bytes | None, target: Target,
                    params: dict[str, str]) -> str:
        """The one identity policy, on every id the request names, and on the URIs the engine
        would read or fetch (403 / 422, nothing sent); the user the request acts as."""
        with tracing.span("route model"):
            named, read = named_in_json(
                route, json_bytes(scope["headers"], body) if body else None, target.query, params)
        payload = None if read is None else read.fields
        with tracing.span("owner checks"):
            user_id = await acting.settle_user(scope, named, self.refused)
            # An unmodelled entry (`upstream.allow_paths`) may write: no one's session passes.
            scoped = await self.rules.check_named(named, user_id,
                                                  claims=route.claims or route.model is None)
        if route.scoped and not scoped:
            raise UserIdRequired(field="user_id")
        if isinstance(payload, dict) and isinstance(payload.get("messages"), list):
            items = attachment_items(payload)
            check_uris(items, user_id, self.settings.storage)
            await self.fetch_guard.check(item_uris(items))
        if route.claims and self.claim is not None:
            await self.claim(named, user_id)
        return user_id

    async def probe_owner(self, probe: str, params: dict[str, str], scope: Scope,
                          user_id: str, request_id: str) -> None:
        """Read the addressed item first: another user's (or no one's) is a 404."""
        path = EngineRoute("GET", probe).render(params)
        headers = [(k, v) for k, v in upstream_headers(scope, self.settings, user_id, request_id)
                   if k.lower() not in ("content-length", "content-type")]
        status, _, answer = await self.upstream.call("GET", path, headers, None)
        owner: Any = None
        if 200 <= status < 300:
            try:
                item = json.loads(answer)
            except ValueError:
                item = None
            if isinstance(item, dict):
                owner = item.get("user_id")
                metadata = item.get("metadata")
                if owner is None and isinstance(metadata, dict):
                    owner = metadata.get("user_id")
        if owner != user_id:
            raise NotFound("no such memory")

    async def forward(
        self,
        scope: Scope,
        send: Send,
        user_id: str,
        request_id: str,
        body: Body,
        path: str,
        query: str = "",
    ) -> None:
        with tracing.span("engine call"):
            headers = upstream_headers(scope, self.settings, user_id, request_id)
            target = upstream_target(path, query)
            response = await self.upstream.send(scope["method"], target, headers, body)
            try:
                await relay_response(response, scope, send,
                                     self.settings.limits.proxy_buffer_bytes)
            finally:
                await response.release()
