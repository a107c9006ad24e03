"""Limits answer before work is done (SPEC §4, §13): each one in the one error shape, with no
file written, no row made and nothing forwarded to the engine.

In process with small limits: request bodies (declared and streamed), application JSON bodies,
uploads, decoded inline files, multipart part/field counts and sizes, JSON nesting. Against a real
process: a 413 arrives while the client is still sending, so the body is never read in full.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from gateway.config import Settings
from gateway.routes.common import MAX_BODY_DEPTH
from tests.attachment_helpers import engine_ok, files_under, rows
from tests.conftest import ENGINE
from tests.processes import GatewayProcess, free_port, gateway
from tests.reliability.support import assert_error_shape, auth

pytestmark = [pytest.mark.reliability, pytest.mark.both_databases]

MAX_BODY = 16 * 1024
MAX_JSON_BODY = 4 * 1024
MAX_UPLOAD = 8 * 1024
MAX_INLINE = 1024


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings().with_values(
        upstream={"base_url": ENGINE},
        storage={"root": str(tmp_path / "storage"), "database": str(tmp_path / "gw.db")},
        limits={"max_body_bytes": MAX_BODY, "max_json_body_bytes": MAX_JSON_BODY,
                "max_upload_bytes": MAX_UPLOAD, "max_inline_file_bytes": MAX_INLINE},
    )


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


def add_body(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"session_id": "limits", **extra, "messages": [
        {"role": "user", "sender_id": "alice", "content": [{"type": "text", "text": "x"},
                                                           *items]}]}


def multipart(*parts: tuple[str, str | None, bytes], boundary: str = "B") -> bytes:
    out = b""
    for name, filename, data in parts:
        disposition = f'form-data; name="{name}"' + (
            f'; filename="{filename}"' if filename is not None else "")
        head = f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n"
        out += head.encode() + data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


async def dribble(data: bytes) -> AsyncIterator[bytes]:
    """A body of unknown length (chunked): only the streamed count can stop it."""
    for start in range(0, len(data), 1024):
        yield data[start:start + 1024]


FILE = ("file", "a.bin", b"ok")
MULTIPART = {"Content-Type": "multipart/form-data; boundary=B"}
JSON = {"Content-Type": "application/json"}
B64_OVER = base64.b64encode(b"x" * (MAX_INLINE + 1)).decode()

# (name, method, path, body, headers, status, code, field)
CASES: list[tuple[str, str, str, Any, dict[str, str], int, str, str | None]] = [
    ("add body over max_body_bytes (declared)", "POST", "/memories/add",
     json.dumps(add_body(pad="x" * MAX_BODY)).encode(), JSON, 413, "payload_too_large", None),
    ("add body over max_body_bytes (streamed)", "POST", "/memories/add",
     dribble(json.dumps(add_body(pad="x" * MAX_BODY)).encode()), JSON, 413,
     "payload_too_large", None),
    ("inline file over max_inline_file_bytes", "POST", "/memories/add",
     json.dumps(add_body({"type": "image", "base64": B64_OVER, "name": "big.png"})).encode(),
     JSON, 413, "payload_too_large", "messages[0].content[1].base64"),
    ("invalid base64", "POST", "/memories/add",
     json.dumps(add_body({"type": "image", "base64": "abc$", "name": "bad.png"})).encode(),
     JSON, 422, "validation_error", "messages[0].content[1].base64"),
    ("add nested too deep", "POST", "/memories/add",
     json.dumps(add_body(extra=nested(MAX_BODY_DEPTH))).encode(), JSON, 422,
     "validation_error", "body"),
    ("add nested beyond the decoder", "POST", "/memories/add",
     b'{"a":' * 2000 + b"1" + b"}" * 2000, JSON, 422, "validation_error", "body"),
    ("search nested too deep", "POST", "/memories/search",
     json.dumps({"query": "x", "filters": nested(MAX_BODY_DEPTH)}).encode(), JSON, 422,
     "validation_error", "body"),
    ("agent body over max_json_body_bytes", "POST", "/agents",
     json.dumps({"name": "a", "profile": {"pad": "x" * MAX_JSON_BODY}}).encode(), JSON, 413,
     "payload_too_large", None),
    ("agent body nested too deep", "POST", "/agents",
     json.dumps({"name": "a", "profile": nested(MAX_BODY_DEPTH)}).encode(), JSON, 422,
     "validation_error", "body"),
    ("agent profile nested deeper than a stored field may be", "POST", "/agents",
     json.dumps({"name": "a", "profile": nested(40)}).encode(), JSON, 422,
     "validation_error", "profile"),
    ("message body over max_json_body_bytes", "POST", "/conversations/c_x/messages",
     json.dumps({"clientMessageId": "m", "role": "user", "content": "x" * MAX_JSON_BODY}
                ).encode(), JSON, 413, "payload_too_large", None),
    ("upload over max_upload_bytes", "POST", "/resources",
     dribble(multipart(("file", "big.bin", b"x" * (MAX_UPLOAD + 1)))), MULTIPART, 413,
     "payload_too_large", None),
    ("upload with too many form fields", "POST", "/resources",
     multipart(*[(f"f{i}", None, b"v") for i in range(17)]), MULTIPART, 422,
     "validation_error", "body"),
    ("upload with too many parts", "POST", "/resources",
     multipart(*[(f"f{i}", None, b"v") for i in range(17)], FILE), MULTIPART, 422,
     "validation_error", "body"),
    ("upload with a form field over 64 KiB", "POST", "/resources",
     multipart(("name", None, b"n" * (64 * 1024 + 1)), FILE), MULTIPART, 413,
     "payload_too_large", "name"),
    ("upload with two files", "POST", "/resources",
     multipart(FILE, ("file", "b.bin", b"again")), MULTIPART, 422, "validation_error", "file"),
    ("proxied body over max_body_bytes", "POST", "/api/v2/memory/get",
     json.dumps({"pad": "x" * MAX_BODY}).encode(), JSON, 413, "payload_too_large", None),
    ("proxied body nested beyond the decoder", "POST", "/api/v2/memory/get",
     b'{"a":' * 2000 + b"1" + b"}" * 2000, JSON, 422, "validation_error", "body"),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status", "code", "field"),
    [case[1:] for case in CASES], ids=[case[0] for case in CASES],
)
async def test_a_limit_answers_in_the_error_shape_and_leaves_nothing(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings, method: str,
    path: str, body: Any, headers: dict[str, str], status: int, code: str, field: str | None,
) -> None:
    engine_ok(engine)
    forwarded = engine.route().mock(return_value=httpx.Response(200, json={}))
    conversation = ""
    if path.startswith("/conversations/"):
        agent = (await alice.post("/agents", json={"name": "a"})).json()
        conversation = (await alice.get(f"/agents/{agent['id']}/conversation")).json()[
            "conversationId"]
        path = path.replace("c_x", conversation)
    response = await alice.request(method, path, content=body, headers=headers)
    error = assert_error_shape(response, status, code)
    assert error.get("field") == field
    assert engine.calls.call_count == 0 and not forwarded.called
    assert files_under(settings.storage.root) == []
    for table in ("resources", "memory_attachments", "pending_intents", "memory_sessions"):
        assert rows(settings, f"SELECT * FROM {table}") == [], table
    assert len(rows(settings, "SELECT * FROM agents")) == (1 if conversation else 0)
    assert rows(settings, "SELECT * FROM conversation_messages") == []


async def test_the_deepest_accepted_body_is_forwarded_unchanged(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    routes = engine_ok(engine)
    raw = json.dumps(add_body(extra=nested(MAX_BODY_DEPTH - 1))).encode()  # 64 deep
    response = await alice.post("/memories/add", content=raw, headers=JSON)
    assert response.status_code == 200
    assert routes["add"].calls.last.request.content == raw


def read_response(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "connection closed before an answer"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(head.split(b" ")[1]), json.loads(rest[:length])


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, str]]:
    """One gateway process (its engine unreachable: nothing here reaches it) and alice's key,
    for the module's tests of bodies refused while still being sent."""
    tmp = tmp_path_factory.mktemp("oversized")
    with gateway(tmp, f"http://127.0.0.1:{free_port()}") as gw:
        yield gw, gw.key("alice")


@pytest.mark.parametrize(("path", "content_type"), [
    ("/resources", "multipart/form-data; boundary=B"),
    ("/memories/add", "application/json"),
    ("/agents", "application/json"),
])
def test_an_oversized_body_is_refused_while_it_is_still_being_sent(
    live: tuple[GatewayProcess, str], path: str, content_type: str
) -> None:
    """1 GiB declared, 1 KiB sent: the 413 comes back without the rest ever being sent."""
    gw, key = live
    port = int(gw.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n"
                     f"Authorization: {auth(key)['Authorization']}\r\n"
                     f"Content-Type: {content_type}\r\nContent-Length: {2**30}\r\n\r\n"
                     .encode() + b"x" * 1024)
        status, body = read_response(sock)
    assert status == 413 and body["error"]["code"] == "payload_too_large"
    assert files_under(Path(gw.env["MEMORY_GATEWAY_STORAGE_ROOT"]) / "alice") == []
