"""A small HTTP/1.1 keep-alive client on asyncio protocols and the httptools parser.

It exists for speed: per request it does one header join, one write and llhttp parsing, where the
general-purpose clients spend several times that (figures in docs/decisions.md). It supports what
the proxy needs and no more: one http or https origin, a LIFO keep-alive pool with expiry,
Content-Length and chunked request bodies (streamed with write back-pressure), and responses read
whole or streamed with read back-pressure.

An answer belongs to the request it follows, or to nobody: bytes that arrive while no request is
waiting (on an idle connection, after the end of a response, a second response, a body on a
204/304) close the connection, and a connection is pooled again only after its response was read
to its end, nothing else arrived and both sides agreed to keep it alive. Answers are held to
limits (docs/security.md, "Upstream client"): status 100-599, at most `MAX_RESPONSE_HEADERS`
headers in at most `MAX_RESPONSE_HEAD_BYTES`, trailers dropped, and one deadline per exchange.
Any failure closes the connection.
"""

from __future__ import annotations

import asyncio
import logging
import select
import ssl
import time
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from typing import cast

import httptools

from gateway.errors import UpstreamTimeout, UpstreamUnavailable
from gateway.serving.header_names import remember
from gateway.upstream.origin import UpstreamOrigin

log = logging.getLogger("gateway.upstream")
PAUSE_READING_ABOVE = 512 * 1024  # buffered response bytes before the socket is paused
# An answer's status line and headers (interim 1xx answers included), and its trailers, may
# not exceed these; beyond them the answer is refused (502), not buffered.
MAX_RESPONSE_HEADERS = 100
MAX_RESPONSE_HEAD_BYTES = 64 * 1024
_SKIPPED_REQUEST_HEADERS = frozenset({"content-length", "transfer-encoding", "expect", "host"})
# Request header names seen, lowered, by spelling (gateway/serving/header_names.py).
_LOWERED: dict[str, str] = {}


class RefusedAnswer(UpstreamUnavailable):
    """An answer outside the limits (502 upstream_unavailable); the upstream did answer, so the
    request is not retried."""


