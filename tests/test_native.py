"""The built-in HTTP/1.1 upstream client against real sockets (asyncio servers on loopback)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from gateway.errors import UpstreamTimeout, UpstreamUnavailable
from gateway.upstream.native import Http1Pool, Http1Response
from gateway.upstream.origin import UpstreamOrigin

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    chunked = False
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
        if line.lower() == b"transfer-encoding: chunked":
            chunked = True
    if chunked:
        body = b""
        while True:
            size = int((await reader.readline()).strip(), 16)
            if size == 0:
                await reader.readline()
                break
            body += await reader.readexactly(size)
            await reader.readline()
        return head, body
    return head, await reader.readexactly(length)


class Server:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                await self.handler(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        self.server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


def pool(url: str) -> Http1Pool:
    return Http1Pool(UpstreamOrigin.parse(url), connect_timeout=2.0, keepalive_expiry=4.0)


async def request(
    client: Http1Pool, method: str, target: str, body: bytes | AsyncIterator[bytes] | None,
    timeout: float = 5.0,
) -> Http1Response:
    deadline = asyncio.get_running_loop().time() + timeout
    return await client.request(method, target, [], body, deadline)


async def keepalive_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        try:
            head, body = await read_request(reader)
        except asyncio.IncompleteReadError:
            return
        answer = b"echo:" + body
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Head-Bytes: %d\r\n\r\n%b"
                     % (len(answer), len(head), answer))
        await writer.drain()


async def test_connections_are_reused_after_a_complete_response() -> None:
    server = Server(keepalive_echo)
    async with server as url:
        client = pool(url)
        for i in range(5):
            response = await request(client, "POST", "/x", b"n%d" % i)
            assert response.status == 200
            assert await response.read() == b"echo:n%d" % i
            response.release_connection()
        client.close()
    assert server.connections == 1


async def test_streamed_request_body_without_length_is_sent_chunked() -> None:
    async def body() -> AsyncIterator[bytes]:
        for part in (b"a" * 70_000, b"b" * 70_000, b"c"):
            yield part

    async with Server(keepalive_echo) as url:
        client = pool(url)
        response = await request(client, "POST", "/up", body())
        assert await response.read() == b"echo:" + b"a" * 70_000 + b"b" * 70_000 + b"c"
        response.release_connection()
        client.close()


async def test_chunked_response_is_streamed_in_order() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i in range(50):
            part = b"%03d" % i * 1000
            writer.write(b"%x\r\n%b\r\n" % (len(part), part))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async with Server(handler) as url:
        client = pool(url)
        response = await request(client, "GET", "/s", None)
        received = [chunk async for chunk in response.chunks()]
        assert b"".join(received) == b"".join(b"%03d" % i * 1000 for i in range(50))
        response.release_connection()
        client.close()


async def test_body_delimited_by_connection_close() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
        await writer.drain()

    async with Server(handler) as url:
        client = pool(url)
        response = await request(client, "GET", "/", None)
        assert await response.read() == b"all of it"
        response.release_connection()
        client.close()


async def test_connection_refused_is_unavailable() -> None:
    async with Server(keepalive_echo) as url:
        pass  # closed: nothing listens on that port now
    with pytest.raises(UpstreamUnavailable):
        await request(pool(url), "GET", "/", None)


async def test_reset_mid_response_is_unavailable() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly part")
        await writer.drain()
        writer.transport.abort()

    async with Server(handler) as url:
        response = await request(pool(url), "GET", "/", None)
        with pytest.raises(UpstreamUnavailable):
            await response.read()


async def test_no_answer_in_time_is_a_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    async with Server(handler) as url:
        with pytest.raises(UpstreamTimeout):
            await request(pool(url), "POST", "/", b"{}", timeout=0.3)


async def test_garbage_answer_is_unavailable() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()

    async with Server(handler) as url:
        with pytest.raises(UpstreamUnavailable):
            await request(pool(url), "GET", "/", None)


async def test_informational_response_is_skipped() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()

    async with Server(handler) as url:
        response = await request(pool(url), "POST", "/", b"x")
        assert response.status == 201
        assert await response.read() == b"ok"


async def test_head_response_with_length_has_no_body_and_is_not_reused() -> None:
    server = Server(lambda r, w: _head_handler(r, w))
    async with server as url:
        client = pool(url)
        response = await request(client, "HEAD", "/", None)
        assert response.status == 200
        assert dict(response.headers)[b"Content-Length"] == b"12345"
        assert await response.read() == b""
        response.release_connection()
        assert client._idle == []


async def _head_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 12345\r\n\r\n")
    await writer.drain()


async def test_request_line_carries_the_target_and_host_the_origin() -> None:
    async def echo_head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head, _ = await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            line = head.split(b"\r\n")[0] + b"|" + head.split(b"\r\n")[1]
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(line), line))
            await writer.drain()

    async with Server(echo_head) as url:
        client = pool(url)
        host = url.removeprefix("http://")
        for target in ("/", "/?q=1", "/a/b?c=%20d"):
            expected = b"GET %b HTTP/1.1" % target.encode()
            response = await request(client, "GET", target, None)
            assert await response.read() == expected + b"|Host: " + host.encode()
            response.release_connection()
        client.close()


def delayed_echo(delays: list[float]) -> Handler:
    """A keep-alive echo that answers its n-th request after `delays[n]` seconds."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for delay in delays:
            _, body = await read_request(reader)
            await asyncio.sleep(delay)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))
            await writer.drain()

    return handler


