"""The upstream client: one pooled HTTP client per app, transport failures mapped to our errors.

Two implementations behind one small interface. `Http1Upstream` (gateway/upstream/native.py) is the
production default, chosen by measurement (docs/decisions.md); `HttpxUpstream` runs over any
httpx transport, which is how tests inject respx / `httpx.MockTransport`, and is the
general-purpose alternative (`upstream.client = "httpx"`). Both pass bodies through as raw bytes
(no decompression) and translate transport exceptions in one place each, most specific first.
Writes are never retried; idempotent requests without a body are retried once on a connection
failure that happened before any response.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from contextvars import ContextVar
from typing import Any

import httpx

from gateway.config import UpstreamSettings
from gateway.errors import (
    GatewayError,
    UpstreamPoolExhausted,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from gateway.upstream.native import Http1Pool, Http1Response

Headers = Sequence[tuple[str, str]]
Body = bytes | AsyncIterable[bytes] | None
CHUNK_SIZE = 64 * 1024
RETRYABLE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# The status of the latest upstream answer in this request's context (the access log reads it:
# handlers await the upstream in the request's own task, so the value is the request's).
UPSTREAM_STATUS: ContextVar[int | None] = ContextVar("upstream_status", default=None)


class UpstreamResponse(ABC):
    status: int
    headers: list[tuple[bytes, bytes]]

    @property
    def content_length(self) -> int | None:
        for name, value in self.headers:
            if name.lower() == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return None
        return None

    def header(self, name: str) -> str | None:
        wanted = name.lower().encode()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value.decode("latin-1")
        return None

    @abstractmethod
    async def read(self) -> bytes:
        """The whole body exactly as received (never decompressed)."""

    @abstractmethod
    def chunks(self) -> AsyncIterator[bytes]:
        """The body in chunks as received."""

    @abstractmethod
    async def release(self) -> None:
        """Give the connection back to the pool (idempotent)."""


class UpstreamClient(ABC):
    def __init__(self, settings: UpstreamSettings) -> None:
        self.settings = settings
        self._slots = asyncio.Semaphore(settings.max_connections)

    async def send(self, method: str, url: str, headers: Headers, body: Body) -> UpstreamResponse:
        """Send one request; the caller must `release()` the response."""
        await self._acquire()
        try:
            try:
                response = await self._send(method, url, headers, body)
            except UpstreamUnavailable:
                if method not in RETRYABLE_METHODS or not isinstance(body, bytes | None):
                    raise
                response = await self._send(method, url, headers, body)
        except BaseException:
            self._slots.release()
            raise
        UPSTREAM_STATUS.set(response.status)
        return _SlotReleasing(response, self._slots)

    async def call(
        self, method: str, path: str, headers: Headers, body: bytes | None
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """A buffered request to `base_url + path`: (status, raw headers, raw body)."""
        response = await self.send(method, self.settings.base_url.rstrip("/") + path, headers, body)
        try:
            return response.status, response.headers, await response.read()
        finally:
            await response.release()

    async def call_json(
        self, path: str, payload: Any, user_id: str, extra: Headers = ()
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """POST a JSON payload the gateway built itself (resource ingestion, flush)."""
        headers = [
            ("Content-Type", "application/json"),
            (self.settings.user_header, user_id),
            *self.settings.headers.items(),
            *extra,
        ]
        body = json.dumps(payload, ensure_ascii=False).encode()
        return await self.call("POST", path, headers, body)

    async def _acquire(self) -> None:
        if not self._slots.locked():
            await self._slots.acquire()
            return
        try:
            async with asyncio.timeout(self.settings.pool_timeout_s):
                await self._slots.acquire()
        except TimeoutError:
            raise UpstreamPoolExhausted() from None

    @abstractmethod
    async def _send(self, method: str, url: str, headers: Headers, body: Body) -> UpstreamResponse:
        ...

    @abstractmethod
    async def aclose(self) -> None:
        ...


class _SlotReleasing(UpstreamResponse):
    """Wraps a response so that releasing it also frees its pool slot exactly once."""

    def __init__(self, inner: UpstreamResponse, slots: asyncio.Semaphore) -> None:
        self._inner = inner
        self._slots: asyncio.Semaphore | None = slots
        self.status = inner.status
        self.headers = inner.headers

    async def read(self) -> bytes:
        return await self._inner.read()

    def chunks(self) -> AsyncIterator[bytes]:
        return self._inner.chunks()

    async def release(self) -> None:
        try:
            await self._inner.release()
        finally:
            if self._slots is not None:
                self._slots.release()
                self._slots = None


# --- the built-in HTTP/1.1 client (default) ------------------------------------------------


class _Http1Response(UpstreamResponse):
    def __init__(self, response: Http1Response) -> None:
        self._response = response
        self.status = response.status
        self.headers = response.headers

    async def read(self) -> bytes:
        return await self._response.read()

    def chunks(self) -> AsyncIterator[bytes]:
        return self._response.chunks()

    async def release(self) -> None:
        self._response.release()


class Http1Upstream(UpstreamClient):
    def __init__(self, settings: UpstreamSettings) -> None:
        super().__init__(settings)
        self._pool = Http1Pool(
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.timeout_s,
            keepalive_expiry=settings.keepalive_expiry_s,
        )

    async def _send(self, method: str, url: str, headers: Headers, body: Body) -> UpstreamResponse:
        return _Http1Response(await self._pool.request(method, url, headers, body))

    async def aclose(self) -> None:
        self._pool.close()


# --- httpx (tests inject a transport here) -------------------------------------------------


def _httpx_error(exc: httpx.HTTPError) -> GatewayError:
    if isinstance(exc, httpx.PoolTimeout):
        return UpstreamPoolExhausted()
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTimeout(f"upstream timed out: {type(exc).__name__}")
    if isinstance(exc, httpx.ConnectError):
        return UpstreamUnavailable(f"cannot connect to upstream: {exc}")
    return UpstreamUnavailable(f"upstream connection failed: {type(exc).__name__}")


_HTTPX_DEFAULT_HEADERS = frozenset({"accept", "accept-encoding", "user-agent", "connection"})


class _HttpxResponse(UpstreamResponse):
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers = list(response.headers.raw)

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._response.is_stream_consumed:
            # A response built in memory (mock transports) was already read; its byte stream
            # still holds the body as given, undecoded.
            stream = self._response.stream
            if isinstance(stream, httpx.AsyncByteStream):
                async for chunk in stream:
                    yield chunk
            return
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            raise _httpx_error(exc) from exc

    async def release(self) -> None:
        await self._response.aclose()


class HttpxUpstream(UpstreamClient):
    def __init__(
        self, settings: UpstreamSettings, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        super().__init__(settings)
        self._client = httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(
                settings.timeout_s,
                connect=settings.connect_timeout_s,
                pool=settings.pool_timeout_s,
            ),
            limits=httpx.Limits(max_connections=settings.max_connections),
            follow_redirects=False,
        )

    async def _send(self, method: str, url: str, headers: Headers, body: Body) -> UpstreamResponse:
        request = self._client.build_request(method, url, headers=list(headers), content=body)
        sent = {name.lower() for name, _ in headers}
        for default in _HTTPX_DEFAULT_HEADERS - sent:
            request.headers.pop(default, None)  # forward only what the client sent
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _httpx_error(exc) from exc
        return _HttpxResponse(response)

    async def aclose(self) -> None:
        await self._client.aclose()


def create_upstream(
    settings: UpstreamSettings, transport: httpx.AsyncBaseTransport | None = None
) -> UpstreamClient:
    if transport is not None or settings.client == "httpx":
        return HttpxUpstream(settings, transport)
    return Http1Upstream(settings)