class _Stop(Exception):
    """Raised inside a parser callback to stop parsing: what follows is refused, not read."""


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.failure: Exception | None = None
        self.closed = False
        # False once anything arrived that no request asked for: never pooled again.
        self.reusable = True
        # True from the request being sent until its final answer is complete.
        self.awaiting = False
        self.last_used = time.monotonic()
        self._waiter: asyncio.Future[None] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._poller: select.poll | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # set once connected
        self._deadline = 0.0  # of the current wait, in loop time
        self._timer: asyncio.TimerHandle | None = None  # pending, for this or an earlier wait
        self._reset_exchange()

    def _reset_exchange(self) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.keep_alive = False
        self.complete = False
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.reading_paused = False
        self.head_bytes = 0  # received before the final answer's headers were complete
        self.header_count = 0
        self.header_bytes = 0
        self.trailer_bytes = 0  # received since the last chunk header, while no body followed
        self.in_chunk_header = False
        self.refusal: str | None = None  # why the answer is refused (a limit, a bad status)

    def begin_exchange(self) -> None:
        self.awaiting = True

    # asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have the same methods.
        self.transport = cast(asyncio.Transport, transport)
        # The connection's loop, asked once: on Python 3.11 every `get_running_loop()` is a
        # getpid() system call, and `wait` runs on every exchange.
        self._loop = asyncio.get_running_loop()

    def data_received(self, data: bytes) -> None:
        if not self.awaiting:
            self._refuse_unsolicited()  # nobody asked: it must not become the next answer
            return
        if not self.headers_done:
            self.head_bytes += len(data)
        elif self.in_chunk_header:
            self.trailer_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            # HttpParserUpgrade: a 101 nobody asked for (the gateway never sends Upgrade).
            if self.refusal is not None:
                self._fail(RefusedAnswer(self.refusal))
            elif self.complete:
                self._refuse_unsolicited()  # the answer is whole; what followed it is not
                return
            elif isinstance(exc, httptools.HttpParserUpgrade):
                self._fail(UpstreamUnavailable("upstream switched protocols unasked"))
            else:
                self._fail(UpstreamUnavailable(f"upstream sent an invalid HTTP response: {exc}"))
            self.close()
            return
        if not self.headers_done and self.head_bytes > MAX_RESPONSE_HEAD_BYTES:
            self._fail(RefusedAnswer(
                f"upstream answer's headers exceed {MAX_RESPONSE_HEAD_BYTES} bytes"))
            self.close()
        elif self.in_chunk_header and self.trailer_bytes > MAX_RESPONSE_HEAD_BYTES:
            self._fail(RefusedAnswer(
                f"upstream answer's trailers exceed {MAX_RESPONSE_HEAD_BYTES} bytes"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.headers_done and not self.complete and not self._framed():
            self._finish()  # a body delimited by the end of the connection
        if not self.complete:
            self._fail(UpstreamUnavailable("upstream closed the connection mid-response"))
        if self._drain is not None and not self._drain.done():
            self._drain.set_exception(UpstreamUnavailable("upstream closed the connection"))

    def pause_writing(self) -> None:
        if self._drain is None or self._drain.done():
            self._drain = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def _framed(self) -> bool:
        return any(
            name.lower() in (b"content-length", b"transfer-encoding") for name, _ in self.headers
        )

    # httptools callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:
            raise _Stop  # a second answer to one request

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_count += 1
        self.header_bytes += len(name) + len(value) + 4
        if self.header_count > MAX_RESPONSE_HEADERS:
            self.refusal = f"upstream answer has more than {MAX_RESPONSE_HEADERS} headers"
        elif self.header_bytes > MAX_RESPONSE_HEAD_BYTES:
            self.refusal = (
                f"upstream answer's headers exceed {MAX_RESPONSE_HEAD_BYTES} bytes")
        if self.refusal is not None:
            raise _Stop
        if not self.headers_done:  # trailers (after a chunked body) never become headers
            self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # informational: the real answer follows
            self.headers = []
            return
        if not 200 <= status <= 599:
            self.refusal = f"upstream answered with an invalid status {status}"
            raise _Stop
        self.status = status
        self.keep_alive = self.parser.should_keep_alive()
        self.headers_done = True
        self.header_count = self.header_bytes = 0  # trailers get their own allowance
        self._wake()

    def on_chunk_header(self) -> None:
        self.in_chunk_header = True
        self.trailer_bytes = 0

    def on_body(self, body: bytes) -> None:
        self.in_chunk_header = False
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered > PAUSE_READING_ABOVE and not self.reading_paused and self.transport:
            self.transport.pause_reading()
            self.reading_paused = True
        self._wake()

    def on_chunk_complete(self) -> None:
        self.in_chunk_header = False

    def on_message_complete(self) -> None:
        if not self.headers_done:
            return  # end of an informational response
        self._finish()

    # internals -------------------------------------------------------------------------------

    def _finish(self) -> None:
        self.complete = True
        self.awaiting = False
        self._wake()

    def _refuse_unsolicited(self) -> None:
        self.reusable = False
        self.close()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, exc: Exception) -> None:
        self.reusable = False
        if self.failure is None:
            self.failure = exc
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    async def wait(self, deadline: float) -> None:
        if self.failure is not None:
            raise self.failure
        # A timer that fails the waiter rather than `asyncio.timeout_at`: the same deadline
        # without a cancellation scope per wait (docs/decisions.md, "One write per answer").
        # The timer is made only when none is pending: on uvloop one made and cancelled costs
        # about 2 µs, and a kept-alive connection waits on every exchange. One that fires
        # early (for an earlier exchange's deadline) waits on for the current one's.
        loop = self._loop or asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        self._deadline = deadline
        timer = self._timer
        if timer is None or timer.when() > deadline:
            if timer is not None:
                timer.cancel()
            self._timer = loop.call_at(deadline, self._deadline_due)
        try:
            await waiter
        finally:
            self._waiter = None

    def _deadline_due(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # no one waits: the next wait arms it again
        loop = self._loop or asyncio.get_running_loop()
        if loop.time() >= self._deadline:
            waiter.set_exception(UpstreamTimeout("upstream did not answer in time"))
            self.close()
        else:
            self._timer = loop.call_at(self._deadline, self._deadline_due)

    async def drain(self, deadline: float) -> None:
        if self.closed:
            raise UpstreamUnavailable("upstream closed the connection")
        if self._drain is None or self._drain.done():
            return
        try:
            async with asyncio.timeout_at(deadline):
                await self._drain
        except TimeoutError:
            self.close()
            raise UpstreamTimeout("upstream did not accept the request body in time") from None

    def take_body(self) -> bytes:
        chunk = b"".join(self.body)
        self.body.clear()
        self.buffered = 0
        if self.reading_paused and self.transport is not None:
            self.transport.resume_reading()
            self.reading_paused = False
        return chunk

    def idle_and_quiet(self) -> bool:
        """Open, reusable, and nothing waiting unread in the socket (not even a close)."""
        transport = self.transport
        if self.closed or not self.reusable or transport is None or transport.is_closing():
            return False
        # Bytes the peer sent since the last loop turn have not reached data_received yet:
        # ask the socket itself, or they would be parsed as the answer to the next request.
        if self._poller is None:
            sock = transport.get_extra_info("socket")
            if sock is None:
                return True
            self._poller = select.poll()
            self._poller.register(sock.fileno(), select.POLLIN)
        return not self._poller.poll(0)

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None:
            self.transport.close()


class Http1Response:
    """One answer of the pool: its status and headers at once, its body as it comes.

    `release_connection()` gives the connection back (or closes it) exactly once."""

    def __init__(self, pool: Http1Pool, conn: _Connection, deadline: float) -> None:
        self._pool = pool
        self._conn: _Connection | None = conn
        self._deadline = deadline
        self.status = conn.status
        self.headers = conn.headers

    async def read(self) -> bytes:
        conn = self._conn
        if conn is not None and conn.complete:  # a small answer is usually whole by now
            return conn.take_body()
        parts = [chunk async for chunk in self.chunks()]
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def chunks(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            return
        while True:
            if conn.body:
                yield conn.take_body()
                continue
            if conn.complete:
                return
            await conn.wait(self._deadline)

    def release_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if conn.reusable and conn.complete and not conn.body and conn.keep_alive:
            self._pool.put_back(conn)
        else:
            conn.close()


class Http1Pool:
    """Keep-alive connections to one origin; it cannot be asked to connect anywhere else."""

    def __init__(
        self,
        origin: UpstreamOrigin,
        *,
        connect_timeout: float,
        keepalive_expiry: float,
        ssl_context: ssl.SSLContext | None = None,
        response_type: type[Http1Response] = Http1Response,
    ) -> None:
        self.origin = origin
        self._response_type = response_type  # what `request` answers with
        self.connect_timeout = connect_timeout
        self.keepalive_expiry = keepalive_expiry
        self._ssl = ssl_context
        if origin.scheme == "https" and ssl_context is None:
            raise ValueError("an https origin needs a TLS context")
        self._idle: list[_Connection] = []
        self._host_line = f"Host: {origin.authority}\r\n"

    def put_back(self, conn: _Connection) -> None:
        conn.parser = httptools.HttpResponseParser(conn)
        conn._reset_exchange()
        conn.last_used = time.monotonic()
        self._idle.append(conn)

    async def _connection(self, deadline: float) -> _Connection:
        idle = self._idle
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if now - conn.last_used < self.keepalive_expiry and conn.idle_and_quiet():
                return conn
            conn.close()
        origin = self.origin
        loop = asyncio.get_running_loop()
        ssl_arg = self._ssl if origin.scheme == "https" else None
        try:
            async with asyncio.timeout_at(min(deadline, loop.time() + self.connect_timeout)):
                _, protocol = await loop.create_connection(
                    _Connection, origin.host, origin.port, ssl=ssl_arg
                )
        except TimeoutError:
            # The engine's address is for the log only: answers never name it (SPEC §13).
            log.warning("connecting to upstream %s:%d timed out", origin.host, origin.port)
            raise UpstreamTimeout("connecting to upstream timed out") from None
        except OSError as exc:
            log.warning("cannot connect to upstream %s:%d: %s", origin.host, origin.port, exc)
            raise UpstreamUnavailable("cannot connect to upstream") from exc
        return protocol

    async def request(
        self,
        method: str,
        target: str,
        headers: Sequence[tuple[str, str]],
        body: bytes | AsyncIterable[bytes] | None,
        deadline: float,
    ) -> Http1Response:
        """Send `method target` to the origin; `target` must already be origin-form.

        `deadline` (event-loop time) bounds the whole exchange: connecting, sending, the answer's
        headers here and its body in `Http1Response.chunks`.
        """
        lines = [f"{method} {target} HTTP/1.1\r\n", self._host_line]
        declared_length: str | None = None
        lowered_names = _LOWERED
        for name, value in headers:
            lowered = lowered_names.get(name)
            if lowered is None:
                lowered = name.lower()
                remember(lowered_names, name, lowered)
            if lowered in _SKIPPED_REQUEST_HEADERS:
                if lowered == "content-length":
                    declared_length = value
                continue
            lines.append(f"{name}: {value}\r\n")
        streamed = body is not None and not isinstance(body, bytes)
        if isinstance(body, bytes):
            if body or method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
                lines.append(f"Content-Length: {len(body)}\r\n")
        elif streamed:
            if declared_length is not None:
                lines.append(f"Content-Length: {declared_length}\r\n")
            else:
                lines.append("Transfer-Encoding: chunked\r\n")
        lines.append("\r\n")
        head = "".join(lines).encode("latin-1")
        conn = await self._connection(deadline)
        assert conn.transport is not None
        conn.begin_exchange()
        try:
            if isinstance(body, bytes) or body is None:
                conn.transport.write(head + body if body else head)
            else:
                conn.transport.write(head)
                chunked = declared_length is None
                try:
                    async with asyncio.timeout_at(deadline):
                        await self._write_stream(conn, body, deadline, chunked=chunked)
                except TimeoutError:
                    raise UpstreamTimeout("upstream request body not sent in time") from None
            while not conn.headers_done:
                await conn.wait(deadline)
        except BaseException:
            conn.close()
            raise
        if method == "HEAD":
            # The parser cannot know a HEAD answer has no body: it ends here, and the
            # connection is not reused (what follows is not an answer to anything).
            conn.reusable = False
            conn._finish()
        return self._response_type(self, conn, deadline)

    async def _write_stream(
        self, conn: _Connection, body: AsyncIterable[bytes], deadline: float, *, chunked: bool
    ) -> None:
        assert conn.transport is not None
        async for chunk in body:
            if not chunk:
                continue
            if conn.closed or conn.failure is not None:
                break  # the upstream answered or went away early; stop sending
            if chunked:
                conn.transport.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            else:
                conn.transport.write(chunk)
            await conn.drain(deadline)
        if chunked and not conn.closed:
            conn.transport.write(b"0\r\n\r\n")

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
