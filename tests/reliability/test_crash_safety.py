"""Nothing lost (SPEC §13): a gateway killed (SIGKILL) while the engine holds an add or an
upload keeps that data after a restart; one killed mid-upload leaves nothing `gc` cannot clean.

The engine is a scripted fake that takes the add and hangs; the test kills the gateway at that
moment, replays the add the fake received into the real dev engine, restarts the gateway on the
same storage, and searches.
"""

from __future__ import annotations

import base64
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.processes import ROOT, GatewayProcess, dev_engine, gateway
from tests.reliability.scripted_engine import ADD, FLUSH, Hang, Received, ScriptedEngine
from tests.reliability.support import PNG, auth, count, db_rows, path_of, user_files

pytestmark = pytest.mark.reliability


def post_in_background(pool: ThreadPoolExecutor, url: str, key: str, **kwargs: Any
                       ) -> Future[httpx.Response]:
    return pool.submit(httpx.post, url, headers=auth(key), timeout=30, **kwargs)


def kill(gw: GatewayProcess) -> None:
    gw.proc.send_signal(signal.SIGKILL)
    assert gw.proc.wait(timeout=10) == -signal.SIGKILL


def replay(engine_url: str, received: Received) -> None:
    """Give the real engine exactly what the fake one took, then flush that session."""
    headers = {k: v for k, v in received.headers.items()
               if k in ("content-type", "x-memory-user-id")}
    added = httpx.post(engine_url + received.path, content=received.body, headers=headers)
    assert added.status_code == 200, added.text
    body = received.json()
    scope = {k: body[k] for k in ("app_id", "project_id", "session_id") if k in body}
    assert httpx.post(engine_url + FLUSH, json=scope, headers=headers).status_code == 200


def kill_during_ingest(tmp: Path, path: str, **request: Any) -> tuple[str, Received]:
    """Send one request, kill the gateway while the engine holds its add; (key, the add)."""
    with ScriptedEngine().serving() as fake, gateway(tmp, fake.url) as gw:
        fake.script[ADD] = Hang()
        key = gw.key("alice")
        with ThreadPoolExecutor(1) as pool:
            pending = post_in_background(pool, gw.url + path, key, **request)
            assert fake.hung.wait(15), "the engine never received the add"
            # The intent is committed and the files are written before the engine is called.
            assert [r["kind"] for r in db_rows(tmp, "SELECT kind FROM pending_intents")] == [
                "memory_add" if path == "/memories/add" else "resource_upload"]
            assert count(tmp, "memory_attachments") == 0
            kill(gw)
            with pytest.raises(httpx.TransportError):
                pending.result()
        [add] = fake.requests_to(ADD)
        return key, add


def search(gw: GatewayProcess, key: str, query: str) -> list[dict[str, Any]]:
    found = httpx.post(gw.url + "/memories/search", headers=auth(key), timeout=20,
                       json={"query": query, "user_id": "alice"})
    assert found.status_code == 200, found.text
    return [a for r in found.json()["results"] for a in r["attachments"]]


def test_add_killed_while_the_engine_holds_it_keeps_its_attachments(tmp_path: Path) -> None:
    body = {"session_id": "crash-add", "messages": [{
        "role": "user", "sender_id": "alice", "timestamp": 1_780_000_000_000, "content": [
            {"type": "text", "text": "the lighthouse at dusk: lighthouse.png, harbour.jpg"},
            {"type": "image", "base64": base64.b64encode(PNG).decode(), "name": "lighthouse.png",
             "ext": "png"},
            {"type": "image", "uri": "https://cdn.example/harbour.jpg"}]}]}
    key, add = kill_during_ingest(tmp_path, "/memories/add", json=body)
    [written] = user_files(tmp_path, "alice")
    assert written.read_bytes() == PNG

    with dev_engine(tmp_path) as engine_url:
        replay(engine_url, add)
        with gateway(tmp_path, engine_url) as gw:
            assert count(tmp_path, "pending_intents") == 0
            mappings = db_rows(tmp_path, "SELECT name, source FROM memory_attachments "
                                         "WHERE deleted_at IS NULL ORDER BY name")
            assert [(m["name"], m["source"]) for m in mappings] == [
                ("harbour.jpg", "memory_add_uri"), ("lighthouse.png", "memory_add_base64")]
            attachments = {a["name"]: a for a in search(gw, key, "lighthouse")}
            assert set(attachments) == {"lighthouse.png", "harbour.jpg"}
            assert attachments["harbour.jpg"]["internal_uri"] == "https://cdn.example/harbour.jpg"
            assert path_of(attachments["lighthouse.png"]["internal_uri"]) == written
            assert path_of(attachments["lighthouse.png"]["internal_uri"]).read_bytes() == PNG


def test_upload_killed_while_the_engine_holds_it_keeps_the_resource(tmp_path: Path) -> None:
    data = PNG + b"kill-upload"
    key, add = kill_during_ingest(tmp_path, "/resources",
                                  files={"file": ("crash-upload.png", data, "image/png")})
    assert add.json()["messages"][0]["content"][1]["name"] == "crash-upload.png"

    with dev_engine(tmp_path) as engine_url:
        replay(engine_url, add)
        with gateway(tmp_path, engine_url) as gw:
            assert count(tmp_path, "pending_intents") == 0
            listed = httpx.get(gw.url + "/resources", headers=auth(key)).json()["items"]
            assert [r["name"] for r in listed] == ["crash-upload.png"]
            content = httpx.get(f"{gw.url}/resources/{listed[0]['id']}/content", headers=auth(key))
            assert content.status_code == 200 and content.content == data
            [attachment] = search(gw, key, "crash-upload.png")
            assert attachment["name"] == "crash-upload.png"
            assert path_of(attachment["internal_uri"]).read_bytes() == data


def test_upload_killed_mid_body_leaves_no_row_and_gc_removes_its_file(tmp_path: Path) -> None:
    boundary = "reliability-boundary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"half.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    total = len(head) + 4 * 1024 * 1024
    with ScriptedEngine().serving() as fake, gateway(tmp_path, fake.url) as gw:
        key = gw.key("alice")
        port = int(gw.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(
                f"POST /resources HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
                f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
                f"Content-Length: {total}\r\n\r\n".encode() + head + b"x" * 256 * 1024)
            deadline = time.monotonic() + 10
            while not user_files(tmp_path, "alice") and time.monotonic() < deadline:
                time.sleep(0.02)
            [partial] = user_files(tmp_path, "alice")
            assert partial.name.startswith(".part-")
            kill(gw)
        assert fake.requests_to(ADD) == []
    with gateway(tmp_path, fake.url) as restarted:
        assert count(tmp_path, "pending_intents") == 0
        assert count(tmp_path, "resources") == count(tmp_path, "memory_attachments") == 0
        assert user_files(tmp_path, "alice") == [partial]  # young: gc's grace period spares it
    collected = subprocess.run([sys.executable, "-m", "gateway", "gc", "--grace-seconds", "0"],
                               env=restarted.env, cwd=ROOT, capture_output=True, text=True,
                               timeout=60)
    assert collected.returncode == 0, collected.stderr
    assert collected.stdout.startswith("gc: removed 1 orphan file(s) and 1 empty folder(s)")
    assert user_files(tmp_path, "alice") == []
