"""Small raw-ASGI helpers shared by the proxy and the owned routes: bodies, headers, replies."""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator, Iterable

from starlette.types import Message, Receive, Scope, Send

from gateway.errors import GatewayError, ParsingBudgetExhausted, PayloadTooLarge, error_bytes

JSON_TYPE = b"application/json"
PARSING_KEY = "gateway.parsing"  # scope key: the request's share of the parsing budget
# scope key: the server answered 408 to a body that stalled and closed the connection (the
# body clock of gateway/serving/connections.py); the app's read of the body ends as a disconnect
BODY_TIMED_OUT = "gateway.body_timed_out"


class ParsingBudget:
    """Bytes of request bodies being read and parsed at once in this process
    (`limits.max_parsing_bytes`): a parsed JSON body is several times its size as Python
    objects, so many large ones at once would exhaust memory. A body is charged with the bytes
    that have arrived, never with what its Content-Length declares (SPEC §13): a client that
    declares 64 MiB and sends nothing holds nothing, and one whose body stalls is cut off by
    the server's body clock (gateway/serving/connections.py). Past the budget the request being read
    is refused (503 + Retry-After) instead of the process being killed. One event loop per
    process: no lock is needed."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0

    def held(self, scope: Scope) -> Share:
        """A share for this request's body, charged by `read_body`, given back on exit (a
        plain context manager: it runs on every request)."""
        return Share(self, scope)


class Share:
    __slots__ = ("budget", "scope", "size")

    def __init__(self, budget: ParsingBudget, scope: Scope) -> None:
        self.budget = budget
        self.scope = scope
        self.size = 0

    def __enter__(self) -> Share:
        self.scope[PARSING_KEY] = self
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.scope.pop(PARSING_KEY, None)
        self.budget.in_use -= self.size
        self.size = 0

    def grow_to(self, size: int) -> None:
        more = size - self.size
        if more <= 0:
            return
        budget = self.budget
        if budget.in_use + more > budget.limit:
            raise ParsingBudgetExhausted()
        budget.in_use += more
        self.size = size


def header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def header_value(headers: Iterable[tuple[bytes, bytes]], name: str) -> str | None:
    """The first value of header `name` (any case) in raw headers, decoded as latin-1."""
    wanted = name.lower().encode()
    for key, value in headers:
        if key.lower() == wanted:
            return value.decode("latin-1")
    return None


def replay(body: bytes, then: Receive) -> Receive:
    """A receive that gives `body` (already read, whole) first, then what `then` receives."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await then()

    return replayed


def declared_length(scope: Scope) -> int | None:
    raw = header(scope, b"content-length")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def check_declared_length(scope: Scope, limit: int) -> None:
    length = declared_length(scope)
    if length is not None and length > limit:
        raise PayloadTooLarge(f"request body of {length} bytes exceeds the limit of {limit} bytes")


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole request body; PayloadTooLarge as soon as it passes `limit` (or declares to).

    Inside `ParsingBudget.held`, the body's bytes are charged to the budget as they arrive."""
    declared = declared_length(scope)
    if declared is not None and declared > limit:
        raise PayloadTooLarge(
            f"request body of {declared} bytes exceeds the limit of {limit} bytes")
    share: Share | None = scope.get(PARSING_KEY)
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        if share is not None:
            share.grow_to(size)
        if chunk:
            chunks.append(chunk)
        more = message.get("more_body", False)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def stream_body(receive: Receive) -> AsyncIterator[bytes]:
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected()
        chunk = message.get("body", b"")
        if chunk:
            yield chunk
        more = message.get("more_body", False)


class ClientDisconnected(Exception):
    """The client went away before its body was read."""


async def send_bytes(
    send: Send, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    out = [(b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, exc: GatewayError, request_id: str) -> None:
    headers = [(b"content-type", JSON_TYPE)]
    if exc.retry_after_s is not None:
        headers.append((b"retry-after", str(exc.retry_after_s).encode()))
    await send_bytes(send, exc.status, error_bytes(exc, request_id), headers)


# Request ids: 96 random bits from a generator seeded from the OS, reseeded in every forked
# worker; not `os.urandom` per request, a system call on every request.
_request_ids = random.Random()
os.register_at_fork(after_in_child=_request_ids.seed)


def new_request_id() -> str:
    """A fresh request id (96 random bits in hex), for a request that did not bring one."""
    return f"{_request_ids.getrandbits(96):024x}"
