"""The upstream client: one pooled HTTP client per app, transport failures mapped to our errors.

Two implementations behind one small interface. `Http1Upstream` (gateway/upstream/native.py) is the
production default, chosen by measurement (docs/decisions.md); `HttpxUpstream` runs over any
httpx transport, which is how tests inject respx / `httpx.MockTransport`, and is the
general-purpose alternative (`upstream.client = "httpx"`). Both behave alike where it matters for
safety (docs/security.md, "Upstream client"): requests go only to the configured origin with an
origin-form target (gateway/upstream/origin.py); answers with a status outside 100-599 or more
headers than `MAX_RESPONSE_HEADERS` / `MAX_RESPONSE_HEAD_BYTES` are refused (502); trailers
never become headers; `upstream.timeout_s` is one deadline for the whole exchange; one TLS
context serves every connection. Both pass bodies through as raw bytes (no decompression) and
translate transport exceptions in one place each, most specific first. Writes are never
retried; idempotent requests without a body are retried once on a connection failure that
happened before any response.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import ssl
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from contextvars import ContextVar
from typing import Any, cast

import h11
import httpx

from gateway.config import UpstreamSettings
from gateway.errors import (
    GatewayError,
    UpstreamAnswerTooLarge,
    UpstreamPoolExhausted,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from gateway.limits.concurrency import ENGINE_TICKET
from gateway.serving.asgi import header_value
from gateway.upstream.native import (
    MAX_RESPONSE_HEAD_BYTES,
    MAX_RESPONSE_HEADERS,
    Http1Pool,
    Http1Response,
    RefusedAnswer,
)
from gateway.upstream.origin import UpstreamOrigin

Headers = Sequence[tuple[str, str]]
Body = bytes | AsyncIterable[bytes] | None
log = logging.getLogger("gateway.upstream")
CHUNK_SIZE = 64 * 1024
DEFAULT_MAX_ANSWER_BYTES = 32 * 1024 * 1024  # limits.max_upstream_answer_bytes' default
RETRYABLE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class EngineCalls:
    """What the access line says of a request's engine calls: the latest answer's status and
    the seconds spent waiting for answer heads, summed (`upstream_status`, `upstream_ms`: what
    the engine took beside what the gateway did). One per request, set by the app before its
    handler runs; the client adds to it in place, so a request costs one context variable set
    and one read, and engine calls in tasks the handler starts count as well."""

    __slots__ = ("seconds", "status")

    def __init__(self) -> None:
        self.status: int | None = None
        self.seconds = 0.0


ENGINE_CALLS: ContextVar[EngineCalls | None] = ContextVar("engine_calls", default=None)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context every upstream connection of the process uses (system CAs, verified).

    Built once: loading the CA store per connection costs milliseconds and memory, and one
    context keeps both clients' TLS behaviour the same."""
    return ssl.create_default_context()


class UpstreamResponse(ABC):
    status: int
    headers: list[tuple[bytes, bytes]]
    # Frees the client's pool slot this answer holds (set by `UpstreamClient.send`); called
    # once, by `release()`.
    _free_slot: Callable[[], None] | None = None

    def _release_slot(self) -> None:
        free, self._free_slot = self._free_slot, None
        if free is not None:
            free()

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
        return header_value(self.headers, name)

    @abstractmethod
    async def read(self) -> bytes:
        """The whole body exactly as received (never decompressed)."""

    async def read_within(self, limit: int) -> bytes:
        """The whole body, or UpstreamAnswerTooLarge as soon as it passes `limit` bytes (the
        rest is left unread: releasing the response then closes its connection)."""
        length = self.content_length
        if length is not None and length <= limit:
            return await self.read()
        if length is not None:
            raise UpstreamAnswerTooLarge(f"the engine's answer of {length} bytes is larger "
                                         f"than limits.max_upstream_answer_bytes ({limit})")
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            size += len(chunk)
            if size > limit:
                raise UpstreamAnswerTooLarge(f"the engine's answer is larger than "
                                             f"limits.max_upstream_answer_bytes ({limit})")
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    @abstractmethod
    def chunks(self) -> AsyncIterator[bytes]:
        """The body in chunks as received."""

    @abstractmethod
    async def release(self) -> None:
        """Give the connection back to the pool and free the pool slot (idempotent)."""


