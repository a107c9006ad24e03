"""Calls into the gateway's own routes as a principal it already authenticated.

The MCP tools and the operator console are front doors, not second implementations: each turns
its protocol into a call of the route its REST twin serves (`/memories/search`, `/resources`,
...), so route models, ownership checks, interception, limits, metrics and access logs run once,
in one place. The principal travels in a scope key that only code in this process can set (an
ASGI server builds every scope it receives from the network itself), and is used instead of the
request's headers, so a credential is never re-sent or forwarded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import orjson
from starlette.types import Message, Receive, Scope, Send

from gateway.identity.principal import Principal
from gateway.serving.asgi import header_value, replay

PREAUTHENTICATED = "gateway.preauthenticated"  # scope key: the Principal of an in-process call

AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def _stays_open() -> Message:
    """After the body, a read waits like a connection that stays open (a disconnect would cut a
    streamed answer short)."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


@dataclass
class Answer:
    """What a route answered: its status, headers (lower-case names) and whole body."""

    status: int
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    size: int = 0  # bytes the route sent; more than len(body) when `max_body` cut it off

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)

    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


async def call(
    app: AsgiApp,
    principal: Principal,
    method: str,
    path: str,
    *,
    json: Any = None,
    body: bytes | None = None,
    content_type: str | None = None,
    query: str = "",
    headers: Iterable[tuple[str, str]] = (),
    origin: Scope | None = None,
    max_body: int | None = None,
) -> Answer:
    """Run `method path` through `app` as `principal`, with its body read in full.

    `json` is encoded as the body (`application/json`); `body` with `content_type` sends bytes
    as they are (a multipart upload, say). `origin` is the scope of the request this call serves:
    its request id and client address carry over, so logs and limits see one caller.
    `max_body`: a longer answer is read through but not kept (its `body` is empty, its `size`
    says how long it was), so a large file costs no memory.
    """
    if json is not None:
        body = orjson.dumps(json)
        content_type = content_type or "application/json"
    payload = body or b""
    raw_headers: list[tuple[bytes, bytes]] = [(b"host", b"gateway.internal")]
    if content_type:
        raw_headers.append((b"content-type", content_type.encode("latin-1")))
    if method not in ("GET", "HEAD") or payload:
        raw_headers.append((b"content-length", str(len(payload)).encode()))
    if origin is not None and origin.get("request_id"):
        raw_headers.append((b"x-request-id", str(origin["request_id"]).encode()))
    raw_headers.extend((name.lower().encode("latin-1"), value.encode("latin-1"))
                       for name, value in headers)
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": quote(path).encode(),
        "root_path": "",
        "query_string": query.encode("latin-1"),
        "headers": raw_headers,
        "client": origin.get("client") if origin is not None else ("127.0.0.1", 0),
        "server": ("gateway.internal", 80),
        PREAUTHENTICATED: principal,
    }
    receive = replay(payload, _stays_open)

    answer = Answer(status=0)
    chunks: list[bytes] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = [(bytes(k).lower(), bytes(v)) for k, v in message.get("headers", ())]
        elif message["type"] == "http.response.body":
            chunk = bytes(message.get("body", b""))
            answer.size += len(chunk)
            if max_body is None or answer.size <= max_body:
                chunks.append(chunk)
            else:
                chunks.clear()

    await app(scope, receive, send)
    answer.body = b"" if max_body is not None and answer.size > max_body else b"".join(chunks)
    return answer
