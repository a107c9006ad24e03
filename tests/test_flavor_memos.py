"""`upstream.flavor = memos`: MemOS's `/product/add` and `/product/search`, end to end against a
respx fake that checks what MemOS is sent."""

from __future__ import annotations

import base64

import httpx
import pytest
import respx

from gateway.config import Settings
from tests.attachment_helpers import PNG, files_under, rows
from tests.engine_fixtures import USER_HEADER, answer, sent

# The route suite runs once per production upstream client over a loopback engine (conftest).
pytestmark = [pytest.mark.both_clients, pytest.mark.both_databases]

B64 = base64.b64encode(PNG).decode()


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.with_values(upstream={"flavor": "memos"})


async def native_add(client: httpx.AsyncClient, user: str, session: str) -> httpx.Response:
    return await client.post("/product/add", json={
        "user_id": user, "session_id": session, "async_mode": "sync", "messages": [
            {"role": "user", "chat_time": "2026-10-02 07:15", "content": [
                {"type": "text", "text": "the harbour at dawn"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
            ]},
            {"type": "file", "file": {"file_data": "https://cdn.example/notes/tides.pdf",
                                      "filename": "tides.pdf"}},
        ]})


async def test_native_add_names_each_file_and_records_both(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    route = answer(engine, "/product/add", "memos_add")
    response = await native_add(alice, "alice", "trip-1")
    assert response.status_code == 200 and response.json()["code"] == 200
    request, body = sent(route)
    assert request.url.path == "/product/add" and request.headers[USER_HEADER] == "alice"
    assert [part.get("text") for part in body["messages"][0]["content"]] == [
        "the harbour at dawn", "Attached file: attachment.png", None]
    assert body["messages"][1] == {"type": "text", "text": "Attached file: tides.pdf"}
    assert body["messages"][2]["file"]["filename"] == "tides.pdf"
    assert (body["session_id"], body["async_mode"]) == ("trip-1", "sync")
    mappings = {r["name"]: r for r in rows(settings, "SELECT * FROM memory_attachments")}
    assert mappings["tides.pdf"]["internal_uri"] == "https://cdn.example/notes/tides.pdf"
    assert mappings["attachment.png"]["source"] == "memory_add_base64"
    [stored] = files_under(settings.storage.root)
    assert stored.read_bytes() == PNG


async def test_gateway_add_becomes_a_memos_payload(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = answer(engine, "/product/add", "memos_add")
    response = await alice.post("/memories/add", json={
        "session_id": "trip-1", "app_id": "photos", "messages": [
            {"role": "user", "sender_id": "alice", "timestamp": 1_759_389_300_000, "content": [
                {"type": "text", "text": "the harbour at dawn"},
                {"type": "image", "base64": B64, "name": "harbour.png"},
                {"type": "pdf", "uri": "https://cdn.example/tides.pdf"},
                {"type": "doc", "uri": "s3://bucket/private/log.txt"}]}]})
    assert response.status_code == 200
    request, body = sent(route)
    assert request.url.path == "/product/add" and request.headers[USER_HEADER] == "alice"
    assert body == {
        "user_id": "alice", "session_id": "trip-1", "info": {"app_id": "photos"},
        "messages": [{"role": "user", "chat_time": "2025-10-02T07:15:00+00:00", "content": [
            {"type": "text", "text": "the harbour at dawn"},
            {"type": "text", "text": "Attached file: harbour.png"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
            {"type": "text", "text": "Attached file: tides.pdf"},
            {"type": "file", "file": {"file_data": "https://cdn.example/tides.pdf",
                                      "filename": "tides.pdf"}},
            {"type": "text", "text": "Attached file: log.txt"},  # s3:// is not MemOS's to read
        ]}],
    }


async def test_native_search_keeps_memos_shape_with_attachments(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    answer(engine, "/product/add", "memos_add")
    await native_add(alice, "alice", "trip-1")
    await native_add(bob, "bob", "bobs-trip")
    answer(engine, "/product/search", "memos_search")
    await alice.post("/memories/add", json={"session_id": "trip-1", "messages": [
        {"role": "user", "content": [{"type": "image", "uri": "https://cdn.example/harbour.png"}]}]})
    response = await alice.post("/product/search", json={"query": "harbour", "user_id": "alice"})
    assert response.status_code == 200
    data = response.json()["data"]
    [cube] = data["text_mem"]
    assert [m["metadata"]["session_id"] for m in cube["memories"]] == ["trip-1"]
    assert [a["name"] for a in cube["memories"][0]["attachments"]] == ["harbour.png"]
    assert data["pref_mem"][0]["memories"][0]["attachments"] == []


async def test_gateway_search_maps_and_normalises(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    answer(engine, "/product/add", "memos_add")
    await alice.post("/memories/add", json={"session_id": "trip-1", "messages": [
        {"role": "user", "content": [{"type": "image", "uri": "https://cdn.example/harbour.png"}]}]})
    route = answer(engine, "/product/search", "memos_search")
    response = await alice.post("/memories/search", json={
        "query": "harbour", "top_k": 3, "filters": {"session_id": "trip-1"}})
    assert response.status_code == 200
    request, body = sent(route)
    assert request.url.path == "/product/search" and request.headers[USER_HEADER] == "alice"
    assert body == {"query": "harbour", "user_id": "alice", "session_id": "trip-1", "top_k": 3}
    first = response.json()["results"][0]
    assert first["type"] == "text_mem" and first["session_id"] == "trip-1"
    assert first["content"] == "User photographed the harbour at dawn."
    assert first["score"] == 0.83 and first["created_at"] == "2026-10-02T07:15:00.000000"
    assert [a["name"] for a in first["attachments"]] == ["harbour.png"]


@pytest.mark.parametrize("body", [
    {"user_id": "bob", "messages": []},
    {"user_id": "alice", "mem_cube_id": "bob", "messages": []},
    {"user_id": "alice", "writable_cube_ids": ["alice", "bob"], "messages": []},
    {"user_id": "alice", "session_id": "bobs-trip", "messages": []},
])
async def test_naming_another_user_cube_or_session_is_403(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter, body: dict
) -> None:
    answer(engine, "/product/add", "memos_add")
    await native_add(bob, "bob", "bobs-trip")
    calls = len(engine.calls)
    response = await alice.post("/product/add", json=body)
    assert response.status_code == 403
    assert len(engine.calls) == calls
    search = await alice.post("/product/search", json={**body, "query": "x"})
    assert search.status_code == 403 and len(engine.calls) == calls
