"""Transparent pass-through of every request the gateway does not own (SPEC §5).

Raw ASGI on purpose: this is the hot path, and Starlette's Request/StreamingResponse machinery
cost more than the whole forward (docs/decisions.md). Small bodies are buffered; large or
unknown-length media bodies stream both ways; bodies reach the client byte for byte.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, quote

from starlette.types import Receive, Scope, Send

from gateway.asgi import declared_length, read_body, stream_body
from gateway.config import Settings
from gateway.errors import ValidationFailed
from gateway.identity.ownership import OwnershipRules
from gateway.upstream.client import Body, UpstreamClient, UpstreamResponse
from gateway.upstream.headers import response_headers, upstream_headers

# Bodies of these types may be large and are never identity-checked: they stream.
_STREAMED_TYPES = (b"multipart/", b"application/octet-stream", b"image/", b"audio/", b"video/")


def target_url(settings: Settings, scope: Scope, path: str | None = None) -> str:
    if path is None:
        raw_path = scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else quote(scope["path"])
    url = settings.upstream.base_url.rstrip("/") + path
    query = scope.get("query_string", b"")
    return f"{url}?{query.decode('latin-1')}" if query else url


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


def _streams(scope: Scope, buffer_limit: int) -> bool:
    content_type = b""
    for key, value in scope["headers"]:
        if key == b"content-type":
            content_type = value.lower()
    if not content_type.startswith(_STREAMED_TYPES):
        return False
    length = declared_length(scope)
    return length is None or length > buffer_limit


class Proxy:
    def __init__(self, settings: Settings, upstream: UpstreamClient, rules: OwnershipRules):
        self.settings = settings
        self.upstream = upstream
        self.rules = rules

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, user_id: str, request_id: str
    ) -> None:
        await self.check_query(scope, user_id)
        body: Body
        limits = self.settings.limits
        if _streams(scope, limits.proxy_buffer_bytes):
            body = stream_body(receive)
        else:
            body = await read_body(scope, receive, limits.max_body_bytes)
            await self.check_json(body, user_id)
            if not body and scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
                body = None
        await self.forward(scope, send, user_id, request_id, body)

    async def forward(
        self,
        scope: Scope,
        send: Send,
        user_id: str,
        request_id: str,
        body: Body,
        path: str | None = None,
    ) -> None:
        headers = upstream_headers(scope, self.settings, user_id, request_id)
        url = target_url(self.settings, scope, path)
        response = await self.upstream.send(scope["method"], url, headers, body)
        try:
            await relay_response(response, scope, send, self.settings.limits.proxy_buffer_bytes)
        finally:
            await response.release()

    async def check_query(self, scope: Scope, user_id: str) -> None:
        query: bytes = scope.get("query_string", b"")
        if b"_id" not in query:  # user_id, agent_id, session_id, run_id (mem0): all end so
            return
        params = dict(parse_qsl(query.decode("latin-1")))
        await self.rules.check_body(params, user_id)

    async def check_json(self, body: bytes, user_id: str) -> None:
        stripped = body.lstrip()
        if not stripped.startswith(b"{"):
            return
        try:
            payload = json.loads(body)
        except RecursionError:
            # Too deep to parse, so its ids cannot be checked: it does not go upstream.
            raise ValidationFailed("request body is nested too deeply", field="body") from None
        except ValueError:
            return  # not JSON after all: the engine answers for it
        await self.rules.check_body(payload, user_id)
