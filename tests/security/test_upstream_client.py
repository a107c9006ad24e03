"""Both upstream clients against an upstream that speaks deliberately wrong HTTP (SPEC §5 Answers).

One test per hostile behaviour, each run against the native and the httpx client: an answer
reaches only the request it answers, limits turn oversized or invalid answers into 502, the
deadline covers the whole exchange, and requests go nowhere but the configured origin.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from gateway.app import create_app
from gateway.config import ConfigError, Settings, UpstreamSettings
from gateway.errors import BadRequest, UpstreamTimeout, UpstreamUnavailable
from gateway.upstream.client import UpstreamClient, create_upstream, tls_context
from gateway.upstream.native import MAX_RESPONSE_HEAD_BYTES, MAX_RESPONSE_HEADERS
from tests.conftest import client_for
from tests.security.hostile_upstream import (
    HostileUpstream,
    Pause,
    Request,
    Script,
    naming,
    response,
)

CLIENTS = ["native", "httpx"]
pytestmark = pytest.mark.parametrize("client_name", CLIENTS)

STALE = b'{"for": "alice", "stale": true}'
SMUGGLED = response(200, STALE)  # an answer-shaped tail: if it is parsed, it answers someone


def make_client(url: str, client_name: str, timeout_s: float = 5.0) -> UpstreamClient:
    return create_upstream(UpstreamSettings(
        base_url=url, client=client_name, timeout_s=timeout_s, keepalive_expiry_s=60.0))


async def fetch(
    client: UpstreamClient, user: str = "alice", target: str = "/x"
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    response = await client.send("GET", target, [("X-Memory-User-Id", user)], None)
    try:
        return response.status, response.headers, await response.read()
    finally:
        await response.release()


async def answers_follow_requests(
    upstream: HostileUpstream, client_name: str, rounds: int = 6, wait_for_script: bool = False
) -> None:
    """Alice and bob take turns; every answer must be the one the upstream gave that request."""
    client = make_client(upstream.url, client_name)
    try:
        for turn in range(rounds):
            user = ("alice", "bob")[turn % 2]
            upstream.finished.clear()
            status, _, body = await fetch(client, user)
            assert (status, json.loads(body)) == (200, {"for": user, "request": turn})
            if wait_for_script:
                await upstream.finished.wait()  # the unsolicited bytes are on their way
    finally:
        await client.aclose()


# --- an answer reaches only the request it answers (finding 5) ---------------------------------


async def test_second_answer_in_one_packet_never_answers_the_next_request(
    client_name: str
) -> None:
    async with HostileUpstream(lambda r: [response(200, naming(r)) + SMUGGLED]) as upstream:
        await answers_follow_requests(upstream, client_name)


async def test_second_answer_sent_while_idle_never_answers_the_next_request(
    client_name: str
) -> None:
    def answer(request: Request) -> Script:
        return [response(200, naming(request)), Pause(0.05), SMUGGLED]

    async with HostileUpstream(answer) as upstream:
        await answers_follow_requests(upstream, client_name, wait_for_script=True)


async def test_partial_answer_sent_while_idle_never_starts_the_next_answer(
    client_name: str
) -> None:
    head, tail = SMUGGLED[:20], SMUGGLED[20:]

    def answer(request: Request) -> Script:
        # Each answer is followed, once idle, by the start of another; a request that comes
        # on the same connection gets its end first, then its own answer.
        finish = tail if request.sequence > 0 else b""
        return [finish + response(200, naming(request)), Pause(0.05), head]

    async with HostileUpstream(answer) as upstream:
        await answers_follow_requests(upstream, client_name, wait_for_script=True)


@pytest.mark.parametrize("status", [204, 304])
async def test_body_on_a_bodiless_status_never_answers_the_next_request(
    client_name: str, status: int
) -> None:
    def answer(request: Request) -> Script:
        if request.user == "alice":
            head = b"HTTP/1.1 %d Nothing\r\nContent-Length: %d\r\n\r\n" % (status, len(SMUGGLED))
            return [head + SMUGGLED]
        return [response(200, naming(request))]

    async with HostileUpstream(answer) as upstream:
        client = make_client(upstream.url, client_name)
        for _ in range(3):
            alice_status, _, alice_body = await fetch(client, "alice")
            assert (alice_status, alice_body) == (status, b"")
            bob_status, _, bob_body = await fetch(client, "bob")
            assert bob_status == 200 and json.loads(bob_body)["for"] == "bob"
        await client.aclose()


async def test_body_longer_than_its_length_never_answers_the_next_request(
    client_name: str
) -> None:
    def answer(request: Request) -> Script:
        body = naming(request)
        return [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b%b" % (len(body), body, SMUGGLED)]

    async with HostileUpstream(answer) as upstream:
        await answers_follow_requests(upstream, client_name)


async def test_bob_never_receives_alices_answer_through_the_gateway(
    client_name: str, settings: Settings, make_key: Callable[[str], str]
) -> None:
    def answer(request: Request) -> Script:
        # A buggy engine answers every request twice, the copy a moment later.
        return [response(200, naming(request)), Pause(0.01), response(200, naming(request))]

    async with HostileUpstream(answer) as upstream:
        gateway = create_app(settings.with_values(
            upstream={"base_url": upstream.url, "client": client_name}))
        async with gateway.running(), client_for(gateway, make_key("alice")) as alice, \
                client_for(gateway, make_key("bob")) as bob:
            for turn in range(20):
                user, api = (("alice", alice), ("bob", bob))[turn % 2]
                upstream.finished.clear()
                got = await api.post("/api/v2/memory/get", 
                    json={"user_id": user, "memory_type": "episode"})
                assert got.status_code == 200
                assert json.loads(got.content)["for"] == user
                await upstream.finished.wait()


# --- limits on answers (finding 9) -------------------------------------------------------------


async def test_trailers_never_become_headers(client_name: str) -> None:
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Head: 1\r\n\r\n"
               b"2\r\nok\r\n0\r\nSet-Cookie: session=stolen\r\nX-Trailer: 1\r\n\r\n")
    async with HostileUpstream(lambda r: [chunked]) as upstream:
        client = make_client(upstream.url, client_name)
        status, headers, body = await fetch(client)
        await client.aclose()
    names = {name.lower() for name, _ in headers}
    assert (status, body) == (200, b"ok")
    assert b"x-head" in names
    assert not names & {b"set-cookie", b"x-trailer"}


async def test_trailers_never_reach_the_gateways_client(
    client_name: str, settings: Settings, make_key: Callable[[str], str]
) -> None:
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"2\r\nok\r\n0\r\nSet-Cookie: session=stolen\r\n\r\n")
    async with HostileUpstream(lambda r: [chunked]) as upstream:
        gateway = create_app(settings.with_values(
            upstream={"base_url": upstream.url, "client": client_name}))
        async with gateway.running(), client_for(gateway, make_key("alice")) as alice:
            got = await alice.post("/api/v2/memory/get", 
                json={"user_id": "alice", "memory_type": "episode"})
    assert (got.status_code, got.content) == (200, b"ok")
    assert "set-cookie" not in got.headers


@pytest.mark.parametrize("count", [MAX_RESPONSE_HEADERS + 1, 200_000])
async def test_more_headers_than_the_cap_is_502(client_name: str, count: int) -> None:
    head = b"".join(b"X-H%d: 1\r\n" % i for i in range(count))
    async with HostileUpstream(lambda r: [b"HTTP/1.1 200 OK\r\n" + head + b"\r\n"]) as upstream:
        client = make_client(upstream.url, client_name)
        with pytest.raises(UpstreamUnavailable):
            await fetch(client)
        await client.aclose()


@pytest.mark.parametrize("sizes", [[16 * 1024 * 1024], [2048] * 40], ids=["one-huge", "many"])
async def test_header_bytes_over_the_cap_is_502(client_name: str, sizes: list[int]) -> None:
    assert sum(sizes) > MAX_RESPONSE_HEAD_BYTES and len(sizes) <= MAX_RESPONSE_HEADERS
    head = b"".join(b"X-H%d: %b\r\n" % (i, b"v" * size) for i, size in enumerate(sizes))
    async with HostileUpstream(lambda r: [b"HTTP/1.1 200 OK\r\n" + head + b"\r\n"]) as upstream:
        client = make_client(upstream.url, client_name)
        with pytest.raises(UpstreamUnavailable):
            await fetch(client)
        await client.aclose()


@pytest.mark.parametrize("status", [b"600", b"999", b"099", b"000"])
async def test_status_outside_100_to_599_is_502(client_name: str, status: bytes) -> None:
    answer = b"HTTP/1.1 %b Odd\r\nContent-Length: 2\r\n\r\nok" % status
    async with HostileUpstream(lambda r: [answer]) as upstream:
        client = make_client(upstream.url, client_name)
        with pytest.raises(UpstreamUnavailable):
            await fetch(client)
        await client.aclose()


async def test_unasked_protocol_switch_is_502(client_name: str) -> None:
    switch = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"
    async with HostileUpstream(lambda r: [switch + response(200, b"raw")]) as upstream:
        client = make_client(upstream.url, client_name)
        with pytest.raises(UpstreamUnavailable):
            await fetch(client)
        await client.aclose()


async def test_status_600_through_the_gateway_is_502(
    client_name: str, settings: Settings, make_key: Callable[[str], str]
) -> None:
    answer = b"HTTP/1.1 600 Odd\r\nContent-Length: 2\r\n\r\nok"
    async with HostileUpstream(lambda r: [answer]) as upstream:
        gateway = create_app(settings.with_values(
            upstream={"base_url": upstream.url, "client": client_name}))
        async with gateway.running(), client_for(gateway, make_key("alice")) as alice:
            got = await alice.post("/api/v2/memory/get", 
                json={"user_id": "alice", "memory_type": "episode"})
    assert got.status_code == 502
    assert got.json()["error"]["code"] == "upstream_unavailable"


def drip(data: bytes, every: float = 0.05) -> Script:
    parts: list[bytes | Pause] = []
    for byte in range(len(data)):
        parts += [data[byte:byte + 1], Pause(every)]
    return parts


async def test_body_dripped_past_the_deadline_times_out(client_name: str) -> None:
    # Each byte comes well within the timeout; the whole answer takes four times as long.
    body = b"x" * 40
    script = [b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n", *drip(body)]
    async with HostileUpstream(lambda r: script) as upstream:
        client = make_client(upstream.url, client_name, timeout_s=0.5)
        with pytest.raises(UpstreamTimeout):
            await fetch(client)
        await client.aclose()


async def test_headers_dripped_past_the_deadline_time_out(client_name: str) -> None:
    script = drip(b"HTTP/1.1 200 OK\r\nX-Slow: yes\r\nContent-Length: 0\r\n\r\n")
    async with HostileUpstream(lambda r: script) as upstream:
        client = make_client(upstream.url, client_name, timeout_s=0.5)
        with pytest.raises(UpstreamTimeout):
            await fetch(client)
        await client.aclose()


# --- requests go to the configured origin only (finding 1, client side) -----------------------


@pytest.mark.parametrize("target", [
    "*@{thief}/steal", "@{thief}/steal", "//{thief}/steal", "http://{thief}/steal", "{thief}/steal",
    "*", "", "x", "/a/../steal", "/a/%2E%2e/steal", "/./steal", "/x#frag", "/x y", "/x\r\nHost: a",
    "/\\{thief}/steal", "/caf\u00e9", "/x?%zz",
])
async def test_targets_other_than_origin_form_are_refused_unsent(
    client_name: str, target: str
) -> None:
    async with HostileUpstream(lambda r: [response(200, b"engine")]) as engine, \
            HostileUpstream(lambda r: [response(200, b"stolen")]) as thief:
        client = make_client(engine.url, client_name)
        bad = target.format(thief=thief.url.removeprefix("http://"))
        with pytest.raises(BadRequest) as refused:
            await fetch(client, target=bad)
        await client.aclose()
    assert refused.value.error_code == "invalid_request_target"
    assert (engine.connections, thief.connections) == (0, 0)


async def test_a_request_line_naming_another_host_never_reaches_it_through_the_gateway(
    client_name: str, settings: Settings, make_key: Callable[[str], str]
) -> None:
    async with HostileUpstream(lambda r: [response(200, b"engine")]) as engine, \
            HostileUpstream(lambda r: [response(200, b"stolen")]) as thief:
        gateway = create_app(settings.with_values(
            upstream={"base_url": engine.url, "client": client_name}))
        # What uvicorn hands over for `GET *@127.0.0.1:PORT/steal HTTP/1.1`.
        target = "*@" + thief.url.removeprefix("http://") + "/steal"
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
            "scheme": "http", "path": target, "raw_path": target.encode(), "query_string": b"",
            "root_path": "", "client": ("203.0.113.7", 5555), "server": ("gateway.test", 80),
            "headers": [(b"host", b"gateway.test"),
                        (b"authorization", f"Bearer {make_key('alice')}".encode())],
        }
        sent: list[dict] = []

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)

        async with gateway.running():
            await gateway(scope, receive, send)
    assert sent[0]["status"] == 400
    assert b"stolen" not in b"".join(m.get("body", b"") for m in sent)
    assert (engine.connections, thief.connections) == (0, 0)


async def test_origin_form_target_reaches_the_origin_under_its_path_prefix(
    client_name: str
) -> None:
    async with HostileUpstream(lambda r: [response(200, r.target.encode())]) as engine:
        client = make_client(engine.url + "/engine/", client_name)
        status, _, body = await fetch(client, target="/v2/get?user=a%40b&x=@:/?")
        await client.aclose()
    assert (status, body) == (200, b"/engine/v2/get?user=a%40b&x=@:/?")
    assert engine.requests[0].headers[b"host"] == engine.url.removeprefix("http://").encode()


@pytest.mark.parametrize("base_url", [
    "http://user:secret@engine.test", "http://engine.test@thief.test", "http://engine.test/?q=1",
    "http://engine.test/#f", "http://:80", "ftp://engine.test", "http://engine.test/a b",
])
def test_base_url_that_is_not_a_plain_origin_is_refused_at_start(
    client_name: str, base_url: str
) -> None:
    with pytest.raises(ConfigError):
        Settings().with_values(upstream={"base_url": base_url, "client": client_name})


def test_every_https_connection_uses_the_one_verifying_tls_context(client_name: str) -> None:
    client = make_client("https://engine.test", client_name)
    context = tls_context()
    assert context.check_hostname and context.verify_mode.name == "CERT_REQUIRED"
    if client_name == "native":
        assert client._pool._ssl is context  # type: ignore[attr-defined]
    else:
        pool = client._client._transport._pool  # type: ignore[attr-defined]
        assert pool._ssl_context is context
    assert tls_context() is context

