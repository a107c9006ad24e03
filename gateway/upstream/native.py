"""A small HTTP/1.1 keep-alive client on asyncio protocols and the httptools parser.

It exists for speed: per request it does one header join, one write and llhttp parsing, where the
general-purpose clients spend several times that (figures in docs/decisions.md). It supports what
the proxy needs and no more: http and https origins, a LIFO keep-alive pool with expiry,
Content-Length and chunked request bodies (streamed with write back-pressure), and responses read
whole or streamed with read back-pressure. Any failure closes the connection; a connection is
reused only after a response was read to its end and both sides agreed to keep it alive.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from typing import cast
from urllib.parse import urlsplit

import httptools

from gateway.errors import UpstreamTimeout, UpstreamUnavailable

PAUSE_READING_ABOVE = 512 * 1024  # buffered response bytes before the socket is paused
_SKIPPED_REQUEST_HEADERS = frozenset({"content-length", "transfer-encoding", "expect", "host"})


class _Connection(asyncio.Protocol):
    def __init__(self, key: tuple[str, str, int]) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.failure: Exception | None = None
        self.closed = False
        self.last_used = time.monotonic()
        self._waiter: asyncio.Future[None] | None = None
        self._drain: asyncio.Future[None] | None = None
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

    # asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have the same methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(UpstreamUnavailable(f"upstream sent an invalid HTTP response: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.headers_done and not self.complete and not self._framed():
            self.complete = True  # a body delimited by the end of the connection
            self._wake()
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

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # informational: the real answer follows
            self.headers = []
            return
        self.status = status
        self.keep_alive = self.parser.should_keep_alive()
        self.headers_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered > PAUSE_READING_ABOVE and not self.reading_paused and self.transport:
            self.transport.pause_reading()
            self.reading_paused = True
        self._wake()

    def on_message_complete(self) -> None:
        if not self.headers_done:
            return  # end of an informational response
        self.complete = True
        self._wake()

    # internals -------------------------------------------------------------------------------

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, exc: Exception) -> None:
        if self.failure is None:
            self.failure = exc
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    async def wait(self, timeout: float) -> None:
        if self.failure is not None:
            raise self.failure
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._waiter
        except TimeoutError:
            self.close()
            raise UpstreamTimeout("upstream did not answer in time") from None
        finally:
            self._waiter = None

    async def drain(self, timeout: float) -> None:
        if self.closed:
            raise UpstreamUnavailable("upstream closed the connection")
        if self._drain is None or self._drain.done():
            return
        try:
            async with asyncio.timeout(timeout):
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

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Http1Response:
    def __init__(self, pool: Http1Pool, conn: _Connection, reusable: bool) -> None:
        self._pool = pool
        self._conn: _Connection | None = conn
        self._reusable = reusable
        self.status = conn.status
        self.headers = conn.headers

    async def read(self) -> bytes:
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
            await conn.wait(self._pool.read_timeout)

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._reusable and conn.complete and not conn.body and conn.keep_alive:
            self._pool.put_back(conn)
        else:
            conn.close()


def _parse_origin(origin: str) -> tuple[tuple[str, str, int], str]:
    parts = urlsplit(origin)
    scheme = parts.scheme
    port = parts.port or (443 if scheme == "https" else 80)
    return (scheme, parts.hostname or "", port), parts.netloc.rpartition("@")[2]


class Http1Pool:
    def __init__(
        self,
        *,
        connect_timeout: float,
        read_timeout: float,
        keepalive_expiry: float,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.keepalive_expiry = keepalive_expiry
        self._ssl = ssl_context
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        # "http://host:port" -> ((scheme, host, port), Host header); parsed once per origin.
        self._origins: dict[str, tuple[tuple[str, str, int], str]] = {}

    def put_back(self, conn: _Connection) -> None:
        conn.parser = httptools.HttpResponseParser(conn)
        conn._reset_exchange()
        conn.last_used = time.monotonic()
        self._idle.setdefault(conn.key, []).append(conn)

    async def _connection(self, key: tuple[str, str, int]) -> tuple[_Connection, bool]:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            transport = conn.transport
            if (
                not conn.closed
                and transport is not None
                and not transport.is_closing()
                and now - conn.last_used < self.keepalive_expiry
            ):
                return conn, True
            conn.close()
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        ssl_arg: ssl.SSLContext | None = None
        if scheme == "https":
            ssl_arg = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, protocol = await loop.create_connection(
                    lambda: _Connection(key), host, port, ssl=ssl_arg
                )
        except TimeoutError:
            raise UpstreamTimeout(f"connecting to upstream {host}:{port} timed out") from None
        except OSError as exc:
            raise UpstreamUnavailable(f"cannot connect to upstream {host}:{port}: {exc}") from exc
        return protocol, False

    async def request(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        body: bytes | AsyncIterable[bytes] | None,
    ) -> Http1Response:
        authority = url.find("//") + 2
        origin_end = url.find("/", authority)
        if origin_end < 0:  # no path: "http://host" or "http://host?query"
            query_at = url.find("?", authority)
            origin_end = len(url) if query_at < 0 else query_at
        origin, target = url[:origin_end], url[origin_end:] or "/"
        if target.startswith("?"):
            target = "/" + target
        key_and_host = self._origins.get(origin)
        if key_and_host is None:
            key_and_host = self._origins[origin] = _parse_origin(origin)
        key, host_header = key_and_host
        lines = [f"{method} {target} HTTP/1.1\r\nHost: {host_header}\r\n"]
        declared_length: str | None = None
        for name, value in headers:
            lowered = name.lower()
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
        conn, _ = await self._connection(key)
        assert conn.transport is not None
        try:
            if isinstance(body, bytes) or body is None:
                conn.transport.write(head + body if body else head)
            else:
                conn.transport.write(head)
                await self._write_stream(conn, body, chunked=declared_length is None)
            while not conn.headers_done:
                await conn.wait(self.read_timeout)
        except BaseException:
            conn.close()
            raise
        return Http1Response(self, conn, reusable=method != "HEAD")

    async def _write_stream(
        self, conn: _Connection, body: AsyncIterable[bytes], *, chunked: bool
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
            await conn.drain(self.read_timeout)
        if chunked and not conn.closed:
            conn.transport.write(b"0\r\n\r\n")

    def close(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
