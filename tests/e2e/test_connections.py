"""Slow clients against a real `memory-gateway serve` (SPEC §13): connections that never finish
their request head are closed after `server.header_timeout_s`, bodies that stall are answered 408
(`server.body_timeout_s`, `server.min_body_rate`); past the connection caps new ones are closed
at once, while other clients still get through."""

from __future__ import annotations

import json
import socket
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.processes import dev_engine, free_port, gateway

pytestmark = pytest.mark.e2e
HEADER_TIMEOUT_S = 2.0
PARTIAL_HEAD = b"GET /healthz HTTP/1.1\r\nHost: gateway\r\nX-Slow: "  # never finished


def slow_connection(port: int, source: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
    try:
        sock.sendall(PARTIAL_HEAD)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused already; closed_by_server says so
    return sock


def closed_by_server(sock: socket.socket, wait_s: float) -> bool:
    """True when the server closed `sock` within `wait_s` (end of stream or a reset)."""
    sock.settimeout(wait_s)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def still_open(sock: socket.socket) -> bool:
    """True when the server has not closed `sock` (checked without waiting)."""
    sock.setblocking(False)
    try:
        return sock.recv(1024) != b""
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.setblocking(True)


def test_slow_heads_are_closed_after_the_timeout_and_caps_refuse_the_excess(
    tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # only /healthz is asked for
    with gateway(tmp_path, dead, MEMORY_GATEWAY_SERVER_HEADER_TIMEOUT_S=str(HEADER_TIMEOUT_S),
                 MEMORY_GATEWAY_SERVER_MAX_CONNECTIONS_PER_CLIENT="150",
                 MEMORY_GATEWAY_SERVER_MAX_CONNECTIONS="200") as gw:
        port = int(gw.url.rsplit(":", 1)[1])
        with ExitStack() as sockets:
            check_caps_and_timeout(port, gw.url, sockets)
        # Their places are free again: the same address is admitted and answered.
        with socket.create_connection(("127.0.0.1", port), timeout=5,
                                      source_address=("127.0.0.2", 0)) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n")
            assert sock.recv(1024).startswith(b"HTTP/1.1 200")


def check_caps_and_timeout(port: int, url: str, sockets: ExitStack) -> None:
    def connect(source: str) -> socket.socket:
        return sockets.enter_context(slow_connection(port, source))

    opened = time.monotonic()
    slow = [connect("127.0.0.2") for _ in range(150)]
    # The 151st from the same address is past the per-client cap: closed at once.
    excess = [connect("127.0.0.2") for _ in range(20)]
    assert all(closed_by_server(sock, 1.0) for sock in excess)
    # Another client still gets through while the slow ones hold their connections.
    assert httpx.get(url + "/healthz", timeout=5).status_code == 200
    time.sleep(0.2)  # that client's connection is closed and uncounted
    others = [connect("127.0.0.3") for _ in range(50)]
    # 200 open now: past the total cap, any address is closed at once.
    assert closed_by_server(connect("127.0.0.4"), 1.0)
    assert time.monotonic() - opened < HEADER_TIMEOUT_S - 0.3
    assert sum(still_open(sock) for sock in slow + others) == 200
    # After the header timeout every slow connection has been closed by the gateway.
    deadline = opened + HEADER_TIMEOUT_S + 3.0
    for sock in slow + others:
        assert closed_by_server(sock, max(0.01, deadline - time.monotonic()))


def test_head_trickled_byte_by_byte_is_still_cut_off(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with gateway(tmp_path, dead, MEMORY_GATEWAY_SERVER_HEADER_TIMEOUT_S="1") as gw:
        port = int(gw.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            started = time.monotonic()
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            closed = False
            while time.monotonic() - started < 4:
                try:
                    sock.sendall(b"X")  # a byte every 0.2 s: the head never ends
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                if closed_by_server(sock, 0.2):
                    closed = True
                    break
        assert closed and time.monotonic() - started < 2.5


def test_header_timeout_holds_with_several_workers(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with gateway(tmp_path, dead, MEMORY_GATEWAY_SERVER_HEADER_TIMEOUT_S="1",
                 MEMORY_GATEWAY_SERVER_WORKERS="2") as gw:
        port = int(gw.url.rsplit(":", 1)[1])
        opened = time.monotonic()
        with ExitStack() as sockets:
            slow = [sockets.enter_context(slow_connection(port, "127.0.0.1"))
                    for _ in range(20)]
            assert httpx.get(gw.url + "/healthz", timeout=5).status_code == 200
            for sock in slow:
                assert closed_by_server(sock, max(0.01, opened + 4.0 - time.monotonic()))
        assert httpx.get(gw.url + "/healthz", timeout=5).status_code == 200


def test_a_request_head_past_max_head_bytes_is_refused_with_431(tmp_path: Path) -> None:
    """uvicorn takes heads of any size (a 16 MB header reached the app and was kept in the
    headers' cache); `serve` holds them to `server.max_head_bytes`, in parts or whole."""
    dead = f"http://127.0.0.1:{free_port()}"
    with gateway(tmp_path, dead, MEMORY_GATEWAY_SERVER_MAX_HEAD_BYTES="16384") as gw:
        port = int(gw.url.rsplit(":", 1)[1])

        def ask(header_bytes: int, parts: int) -> bytes:
            head = (b"GET /healthz HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\nX-Big: "
                    + b"v" * header_bytes + b"\r\n\r\n")
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                step = -(-len(head) // parts)
                try:
                    for at in range(0, len(head), step):
                        sock.sendall(head[at:at + step])
                        time.sleep(0.05)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # refused while still sending
                answer = b""
                try:
                    while chunk := sock.recv(65536):
                        answer += chunk
                except ConnectionResetError:
                    pass  # the rest of a refused head reset the connection: the answer came first
                return answer

        assert ask(15_000, 1).startswith(b"HTTP/1.1 200")
        for size, parts in ((17_000, 1), (40_000, 8), (4 << 20, 1)):
            answer = ask(size, parts)
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 431"), (size, parts, answer[:200])
            error = json.loads(body)["error"]
            assert error["code"] == "request_head_too_large" and error["status"] == 431
        assert ask(100, 1).startswith(b"HTTP/1.1 200")  # the gateway serves on


BODY_TIMEOUT_S = 2.0
DECLARED = 64 * 1024 * 1024  # limits.max_body_bytes, and here the whole parsing budget


def body_left_hanging(port: int, token: str, path: str) -> socket.socket:
    """A request that declares a 64 MiB body and sends its first two bytes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {token}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {DECLARED}\r\n\r\n{{\""
                 .encode())
    return sock


def answer_of(sock: socket.socket, wait_s: float) -> bytes:
    """Everything the server sends on `sock` until it closes it (or `wait_s` passes)."""
    sock.settimeout(wait_s)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return received


def trickle(sock: socket.socket, every_s: float, stop: threading.Event) -> None:
    """One byte every `every_s` until the server closes the socket or `stop` is set."""
    while not stop.wait(every_s):
        try:
            sock.sendall(b" ")
        except OSError:
            return


def test_stalled_bodies_get_408_while_other_users_are_served(tmp_path: Path) -> None:
    """Issue 51 (7): one declared body took the parsing budget and stalled everyone (503)."""
    with dev_engine(tmp_path / "engine") as engine, gateway(
            tmp_path, engine, MEMORY_GATEWAY_SERVER_BODY_TIMEOUT_S=str(BODY_TIMEOUT_S),
            MEMORY_GATEWAY_LIMITS_MAX_PARSING_BYTES=str(DECLARED)) as gw:
        port = int(gw.url.rsplit(":", 1)[1])
        alice, bob = gw.key("alice"), gw.key("bob")
        stop = threading.Event()
        opened = time.monotonic()
        silent = body_left_hanging(port, alice, "/api/v2/memory/search")  # an owned route
        dripping = body_left_hanging(port, alice, "/api/v2/memory/get")  # the pass-through
        dripper = threading.Thread(target=trickle, args=(dripping, 0.4, stop))
        dripper.start()
        try:
            statuses = []
            with httpx.Client(base_url=gw.url, timeout=10,
                              headers={"Authorization": f"Bearer {bob}"}) as client:
                while time.monotonic() - opened < BODY_TIMEOUT_S:
                    statuses.append(client.post("/api/v2/memory/search", json={
                        "user_id": "bob", "query": "anything"}).status_code)
                    time.sleep(0.1)
            assert statuses and set(statuses) == {200}
            deadline = BODY_TIMEOUT_S * (1 + 1 / 4) + 1.0  # a check every quarter timeout
            for sock in (silent, dripping):
                answer = answer_of(sock, deadline + 2.0)
                assert time.monotonic() - opened < deadline + BODY_TIMEOUT_S, answer
                head, _, body = answer.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 408"), answer
                assert b"connection: close" in head.lower()
                assert json.loads(body)["error"]["code"] == "request_timeout"
        finally:
            stop.set()
            dripper.join()
            silent.close()
            dripping.close()
        # A small body that takes its time, whole within the timeout, is never held to the rate.
        body = json.dumps({"user_id": "bob", "query": "slow but small"}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(f"POST /api/v2/memory/search HTTP/1.1\r\nHost: gateway\r\n"
                         f"Authorization: Bearer {bob}\r\nContent-Type: application/json\r\n"
                         f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n".encode())
            for part in (body[:10], body[10:20], body[20:]):
                time.sleep(BODY_TIMEOUT_S / 4)
                sock.sendall(part)
            assert answer_of(sock, 10).startswith(b"HTTP/1.1 200")
        # The budget they held is free: a large body of bob's is read and answered.
        padded = {"user_id": "bob", "query": "x" * (8 * 1024 * 1024)}
        with httpx.Client(base_url=gw.url, timeout=30,
                          headers={"Authorization": f"Bearer {bob}"}) as client:
            assert client.post("/api/v2/memory/search", json=padded).status_code < 500
