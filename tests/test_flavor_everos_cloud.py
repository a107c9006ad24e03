"""`upstream.flavor = everos-cloud` (and `everos-cloud-v1`): the Cloud's v2 API and its legacy v1
memories API, end to end against a respx fake that checks what the Cloud is sent."""

from __future__ import annotations

import base64

import httpx
import pytest
import respx
from everos_cloud.models import SuccessEnvelopeSearchData

from gateway.config import Settings
from tests.attachment_helpers import PNG, rows
from tests.conftest import StartGateway, client_for
from tests.engine_fixtures import USER_HEADER, answer, recorded, sent

# The route suite runs once per production upstream client over a loopback engine (conftest).
pytestmark = [pytest.mark.both_clients, pytest.mark.both_databases]

B64 = base64.b64encode(PNG).decode()
V2_ADD, V2_SEARCH, V2_FLUSH = "/api/v2/memory/add", "/api/v2/memory/search", "/api/v2/memory/flush"
V1_ADD, V1_SEARCH = "/api/v1/memories", "/api/v1/memories/search"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.with_values(upstream={"flavor": "everos-cloud"})


def v2_body(session: str, sender: str) -> dict:
    return {"session_id": session, "async_mode": True, "messages": [
        {"sender_id": sender, "role": "user", "timestamp": 1_759_389_300_000, "content": [
            {"type": "text", "text": "the harbour at dawn"},
            {"type": "image", "base64": B64, "name": "harbour.png"}]}]}


def v1_body(session: str, user: str) -> dict:
    return {"user_id": user, "session_id": session, "messages": [
        {"role": "user", "sender_id": user, "timestamp": 1_759_389_300_000, "content": [
            {"type": "image", "uri": "https://cdn.example/p/harbour.png", "name": "harbour.png"}]}]}


def test_recorded_v2_answer_parses_with_the_cloud_sdk_models() -> None:
    parsed = SuccessEnvelopeSearchData.from_dict(recorded("everos_cloud_v2_search"))
    assert parsed is not None and parsed.data.episodes[0].session_id == "trip-1"


