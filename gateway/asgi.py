"""Small raw-ASGI helpers shared by the proxy and the owned routes: bodies, headers, replies."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from starlette.types import Receive, Scope, Send

from gateway.errors import GatewayError, PayloadTooLarge, error_bytes

JSON_TYPE = b"application/json"


def header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


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
    """The whole request body; PayloadTooLarge as soon as it passes `limit` (or declares to)."""
    check_declared_length(scope, limit)
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
    await send_bytes(send, exc.status, error_bytes(exc, request_id), [(b"content-type", JSON_TYPE)])
