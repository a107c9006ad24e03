"""Finding 1: request targets that are not origin-form, sent on a raw socket to a real gateway.

`GET *@127.0.0.1:<port>/steal` once made the gateway connect to that port with the engine's
secret headers. Now any target that is not `/path?query` is a 400 and no connection is made.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.processes import gateway

pytestmark = pytest.mark.e2e


class _Engine(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _answer(self) -> None:
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def listening(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def raw(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


@pytest.mark.processes
def test_1_targets_other_than_origin_form_are_400_and_reach_no_host(tmp_path: Path) -> None:
    with listening(_Engine) as engine, listening(_Engine) as thief:
        engine_url = f"http://127.0.0.1:{engine.server_address[1]}"
        steal = f"127.0.0.1:{thief.server_address[1]}"
        with gateway(tmp_path, engine_url,
                     MEMORY_GATEWAY_UPSTREAM_HEADERS='{"X-Engine-Key": "secret"}') as gw:
            key = gw.key("bob")
            auth = f"Authorization: Bearer {key}\r\nHost: gw\r\n".encode()
            body = b'{"user_id": "alice"}'
            for target in (f"*@{steal}/steal", f"*@{steal}/api/v2/memory/add",
                           f"*@{steal}/api/v2/memory/search", "*", f"http://{steal}/steal",
                           f"//{steal}/steal", f"@{steal}/health"):
                for method in ("GET", "POST", "OPTIONS"):
                    request = (f"{method} {target} HTTP/1.1\r\n".encode() + auth
                               + b"Content-Type: application/json\r\n"
                               + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                    answer = raw(gw.url, request)
                    assert status_of(answer) in (400, 404), (method, target, answer)
            options = raw(gw.url, b"OPTIONS * HTTP/1.1\r\nHost: gw\r\n\r\n")
            assert status_of(options) == 400, options
            # The gateway still works: an origin-form request reaches the engine.
            ok = raw(gw.url, b"GET /health HTTP/1.1\r\n" + auth + b"\r\n")
            assert status_of(ok) == 200, ok
    assert thief.seen == []  # type: ignore[attr-defined]
    assert engine.seen == ["/health"]  # type: ignore[attr-defined]