class UpstreamClient(ABC):
    def __init__(self, settings: UpstreamSettings,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> None:
        self.settings = settings
        # What `call()` reads whole at most (limits.max_upstream_answer_bytes); `send()`
        # answers stream and are not bounded here.
        self.max_answer_bytes = max_answer_bytes
        self._slots = asyncio.Semaphore(settings.max_connections)
        # Parsed once; None while no engine is configured (`serve` fills in the dev engine).
        self.origin = UpstreamOrigin.parse(settings.base_url) if settings.base_url else None

    async def send(
        self, method: str, target: str, headers: Headers, body: Body
    ) -> UpstreamResponse:
        """Send one request for `target` (origin-form, `/path?query`) to the configured origin.

        Anything else as a target is refused (400 `invalid_request_target`) before a connection
        is made. `upstream.timeout_s` bounds the whole exchange, the body included. The caller
        must `release()` the response."""
        if self.origin is None:
            raise UpstreamUnavailable("upstream.base_url is not set")
        line_target = self.origin.target(target)
        ticket = ENGINE_TICKET.get()
        if ticket is not None:
            ticket.enter()  # the user's engine-call cap (429 when all their slots are taken)
        deadline = asyncio.get_running_loop().time() + self.settings.timeout_s
        await self._acquire()
        started = time.perf_counter()
        try:
            try:
                response = await self._send(method, line_target, headers, body, deadline)
            except RefusedAnswer:
                raise
            except UpstreamUnavailable:
                if method not in RETRYABLE_METHODS or not isinstance(body, bytes | None):
                    raise
                response = await self._send(method, line_target, headers, body, deadline)
        except BaseException:
            self._slots.release()
            raise
        calls = ENGINE_CALLS.get()
        if calls is not None:
            calls.status = response.status
            calls.seconds += time.perf_counter() - started
        response._free_slot = self._slots.release
        return response

    async def call(
        self, method: str, path: str, headers: Headers, body: bytes | None
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """A buffered request for `path` (origin-form): (status, raw headers, raw body).

        The answer is read whole, so it is bounded: 502 `upstream_answer_too_large` beyond
        `max_answer_bytes`."""
        response = await self.send(method, path, headers, body)
        try:
            return (response.status, response.headers,
                    await response.read_within(self.max_answer_bytes))
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
    async def _send(
        self, method: str, target: str, headers: Headers, body: Body, deadline: float
    ) -> UpstreamResponse:
        """Send to the origin; `target` is the request line's, `deadline` in event-loop time."""

    @abstractmethod
    async def aclose(self) -> None:
        ...


# --- the built-in HTTP/1.1 client (default) ------------------------------------------------


class _Http1Response(Http1Response, UpstreamResponse):
    """The native pool's answer as an `UpstreamResponse`: one object per exchange."""

    async def release(self) -> None:
        try:
            self.release_connection()
        finally:
            self._release_slot()


class Http1Upstream(UpstreamClient):
    def __init__(self, settings: UpstreamSettings,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> None:
        super().__init__(settings, max_answer_bytes)
        self._pool = (
            None if self.origin is None else Http1Pool(
                self.origin,
                connect_timeout=settings.connect_timeout_s,
                keepalive_expiry=settings.keepalive_expiry_s,
                ssl_context=tls_context() if self.origin.scheme == "https" else None,
                response_type=_Http1Response,
            )
        )

    async def _send(
        self, method: str, target: str, headers: Headers, body: Body, deadline: float
    ) -> UpstreamResponse:
        assert self._pool is not None  # send() refuses to run without an origin
        # The pool answers with `_Http1Response`, the type it was made with.
        return cast(_Http1Response,
                    await self._pool.request(method, target, headers, body, deadline))

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.close()


# --- httpx (tests inject a transport here) -------------------------------------------------


def _httpx_error(exc: httpx.HTTPError, origin: str | None = None) -> GatewayError:
    if isinstance(exc, httpx.PoolTimeout):
        return UpstreamPoolExhausted()
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTimeout(f"upstream timed out: {type(exc).__name__}")
    if isinstance(exc, httpx.ConnectError):
        # The reason names the engine's address: for the log only (SPEC §13).
        log.warning("cannot connect to upstream %s: %s", origin, exc)
        return UpstreamUnavailable("cannot connect to upstream")
    return UpstreamUnavailable(f"upstream connection failed: {type(exc).__name__}")


_HTTPX_DEFAULT_HEADERS = frozenset({"accept", "accept-encoding", "user-agent", "connection"})


def _refusal(response: httpx.Response) -> str | None:
    """Why an answer breaks the limits the native client holds answers to, if it does."""
    if not 100 <= response.status_code <= 599:
        return f"upstream answered with an invalid status {response.status_code}"
    raw = response.headers.raw
    if len(raw) > MAX_RESPONSE_HEADERS:
        return f"upstream answer has more than {MAX_RESPONSE_HEADERS} headers"
    if sum(len(name) + len(value) + 4 for name, value in raw) > MAX_RESPONSE_HEAD_BYTES:
        return f"upstream answer's headers exceed {MAX_RESPONSE_HEAD_BYTES} bytes"
    return None


class _HttpxResponse(UpstreamResponse):
    def __init__(self, response: httpx.Response, deadline: float) -> None:
        self._response = response
        self._deadline = deadline
        self.status = response.status_code
        self.headers = list(response.headers.raw)

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def chunks(self) -> AsyncIterator[bytes]:
        stream = self._response.stream
        if not isinstance(stream, httpx.AsyncByteStream):
            return
        if self._response.is_stream_consumed:
            # A response built in memory (mock transports) was already read; its byte stream
            # still holds the body as given, undecoded.
            async for chunk in stream:
                yield chunk
            return
        # The stream itself, not aiter_raw(): that would close the response on its last chunk,
        # handing the connection back to the pool before _keep_nothing_unread could look at it.
        raw = aiter(stream)
        while True:
            try:
                async with asyncio.timeout_at(self._deadline):
                    chunk = await anext(raw)
            except StopAsyncIteration:
                self._keep_nothing_unread()
                return
            except TimeoutError:
                await self._response.aclose()
                raise UpstreamTimeout("upstream did not answer in time") from None
            except httpx.HTTPError as exc:
                raise _httpx_error(exc) from exc
            yield chunk

    def _keep_nothing_unread(self) -> None:
        parser = _h11_connection(self._response)
        if parser is not None and parser.their_state is h11.DONE and parser.trailing_data[0]:
            # Bytes after the answer's end (a second answer, a body on a 204, a body longer
            # than its length) stay buffered in h11 and would answer the next request on this
            # connection: marking it failed makes httpcore close it instead of pooling it.
            parser.send_failed()

    async def release(self) -> None:
        try:
            self._keep_nothing_unread()
            await self._response.aclose()
        finally:
            self._release_slot()


def _h11_connection(response: httpx.Response) -> h11.Connection | None:
    """The h11 state of the pooled connection an httpcore-backed response came on, if any.

    httpx does not expose it: this follows httpx 0.28 / httpcore 1.0's stream wrappers
    (tests/security/test_upstream_client.py fails if they change)."""
    stream = getattr(response.stream, "_stream", None)  # httpx BoundAsyncStream
    stream = getattr(stream, "_httpcore_stream", None)  # httpx AsyncResponseStream
    stream = getattr(stream, "_stream", None)  # httpcore PoolByteStream
    connection = getattr(stream, "_connection", None)  # HTTP11ConnectionByteStream
    parser = getattr(connection, "_h11_state", None)  # AsyncHTTP11Connection
    return parser if isinstance(parser, h11.Connection) else None


class HttpxUpstream(UpstreamClient):
    def __init__(
        self, settings: UpstreamSettings, transport: httpx.AsyncBaseTransport | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        super().__init__(settings, max_answer_bytes)
        self._client = httpx.AsyncClient(
            transport=transport,
            verify=tls_context(),
            timeout=httpx.Timeout(
                settings.timeout_s,
                connect=settings.connect_timeout_s,
                pool=settings.pool_timeout_s,
            ),
            limits=httpx.Limits(max_connections=settings.max_connections),
            follow_redirects=False,
            trust_env=False,  # no proxy or CA settings from the environment: one origin only
        )
        origin = self.origin
        self._base = (
            None if origin is None
            else httpx.URL(scheme=origin.scheme, host=origin.host, port=origin.port)
        )
        self._host = None if origin is None else origin.authority

    async def _send(
        self, method: str, target: str, headers: Headers, body: Body, deadline: float
    ) -> UpstreamResponse:
        assert self._base is not None and self._host is not None
        url = self._base.copy_with(raw_path=target.encode("ascii"))
        request = self._client.build_request(method, url, headers=list(headers), content=body)
        request.headers["Host"] = self._host
        sent = {name.lower() for name, _ in headers}
        for default in _HTTPX_DEFAULT_HEADERS - sent:
            request.headers.pop(default, None)  # forward only what the client sent
        try:
            async with asyncio.timeout_at(deadline):
                response = await self._client.send(request, stream=True)
        except TimeoutError:
            raise UpstreamTimeout("upstream did not answer in time") from None
        except httpx.HTTPError as exc:
            raise _httpx_error(exc, self._host) from exc
        refusal = _refusal(response)
        if refusal is not None:
            await response.aclose()
            raise RefusedAnswer(refusal)
        return _HttpxResponse(response, deadline)

    async def aclose(self) -> None:
        await self._client.aclose()


def create_upstream(
    settings: UpstreamSettings, transport: httpx.AsyncBaseTransport | None = None,
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
) -> UpstreamClient:
    if transport is not None or settings.client == "httpx":
        return HttpxUpstream(settings, transport, max_answer_bytes)
    return Http1Upstream(settings, max_answer_bytes)
