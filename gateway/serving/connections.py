"""Client connections of `serve` (SPEC §13): a deadline for each request head, a clock on each
request body, and caps on how many connections are open, in all and per client address.

uvicorn has neither a header-read timeout nor a connection cap (`limit_concurrency` answers 503
but keeps the connection), so a client that opens connections and never finishes a request head
would hold them for ever. `guarded_protocol` returns a subclass of uvicorn's httptools protocol
that closes a connection on which no request head has completed for `server.header_timeout_s`
(since it opened, or since its last request) while no request is running, and closes at once a
connection past `server.max_connections` or `server.max_connections_per_client`. Its heads are
held to `server.max_head_bytes` (431, gateway/serving/protocol.py): uvicorn has no such limit, and a
16 MB header reached the app. A request body that stalls (`server.body_timeout_s`) or
crawls (`server.min_body_rate`, BodyClock) is answered 408 and its connection closed, for an
owned route and the pass-through alike: the server sees the bytes arrive whatever the app does
with them, and the app's read of the body ends as a disconnect. An idle
keep-alive connection is closed by uvicorn's own keep-alive timeout (5 s) first. Counts are
per process: with `server.workers = N` each worker holds its own (docs/scale-out.md).

The timeout adds nothing to the per-request path: each connection is looked at by a timer four
times per timeout instead (bench/connection_guard.py measures the difference); the head's size
is one addition per chunk received while a head is incomplete.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.serving.protocol import OneWriteProtocol

log = logging.getLogger("gateway.serving.connections")
REFUSAL_LOG_INTERVAL_S = 1.0
# How often a connection is looked at within one header timeout: a head that is not complete
# is cut off between 1 and 1 + 1/CHECKS_PER_TIMEOUT timeouts after the last one completed.
CHECKS_PER_TIMEOUT = 4


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


@dataclass(frozen=True)
class BodyClock:
    """`server.body_timeout_s` and `server.min_body_rate` (SPEC §13): a request body that sends
    nothing for `timeout_s`, or that has been arriving for `timeout_s` and averages less than
    `min_rate` bytes/s since, is answered 408 and its connection closed.

    The rate is judged only after that grace: a body that is whole within `timeout_s` is never
    held to it, however slowly it came, and a fast one never comes near it. Time the server
    itself held the body back (reading paused while the app catches up, or a client waiting
    for `100 Continue`) counts as progress, and the rate is judged afresh after it."""

    timeout_s: float
    min_rate: int  # 0: no floor


def guarded_protocol(header_timeout_s: float, counts: ConnectionCounts,
                     max_head_bytes: int = 0,
                     body_clock: BodyClock | None = None) -> type[HttpToolsProtocol]:
    """The gateway's httptools protocol (one write per answer, gateway/serving/protocol.py) with a
    header-read deadline, a body clock, a cap on a request head's size and the connection
    caps."""
    clock = body_clock or BodyClock(float("inf"), 0)  # None: bodies are not timed
    check_every = min(header_timeout_s, clock.timeout_s) / CHECKS_PER_TIMEOUT

    head_cap = max_head_bytes

    class GuardedHttpToolsProtocol(OneWriteProtocol):
        max_head_bytes = head_cap
        _counted_as: str | None = None  # the client address this connection is counted under
        _check: asyncio.TimerHandle | None = None
        _seen_cycle: Any = None  # the request cycle seen at the last check
        _progress_at = 0.0  # loop time of the last head seen complete (or of the connection)
        _body_cycle: Any = None  # the request whose body the clock is timing
        _body_began = 0.0  # loop time the rate is judged from
        _body_base = 0  # bytes of the body received by then
        _body_moved = 0.0  # loop time the body was last seen to move
        _body_seen = 0  # bytes of the body received by then

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            client = _client_host(transport)
            if not counts.admit(client):
                counts.refused(client or "a local socket", self.loop.time())
                self.transport = transport
                transport.abort()
                return
            self._counted_as = client
            super().connection_made(transport)
            self._progress_at = self.loop.time()
            self._check = self.loop.call_later(check_every, self._check_progress)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._counted_as is None:
                return  # refused in connection_made: nothing was set up
            counts.leave(self._counted_as)
            self._counted_as = None
            if self._check is not None:
                self._check.cancel()
                self._check = None
            super().connection_lost(exc)

        def _check_progress(self) -> None:
            """Every quarter of the shorter timeout: has a head completed, or is a request
            running, and is its body, if one is arriving, on time?

            uvicorn makes a new cycle for each complete head, so comparing cycles tells it
            without a hook on the per-request path; a body's bytes are one addition per chunk
            (gateway/serving/protocol.py), its clock is read here."""
            now = self.loop.time()
            cycle = self.cycle
            if self._in_body and cycle is not None and self._body_late(cycle, now):
                self._check = None
                if not self.transport.is_closing():
                    log.info("closing a connection from %s: its request body stalled "
                             "(server.body_timeout_s %gs, server.min_body_rate %d B/s)",
                             self._counted_as, clock.timeout_s, clock.min_rate)
                    self._refuse_body()
                return
            if cycle is not self._seen_cycle or (cycle is not None
                                                  and not cycle.response_complete):
                self._seen_cycle = cycle
                self._progress_at = now
            elif now - self._progress_at >= header_timeout_s:
                self._check = None
                if not self.transport.is_closing():
                    log.info("closing a connection from %s: no complete request head within "
                             "server.header_timeout_s (%gs)", self._counted_as,
                             header_timeout_s)
                    self.transport.close()
                return
            self._check = self.loop.call_later(check_every, self._check_progress)

        def _body_late(self, cycle: Any, now: float) -> bool:
            """Whether the body arriving for `cycle` broke the body clock (BodyClock)."""
            received = self._body_bytes
            if cycle is not self._body_cycle:  # a new body: its clock starts now
                self._body_cycle = cycle
                self._body_began = self._body_moved = now
                self._body_base = self._body_seen = received
                return False
            if self.flow.read_paused or cycle.waiting_for_100_continue:
                # held back by the server, not the client: judged afresh from here
                self._body_began = self._body_moved = now
                self._body_base = self._body_seen = received
                return False
            if received != self._body_seen:
                self._body_moved, self._body_seen = now, received
            elif now - self._body_moved >= clock.timeout_s:
                return True
            elapsed = now - self._body_began
            return (clock.min_rate > 0 and elapsed >= clock.timeout_s
                    and (received - self._body_base) / elapsed < clock.min_rate)

    return GuardedHttpToolsProtocol


def uvicorn_options(header_timeout_s: float, max_connections: int,
                    max_connections_per_client: int, max_head_bytes: int = 0,
                    body_clock: BodyClock | None = None) -> dict[str, Any]:
    """The `uvicorn.Config` keywords that install the guard for one server of this process."""
    counts = ConnectionCounts(max_connections, max_connections_per_client)
    return {"http": guarded_protocol(header_timeout_s, counts, max_head_bytes, body_clock)}
