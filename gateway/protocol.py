"""The HTTP/1.1 protocol `serve` runs: uvicorn's httptools protocol, one write per small answer.

uvicorn writes a response's status line and headers when the app sends `http.response.start`
and the body when it sends `http.response.body`: two `send()` calls on the socket for every
answer, each a full trip through the kernel's TCP stack (and, on loopback, a wake-up of the
reader). On the pass-through that second write was the largest single cost of the gateway
(docs/decisions.md, "One write per answer"). `OneWriteProtocol` keeps everything else of
uvicorn's protocol and holds the head of a response that declares its `Content-Length` until
the first body message, then writes both at once. A chunked (unknown-length) answer's head is
written at once, as before, so a client of a slow stream sees the head without waiting for the
first chunk. A held head is written before the connection closes, and after the body message
even when that wrote nothing (an answer to HEAD).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle


class _Holding:
    """Stands in for the transport while uvicorn writes a response head: keeps the bytes."""

    __slots__ = ("head",)

    def __init__(self) -> None:
        self.head = b""

    def write(self, data: bytes) -> None:
        self.head += data


class _Prefixed:
    """Stands in for the transport while uvicorn writes the first body: head and body at once."""

    __slots__ = ("transport", "head")

    def __init__(self, transport: asyncio.Transport, head: bytes) -> None:
        self.transport = transport
        self.head: bytes | None = head

    def write(self, data: bytes) -> None:
        head, self.head = self.head, None
        self.transport.write(head + data if head else data)

    def flush(self) -> None:
        if self.head is not None:
            self.write(b"")

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def is_closing(self) -> bool:
        return self.transport.is_closing()


class OneWriteCycle(RequestResponseCycle):
    """uvicorn's request/response cycle, writing a declared-length head with the first body."""

    _held: bytes | None = None  # the response head not yet written

    async def send(self, message: Any) -> None:
        transport = self.transport
        if not self.response_started and message["type"] == "http.response.start":
            holding = _Holding()
            self.transport = holding  # type: ignore[assignment]
            try:
                await super().send(message)
            finally:
                self.transport = transport
            if self.chunked_encoding is False:
                self._held = holding.head
            elif holding.head:
                transport.write(holding.head)
            return
        head, self._held = self._held, None
        if head is None:
            await super().send(message)
            return
        prefixed = _Prefixed(transport, head)
        self.transport = prefixed  # type: ignore[assignment]
        try:
            await super().send(message)
        finally:
            self.transport = transport
        if not self.disconnected:
            prefixed.flush()


class OneWriteProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose requests are answered by `OneWriteCycle`."""

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        # uvicorn has just built this request's cycle and scheduled (not started) its task, or
        # queued it behind a pipelined one: it answers through OneWriteCycle.send from its first
        # message on. (An upgrade builds no cycle: the previous one, if any, is left alone.)
        cycle = self.cycle
        if type(cycle) is RequestResponseCycle:
            cycle.__class__ = OneWriteCycle
