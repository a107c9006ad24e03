"""`/memories/add` interception (SPEC §8): every item form, strict base64, all-or-nothing."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import httpx
import pytest
import respx

from gateway.app import Gateway
from gateway.config import Settings
from tests.attachment_helpers import (
    PNG,
    engine_ok,
    rows,
    stored_bytes,
    stored_files,
    stored_uri,
)
from tests.conftest import StartGateway, client_for, on_both_stores

# The route suite runs on both databases and through both production upstream clients over a
# loopback engine, paired (conftest): SQLite with the native client, PostgreSQL with httpx; and
# with files on local disk and on S3.
pytestmark = [pytest.mark.both_databases, pytest.mark.both_clients, on_both_stores]

B64 = base64.b64encode(PNG).decode()


def add_body(*items: dict[str, Any], session: str = "s1", **extra: Any) -> dict[str, Any]:
    return {"session_id": session, **extra, "messages": [
        {"role": "user", "sender_id": "alice", "timestamp": 1760000000000,
         "content": [{"type": "text", "text": "look"}, *items]}]}


def mappings(settings: Settings) -> list[dict[str, Any]]:
    return [dict(r) for r in rows(settings, "SELECT * FROM memory_attachments ORDER BY name")]


@pytest.mark.parametrize("path", ["/memories/add", "/api/v2/memory/add", "/api/v1/memory/add"])
async def test_uri_item_maps_without_fetching_and_body_is_forwarded_unchanged(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings, path: str
) -> None:
    routes = engine_ok(engine)
    raw = json.dumps(add_body({"type": "image", "uri": "https://cdn.example/a/cat.jpg"},
                              app_id="app", project_id="proj", custom={"kept": True})).encode()
    response = await alice.post(path, content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 200
    assert response.json() == {"request_id": "r", "data": {"status": "ok"}}
    assert routes["add"].calls.last.request.content == raw
    [mapping] = mappings(settings)
    assert mapping["internal_uri"] == "https://cdn.example/a/cat.jpg"
    assert mapping["name"] == "cat.jpg" and mapping["content_type"] == "image/jpeg"
    assert mapping["source"] == "memory_add_uri"
    scope = (mapping["app_id"], mapping["project_id"], mapping["session_id"])
    assert scope == ("app", "proj", "s1")
    assert stored_files(settings) == []


async def test_base64_item_is_written_to_disk_and_mapped(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine_ok(engine)
    response = await alice.post("/memories/add", json=add_body(
        {"type": "image", "base64": B64, "name": "shot.png"}))
    assert response.status_code == 200
    [mapping] = mappings(settings)
    [stored] = stored_files(settings)
    assert stored == f"alice/memory_attachments/{mapping['id']}/shot.png"
    assert mapping["internal_uri"] == stored_uri(settings, stored)
    assert stored_bytes(settings, stored) == PNG
    assert mapping["source"] == "memory_add_base64"
    assert mapping["sha256"] == hashlib.sha256(PNG).hexdigest()
    assert mapping["content_type"] == "image/png"


async def test_uri_wins_over_base64_and_nothing_is_written(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine_ok(engine)
    await alice.post("/memories/add", json=add_body(
        {"type": "image", "uri": "s3://bucket/x.png", "base64": B64}))
    [mapping] = mappings(settings)
    assert mapping["internal_uri"] == "s3://bucket/x.png"
    assert stored_files(settings) == []


@pytest.mark.parametrize(
    ("item", "name", "content_type", "on_disk"),
    [
        ({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
         "attachment.png", "image/png", True),
        ({"type": "image_url", "image_url": {"url": "https://x.example/p/dog.webp?s=1"}},
         "dog.webp", "image/webp", False),
        ({"type": "file", "file": {"file_data": f"data:application/pdf;base64,{B64}",
                                   "filename": "report.pdf"}}, "report.pdf", "application/pdf",
         True),
        ({"type": "file", "file": {"file_data": B64, "filename": "../../notes.txt"}},
         "notes.txt", "text/plain", True),
        ({"type": "audio", "base64": B64, "ext": "mp3"}, "attachment.mp3", "audio/mpeg", True),
        ({"type": "doc", "uri": "https://x.example/files/"}, "attachment.bin",
         "application/octet-stream", False),
    ],
)
async def test_item_forms_names_and_types(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings,
    item: dict[str, Any], name: str, content_type: str, on_disk: bool
) -> None:
    engine_ok(engine)
    assert (await alice.post("/memories/add", json=add_body(item))).status_code == 200
    [mapping] = mappings(settings)
    assert (mapping["name"], mapping["content_type"]) == (name, content_type)
    stored = stored_files(settings)
    assert len(stored) == (1 if on_disk else 0)
    assert (mapping["internal_uri"] == stored_uri(settings, stored[0])) if on_disk \
        else mapping["internal_uri"].startswith("https://")


async def test_text_only_and_string_content_record_nothing(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    routes = engine_ok(engine)
    body = {"session_id": "s", "messages": [{"role": "user", "content": "plain"},
                                            {"role": "assistant", "content": [
                                                {"type": "text", "text": "hi"}]}]}
    assert (await alice.post("/memories/add", json=body)).status_code == 200
    assert routes["add"].called and mappings(settings) == []


async def test_without_session_id_forwarded_and_nothing_recorded(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    routes = engine_ok(engine)
    body = add_body({"type": "image", "base64": B64, "name": "x.png"})
    del body["session_id"]
    assert (await alice.post("/memories/add", json=body)).status_code == 200
    assert routes["add"].called
    assert mappings(settings) == [] and stored_files(settings) == []


@pytest.mark.parametrize("bad", ["not base64!!", "QUJD=", "QUJ\nD", "data:image/png,raw"])
async def test_invalid_base64_is_422_and_nothing_forwarded(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings, bad: str
) -> None:
    routes = engine_ok(engine)
    response = await alice.post("/memories/add", json=add_body(
        {"type": "image", "base64": B64, "name": "ok.png"},
        {"type": "image", "base64": bad, "name": "bad.png"}))
    assert response.status_code == 422
    assert response.json()["error"]["field"].startswith("messages[0].content[2]")
    assert not routes["add"].called
    assert mappings(settings) == [] and stored_files(settings) == []


async def test_inline_file_over_limit_is_413_before_decoding(
    settings: Settings, engine: respx.MockRouter, make_key, start_gateway: StartGateway
) -> None:
    routes = engine_ok(engine)
    limited = settings.with_values(limits={"max_inline_file_bytes": 100})
    async with start_gateway(limited) as gateway, \
            client_for(gateway, make_key("alice")) as client:
        # Invalid base64 too: the size check must answer first, without decoding.
        response = await client.post("/memories/add", json=add_body(
            {"type": "image", "base64": "!" * 400, "name": "big.png"}))
    assert response.status_code == 413
    assert not routes["add"].called


@pytest.mark.parametrize(
    "failure",
    [httpx.Response(500, json={"detail": "engine down"}), httpx.Response(422, json={"x": 1}),
     httpx.ConnectError("refused"), httpx.ReadTimeout("slow")],
)
async def test_upstream_failure_deletes_files_and_writes_no_mapping(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings, failure: Any
) -> None:
    if isinstance(failure, httpx.Response):
        engine.post("/api/v2/memory/add").mock(return_value=failure)
    else:
        engine.post("/api/v2/memory/add").mock(side_effect=failure)
    response = await alice.post("/memories/add", json=add_body(
        {"type": "image", "base64": B64, "name": "x.png"},
        {"type": "image", "uri": "https://x/y.png"}))
    if isinstance(failure, httpx.Response):  # the engine's status, in the gateway's shape
        error = response.json()["error"]
        assert response.status_code == error["upstream_status"] == failure.status_code
        assert error["code"] == "upstream_error"
        assert error["message"] == ("engine down" if failure.status_code == 500 else '{"x": 1}')
    else:
        assert response.status_code in (502, 504)
    assert mappings(settings) == []
    assert stored_files(settings) == []
    assert rows(settings, "SELECT * FROM pending_intents") == []


async def test_another_user_cannot_add_to_an_owned_session(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter,
    settings: Settings
) -> None:
    routes = engine_ok(engine)
    assert (await alice.post("/memories/add", json=add_body())).status_code == 200
    body = add_body({"type": "image", "base64": B64, "name": "b.png"})
    body["messages"][0]["sender_id"] = "bob"
    response = await bob.post("/memories/add", json=body)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "session_owned_by_another_user"
    assert routes["add"].call_count == 1
    assert stored_files(settings) == []
    # The same session id in another app is a different session.
    response = await bob.post("/memories/add", json={**body, "app_id": "other"})
    assert response.status_code == 200


async def test_repeated_uri_in_one_add_maps_once(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine_ok(engine)
    item = {"type": "image", "uri": "https://x/same.png"}
    assert (await alice.post("/memories/add", json=add_body(item, item))).status_code == 200
    assert (await alice.post("/memories/add", json=add_body(item))).status_code == 200
    assert len(mappings(settings)) == 1


async def test_non_object_body_is_422(alice: httpx.AsyncClient, engine: respx.MockRouter) -> None:
    routes = engine_ok(engine)
    for content in (b"[1,2]", b"{nope", b'"s"'):
        response = await alice.post("/memories/add", content=content,
                                    headers={"Content-Type": "application/json"})
        assert response.status_code == 422
    assert not routes["add"].called


async def test_intercepted_answer_drops_hop_by_hop_headers_like_the_proxy(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine.post("/api/v2/memory/add").mock(return_value=httpx.Response(
        200, json={"ok": 1},
        headers={"Connection": "close, X-Hop", "X-Hop": "1", "Keep-Alive": "5", "X-Kept": "y"}))
    response = await alice.post("/memories/add", json=add_body())
    assert response.status_code == 200 and response.json() == {"ok": 1}
    assert "x-hop" not in response.headers and "keep-alive" not in response.headers
    assert response.headers["x-kept"] == "y"


async def test_a_further_add_without_files_to_ones_own_session_writes_nothing(
    app: Gateway, alice: httpx.AsyncClient, engine: respx.MockRouter,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    routes = engine_ok(engine)
    assert (await alice.post("/api/v2/memory/add", json=add_body(session="mine"))).status_code \
        == 200
    db, writes = app.services.db, []
    write = db.write

    def counted() -> Any:
        writes.append(1)
        return write()

    monkeypatch.setattr(db, "write", counted)
    again = await alice.post("/api/v2/memory/add", json=add_body(session="mine"))
    assert again.status_code == 200 and routes["add"].call_count == 2
    assert writes == []  # the session is alice's already and there is nothing to record
    other = await alice.post("/api/v2/memory/add", json=add_body(session="new"))
    assert other.status_code == 200 and len(writes) == 1  # a new session is claimed
