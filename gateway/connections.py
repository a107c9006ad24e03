"""Client connections of `serve` (SPEC §13): a deadline for each request head, and caps on how
many connections are open, in all and per client address.

uvicorn has neither a header-read timeout nor a connection cap (`limit_concurrency` answers 503
but keeps the connection), so a client that opens connections and never finishes a request head
would hold them for ever. `guarded_protocol` returns a subclass of uvicorn's httptools protocol
that closes a connection whose head is not complete `server.header_timeout_s` after the
connection opened or the head began, and closes at once a connection past
`server.max_connections` or `server.max_connections_per_client`. Counts are per process: with
`server.workers = N` each worker holds its own (docs/scale-out.md).

On the hot path it costs two attribute writes and one test per request: a timer is started only
when a read ends inside a head (or when a connection opens), not for every request.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("gateway.connections")
REFUSAL_LOG_INTERVAL_S = 1.0


class ConnectionCounts:
    """Open connections of one process, in all and per client address (0 = no cap)."""

    def __init__(self, max_total: int, max_per_client: int) -> None:
        self.max_total = max_total
        self.max_per_client = max_per_client
        self.total = 0
        self.by_client: dict[str, int] = {}
        self._refused = 0  # since the last log line
        self._logged_at = float("-inf")

    def admit(self, client: str) -> bool:
        if self.max_total and self.total >= self.max_total:
            return False
        held = self.by_client.get(client, 0)
        if self.max_per_client and held >= self.max_per_client:
            return False
        self.total += 1
        self.by_client[client] = held + 1
        return True

    def refused(self, client: str, now: float) -> None:
        """Log refusals at most once a second: a flood of connections is not a flood of lines."""
        self._refused += 1
        if now - self._logged_at >= REFUSAL_LOG_INTERVAL_S:
            log.warning("refused %d connection(s) past server.max_connections (%d open) or "
                        "server.max_connections_per_client; the latest from %s",
                        self._refused, self.total, client)
            self._refused = 0
            self._logged_at = now

    def leave(self, client: str) -> None:
        self.total -= 1
        held = self.by_client[client] - 1
        if held:
            self.by_client[client] = held
        else:
            del self.by_client[client]


def _client_host(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple | list) and peer:
        return str(peer[0])
    return ""  # a Unix socket: one client


def guarded_protocol(header_timeout_s: float, counts: ConnectionCounts) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with a header-read deadline and the connection caps."""

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        _counted_as: str | None = None  # the client address this connection is counted under
        _head_timer: asyncio.TimerHandle | None = None
        _in_head = False  # a request head has begun and is not complete yet

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            client = _client_host(transport)
            if not counts.admit(client):
                counts.refused(client or "a local socket", self.loop.time())
                self.transport = transport
                transport.abort()
                return
            self._counted_as = client
            super().connection_made(transport)
            self._start_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._counted_as is None:
                return  # refused in connection_made: nothing was set up
            counts.leave(self._counted_as)
            self._counted_as = None
            self._cancel_head_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._in_head and self._head_timer is None:
                self._start_head_timer()

        def on_message_begin(self) -> None:
            self._in_head = True
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._in_head = False
            if self._head_timer is not None:
                self._cancel_head_timer()
            super().on_headers_complete()

        def _start_head_timer(self) -> None:
            self._head_timer = self.loop.call_later(header_timeout_s, self._head_timed_out)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.transport is not None and not self.transport.is_closing():
                log.info("closing a connection from %s: no complete request head within "
                         "server.header_timeout_s (%gs)", self._counted_as, header_timeout_s)
                self.transport.close()

    return GuardedHttpToolsProtocol


def uvicorn_options(header_timeout_s: float, max_connections: int,
                    max_connections_per_client: int) -> dict[str, Any]:
    """The `uvicorn.Config` keywords that install the guard for one server of this process."""
    counts = ConnectionCounts(max_connections, max_connections_per_client)
    return {"http": guarded_protocol(header_timeout_s, counts)}
