"""`upstream.flavor = mem0`: the open-source REST server's `/memories` and `/search`, end to end
against a respx fake that checks what mem0 is sent."""

from __future__ import annotations

import base64
from pathlib import Path

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
    return settings.with_values(upstream={"flavor": "mem0"})


def mem0_add(engine: respx.MockRouter) -> respx.Route:
    return answer(engine, "/memories", "mem0_add")


async def native_add(client: httpx.AsyncClient, user: str, run_id: str) -> httpx.Response:
    return await client.post("/memories", json={
        "user_id": user, "run_id": run_id, "messages": [
            {"role": "user", "content": "the harbour at dawn"},
            {"role": "user", "content": {"type": "image_url",
                                         "image_url": {"url": "https://cdn.example/harbour.png"}}},
        ]})


def test_paths_follow_the_flavour_unless_set(settings: Settings) -> None:
    upstream = settings.upstream
    assert (upstream.add_path, upstream.search_path, upstream.flush_path) == (
        "/memories", "/search", "")
    custom = Settings().with_values(upstream={"flavor": "mem0", "search_path": "/v1/find"})
    assert (custom.upstream.add_path, custom.upstream.search_path) == ("/memories", "/v1/find")


async def test_native_add_names_the_file_and_records_it(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    route = mem0_add(engine)
    response = await native_add(alice, "alice", "trip-1")
    assert response.status_code == 200
    assert response.json()["results"][0]["event"] == "ADD"
    request, body = sent(route)
    assert request.url.path == "/memories" and request.headers[USER_HEADER] == "alice"
    assert body["messages"] == [
        {"role": "user", "content": "the harbour at dawn"},
        {"role": "user", "content": "Attached file: harbour.png"},
        {"role": "user", "content": {"type": "image_url",
                                     "image_url": {"url": "https://cdn.example/harbour.png"}}},
    ]
    assert body["metadata"] == {"attachment_names": ["harbour.png"]}
    assert (body["user_id"], body["run_id"]) == ("alice", "trip-1")
    [mapping] = rows(settings, "SELECT * FROM memory_attachments")
    assert (mapping["session_id"], mapping["name"]) == ("trip-1", "harbour.png")
    assert mapping["internal_uri"] == "https://cdn.example/harbour.png"


async def test_native_add_of_plain_text_is_forwarded_byte_for_byte(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = mem0_add(engine)
    raw = b'{"messages": [{"role": "user", "content": "hi"}], "user_id": "alice"}'
    response = await alice.post("/memories", content=raw,
                                headers={"Content-Type": "application/json"})
    assert response.status_code == 200
    assert route.calls.last.request.content == raw


async def test_gateway_add_becomes_a_mem0_payload(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    route = mem0_add(engine)
    response = await alice.post("/memories/add", json={
        "session_id": "trip-1", "agent_id": None, "messages": [
            {"role": "user", "sender_id": "alice", "timestamp": 1, "content": [
                {"type": "text", "text": "the harbour at dawn"},
                {"type": "image", "base64": B64, "name": "harbour.png"}]},
            {"role": "assistant", "sender_id": "bot", "content": "lovely"}]})
    assert response.status_code == 200
    request, body = sent(route)
    assert request.url.path == "/memories" and request.headers[USER_HEADER] == "alice"
    assert body == {
        "messages": [
            {"role": "user", "content": "the harbour at dawn\nAttached file: harbour.png"},
            {"role": "assistant", "content": "lovely"}],
        "user_id": "alice", "run_id": "trip-1",
        "metadata": {"attachment_names": ["harbour.png"]},
    }
    [stored] = files_under(Path(settings.storage.root))
    assert stored.name == "harbour.png" and stored.read_bytes() == PNG


async def test_native_search_adds_attachments_and_drops_other_users_runs(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    mem0_add(engine)
    assert (await native_add(alice, "alice", "trip-1")).status_code == 200
    assert (await native_add(bob, "bob", "bobs-trip")).status_code == 200
    route = answer(engine, "/search", "mem0_search")
    raw = b'{"query": "harbour", "user_id": "alice"}'
    response = await alice.post("/search", content=raw,
                                headers={"Content-Type": "application/json"})
    assert response.status_code == 200
    assert route.calls.last.request.content == raw
    results = response.json()["results"]
    assert [r.get("run_id") for r in results] == ["trip-1", None]
    [attachment] = results[0]["attachments"]
    assert attachment == {"type": "image", "name": "harbour.png",
                          "internal_uri": "https://cdn.example/harbour.png"}
    assert results[1]["attachments"] == []
    assert response.json()["relations"] == []


async def test_gateway_search_maps_and_normalises(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    mem0_add(engine)
    await native_add(alice, "alice", "trip-1")
    await native_add(bob, "bob", "bobs-trip")
    route = answer(engine, "/search", "mem0_search")
    response = await alice.post("/memories/search", json={
        "query": "harbour", "top_k": 5, "filters": {"session_id": "trip-1"}})
    assert response.status_code == 200
    request, body = sent(route)
    assert request.url.path == "/search" and request.headers[USER_HEADER] == "alice"
    # mem0's REST server reads `top_k` (a `limit` would be ignored)
    assert body == {"query": "harbour", "user_id": "alice", "run_id": "trip-1", "top_k": 5}
    page = response.json()
    assert page["total"] == 2  # bob's run is gone
    first = page["results"][0]
    assert first["session_id"] == "trip-1" and first["type"] == "memory"
    assert first["content"] == "Likes the harbour at dawn" and first["score"] == 0.87
    assert [a["name"] for a in first["attachments"]] == ["harbour.png"]


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/memories", {"user_id": "bob", "messages": [{"role": "user", "content": "x"}]}),
    ("POST", "/memories", {"run_id": "bobs-trip", "messages": [{"role": "user", "content": "x"}]}),
    ("POST", "/search", {"query": "x", "run_id": "bobs-trip"}),
    ("POST", "/search", {"query": "x", "filters": {"AND": [{"user_id": "bob"}]}}),
    ("POST", "/search", {"query": "x", "filters": {"user_id": {"ne": "alice"}}}),
    ("GET", "/memories?run_id=bobs-trip", None),
])
async def test_naming_another_user_or_their_run_is_403_and_not_forwarded(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter,
    method: str, path: str, body: dict | None,
) -> None:
    mem0_add(engine)
    assert (await native_add(bob, "bob", "bobs-trip")).status_code == 200
    calls = len(engine.calls)
    response = await alice.request(method, path, json=body)
    assert response.status_code == 403, response.text
    assert len(engine.calls) == calls


async def test_other_methods_on_mem0_paths_pass_through(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = engine.get("/memories").mock(return_value=httpx.Response(200, json={"results": []}))
    response = await alice.get("/memories", params={"user_id": "alice"})
    assert response.status_code == 200 and route.called


async def test_upload_is_ingested_by_name_without_a_flush(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = mem0_add(engine)
    response = await alice.post("/resources", files={"file": ("harbour.png", PNG, "image/png")})
    assert response.status_code == 201
    [call] = route.calls
    request, body = sent(route)
    assert body["messages"] == [{"role": "user", "content": "Uploaded file: harbour.png"}]
    assert body["run_id"] == response.json()["session_id"] and body["user_id"] == "alice"
    assert "file://" not in request.content.decode()
    assert len(engine.calls) == 1  # mem0 has no flush