async def test_a_reused_connection_waits_for_its_own_deadline_not_an_earlier_exchanges() -> None:
    """The deadline timer of a connection is made once and moved on: the first exchange's
    timer fires while the second waits, and the second still gets its whole time, then times
    out at its own deadline."""
    loop = asyncio.get_running_loop()
    # the second answer comes after the first exchange's deadline
    server = Server(delayed_echo([0.0, 0.35, 10.0]))
    async with server as url:
        client = pool(url)
        first = await request(client, "POST", "/x", b"one", timeout=0.3)
        assert await first.read() == b"one"
        first.release_connection()
        second = await request(client, "POST", "/x", b"two", timeout=0.6)
        assert await second.read() == b"two"
        second.release_connection()
        began = loop.time()
        with pytest.raises(UpstreamTimeout):
            await request(client, "POST", "/x", b"three", timeout=0.3)
        waited = loop.time() - began
        client.close()
    assert 0.29 <= waited < 2.0
    assert server.connections == 1


async def test_a_shorter_deadline_after_a_longer_one_is_kept() -> None:
    """The pending timer is for a later time than the new exchange's deadline: it is moved."""
    loop = asyncio.get_running_loop()
    async with Server(delayed_echo([0.0, 10.0])) as url:
        client = pool(url)
        first = await request(client, "POST", "/x", b"one", timeout=5.0)
        assert await first.read() == b"one"
        first.release_connection()
        began = loop.time()
        with pytest.raises(UpstreamTimeout):
            await request(client, "POST", "/x", b"two", timeout=0.3)
        waited = loop.time() - began
        client.close()
    assert 0.29 <= waited < 2.0


async def test_framing_headers_are_skipped_in_any_spelling_and_long_names_are_not_kept() -> None:
    """The request's own framing headers (Content-Length, Host, ...) are the client's to
    write, never the caller's, however they are spelled, and a made-up long name still goes
    through but is not kept in the lowered names' cache."""
    from gateway.upstream import native

    heads: list[bytes] = []

    async def keep_head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head, body = await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            heads.append(head)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))
            await writer.drain()

    long_name = "X-" + "Long" * 40
    async with Server(keep_head) as url:
        client = pool(url)
        for _ in range(2):  # the second time from the cache
            headers = [("cOnTeNt-LeNgTh", "999"), ("HOST", "elsewhere"), ("Expect", "100-continue"),
                       ("Transfer-Encoding", "chunked"), (long_name, "v"), ("X-Kept", "k")]
            deadline = asyncio.get_running_loop().time() + 5
            response = await client.request("POST", "/x", headers, b"abc", deadline)
            assert await response.read() == b"abc"
            response.release_connection()
        client.close()
    for head in heads:
        lines = head.lower().split(b"\r\n")
        assert lines.count(b"content-length: 3") == 1 and b"content-length: 999" not in lines
        assert not any(line.startswith((b"expect", b"transfer-encoding")) for line in lines)
        assert [line for line in lines if line.startswith(b"host:")] == [
            b"host: " + url.removeprefix("http://").encode()]
        assert b"x-kept: k" in lines and (long_name.lower() + ": v").encode() in lines
    assert "cOnTeNt-LeNgTh" in native._LOWERED and long_name not in native._LOWERED