async def test_v2_add_names_the_file_and_keeps_the_cloud_answer(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    route = answer(engine, V2_ADD, "everos_cloud_v2_add", status=202)
    response = await alice.post(V2_ADD, json=v2_body("trip-1", "alice"))
    assert response.status_code == 202
    assert response.json() == recorded("everos_cloud_v2_add")
    request, body = sent(route)
    assert request.url.path == V2_ADD and request.headers[USER_HEADER] == "alice"
    content = body["messages"][0]["content"]
    assert [item.get("text") for item in content] == [
        "the harbour at dawn", "Attached file: harbour.png", None]
    assert content[2]["base64"] == B64 and body["async_mode"] is True
    [mapping] = rows(settings, "SELECT * FROM memory_attachments")
    assert (mapping["session_id"], mapping["name"]) == ("trip-1", "harbour.png")


async def test_v2_search_adds_attachments_and_drops_other_users(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    answer(engine, V2_ADD, "everos_cloud_v2_add", status=202)
    await alice.post(V2_ADD, json=v2_body("trip-1", "alice"))
    await bob.post(V2_ADD, json=v2_body("bobs-trip", "bob"))
    answer(engine, V2_SEARCH, "everos_cloud_v2_search")
    response = await alice.post(V2_SEARCH, json={"query": "harbour", "user_id": "alice"})
    data = response.json()["data"]
    assert [e["session_id"] for e in data["episodes"]] == ["trip-1"]
    [attachment] = data["episodes"][0]["attachments"]
    assert attachment["name"] == "harbour.png" and attachment["internal_uri"].startswith("file:")
    assert data["unprocessed_messages"][0]["attachments"] == [attachment]
    assert data["profiles"][0]["attachments"] == []
    assert SuccessEnvelopeSearchData.from_dict(response.json()) is not None


async def test_gateway_add_and_search_speak_v2(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    added = answer(engine, V2_ADD, "everos_cloud_v2_add", status=202)
    body = {**v2_body("trip-1", "alice"), "app_id": "photos"}
    assert (await alice.post("/memories/add", json=body)).status_code == 202
    _, forwarded = sent(added)
    assert forwarded["app_id"] == "photos"
    assert forwarded["messages"][0]["content"][1] == {
        "type": "text", "text": "Attached file: harbour.png"}
    searched = answer(engine, V2_SEARCH, "everos_cloud_v2_search")
    raw = b'{"query": "harbour", "app_id": "photos", "user_id": "alice"}'
    response = await alice.post("/memories/search", content=raw,
                                headers={"Content-Type": "application/json"})
    assert searched.calls.last.request.content == raw
    assert response.json()["total"] == 4


async def test_v1_add_and_search_keep_their_paths_and_shapes(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter,
    settings: Settings,
) -> None:
    added = answer(engine, V1_ADD, "everos_cloud_v1_add")
    assert (await alice.post(V1_ADD, json=v1_body("trip-1", "alice"))).status_code == 200
    assert (await bob.post(V1_ADD, json=v1_body("bobs-trip", "bob"))).status_code == 200
    request, body = sent(added, 0)
    assert request.url.path == V1_ADD and request.headers[USER_HEADER] == "alice"
    assert body["messages"][0]["content"][0] == {
        "type": "text", "text": "Attached file: harbour.png"}
    searched = answer(engine, V1_SEARCH, "everos_cloud_v1_search")
    raw = b'{"query": "harbour", "filters": {"user_id": "alice"}}'
    response = await alice.post(V1_SEARCH, content=raw,
                                headers={"Content-Type": "application/json"})
    assert searched.calls.last.request.url.path == V1_SEARCH
    assert searched.calls.last.request.content == raw
    data = response.json()["data"]
    assert [e["session_id"] for e in data["episodes"]] == ["trip-1"]
    assert [a["name"] for a in data["episodes"][0]["attachments"]] == ["harbour.png"]
    assert [a["internal_uri"] for a in data["raw_messages"][0]["attachments"]] == [
        "https://cdn.example/p/harbour.png"]
    assert data["agent_memory"]["cases"][0]["attachments"] == []
    assert data["query"] == recorded("everos_cloud_v1_search")["data"]["query"]


@pytest.mark.parametrize(("path", "body"), [
    (V1_ADD, v1_body("mine", "bob")),
    (V1_ADD, v1_body("bobs-trip", "alice")),
    (V1_SEARCH, {"query": "x", "filters": {"user_id": "bob"}}),
    (V1_SEARCH, {"query": "x", "filters": {"AND": [{"user_id": "alice"},
                                                   {"session_id": "bobs-trip"}]}}),
    (V2_SEARCH, {"query": "x", "filters": {"OR": [{"user_id": {"in": ["alice", "bob"]}}]}}),
    (V2_ADD, v2_body("trip-1", "user")),  # the 1.x SDK's default sender_id is the role
])
async def test_naming_another_user_or_session_is_403_and_not_forwarded(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter,
    path: str, body: dict,
) -> None:
    answer(engine, V1_ADD, "everos_cloud_v1_add")
    await bob.post(V1_ADD, json=v1_body("bobs-trip", "bob"))
    calls = len(engine.calls)
    response = await alice.post(path, json=body)
    assert response.status_code == 403, response.text
    assert len(engine.calls) == calls


async def test_uploads_reach_the_cloud_by_name_then_flush(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    added = answer(engine, V2_ADD, "everos_cloud_v2_add", status=202)
    flushed = engine.post(V2_FLUSH).mock(return_value=httpx.Response(200, json={}))
    response = await alice.post("/resources", files={"file": ("harbour.png", PNG, "image/png")})
    assert response.status_code == 201
    request, body = sent(added)
    assert body["messages"][0]["content"] == [{"type": "text",
                                               "text": "Uploaded file: harbour.png"}]
    assert "file://" not in request.content.decode()  # the Cloud cannot read our disk
    _, flush = sent(flushed)
    assert flush["session_id"] == response.json()["session_id"]


async def test_v1_flavour_maps_the_gateway_paths_to_v1(
    settings: Settings, engine: respx.MockRouter, make_key, start_gateway: StartGateway
) -> None:
    v1 = settings.with_values(upstream={"flavor": "everos-cloud-v1"})
    assert (v1.upstream.add_path, v1.upstream.flush_path) == (V1_ADD, "/api/v1/memories/flush")
    added = answer(engine, V1_ADD, "everos_cloud_v1_add")
    searched = answer(engine, V1_SEARCH, "everos_cloud_v1_search")
    flushed = engine.post("/api/v1/memories/flush").mock(return_value=httpx.Response(200))
    async with start_gateway(v1) as app, client_for(app, make_key("alice")) as alice:
        body = v2_body("trip-1", "alice")
        del body["messages"][0]["timestamp"]
        assert (await alice.post("/memories/add", json=body)).status_code == 200
        request, sent_body = sent(added)
        assert request.url.path == V1_ADD
        assert sent_body["user_id"] == "alice" and sent_body["session_id"] == "trip-1"
        assert isinstance(sent_body["messages"][0]["timestamp"], int)
        assert sent_body["async_mode"] is True
        assert sent_body["messages"][0]["content"][1]["text"] == "Attached file: harbour.png"
        response = await alice.post("/memories/search", json={
            "query": "harbour", "top_k": 10, "filters": {"session_id": "trip-1"}})
        _, search = sent(searched)
        assert search == {"query": "harbour", "top_k": 10,
                          "filters": {"user_id": "alice", "session_id": "trip-1"},
                          "memory_types": ["episodic_memory", "profile", "raw_message"]}
        results = response.json()["results"]
        assert [r["type"] for r in results] == [
            "episode", "episode", "profile", "raw_message", "agent_case"]
        assert [a["name"] for a in results[0]["attachments"]] == ["harbour.png"]
        upload = await alice.post("/resources", files={"file": ("a.png", PNG, "image/png")})
        assert upload.status_code == 201
        _, flush = sent(flushed)
        assert flush == {"user_id": "alice", "session_id": upload.json()["session_id"]}
