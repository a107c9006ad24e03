"""`upstream.flavor = everos-cloud` (and `everos-cloud-v1`): the Cloud's v2 API and its legacy v1
memories API, end to end against a respx fake that checks what the Cloud is sent. The route
models (gateway/upstream/flavors/cloud_models.py) are the SDKs' request builders: v1 reads are
bounded by `filters.user_id` or `filters.group_id`, v2 ones by `user_id` or `agent_id`."""

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
from tests.flavor_requests import every_route, forwarded

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


@pytest.mark.parametrize(("path", "body", "status"), [
    (V1_ADD, v1_body("mine", "bob"), 403),
    (V1_ADD, v1_body("bobs-trip", "alice"), 403),
    (V1_SEARCH, {"query": "x", "filters": {"user_id": "bob"}}, 403),
    (V1_SEARCH, {"query": "x", "filters": {"AND": [{"user_id": "alice"},
                                                   {"session_id": "bobs-trip"}]}}, 404),
    (V2_SEARCH, {"query": "x", "filters": {"OR": [{"user_id": {"in": ["alice", "bob"]}}]}},
     403),
    (V2_ADD, v2_body("trip-1", "user"), 403),  # the 1.x SDK's default sender_id is the role
])
async def test_naming_another_user_or_session_is_refused_and_not_forwarded(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter,
    path: str, body: dict, status: int,
) -> None:
    answer(engine, V1_ADD, "everos_cloud_v1_add")
    await bob.post(V1_ADD, json=v1_body("bobs-trip", "bob"))
    calls = len(engine.calls)
    response = await alice.post(path, json=body)
    assert response.status_code == status, response.text
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


# --- route models: v1 reads are bounded by filters.user_id or filters.group_id ------------------

V1_GET, V1_DELETE = "/api/v1/memories/get", "/api/v1/memories/delete"
GROUP_ADD, GROUPS = "/api/v1/memories/group", "/api/v1/groups"


def v1_get(filters: dict, **more: object) -> dict:
    return {"filters": filters, "memory_type": "episodic_memory", **more}


async def new_group(client: httpx.AsyncClient, group: str) -> None:
    response = await client.post(GROUPS, json={"group_id": group, "name": group})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("group", ["alices-group", "nobodys-group"])
async def test_v1_reads_by_a_group_need_the_callers_group(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter, group: str
) -> None:
    route = every_route(engine)
    await new_group(alice, "alices-group")
    await new_group(bob, "bobs-group")
    before = len(route.calls)
    for filters in ({"group_id": group}, {"AND": [{"group_id": {"in": ["bobs-group", group]}}]},
                    {"user_id": "bob", "group_id": group}):
        got = await bob.post(V1_GET, json=v1_get(filters))
        found = await bob.post(V1_SEARCH, json={"query": "x", "filters": filters})
        assert (got.status_code, found.status_code) == (404, 404), (filters, got.text)
    assert forwarded(route, before) == []
    mine = await bob.post(V1_GET, json=v1_get({"group_id": "bobs-group"}))
    assert mine.status_code == 200


@pytest.mark.parametrize("filters", [
    {"session_id": "bobs-trip"}, {"OR": [{"user_id": "bob"}, {"timestamp": {"gt": 0}}]},
    {"user_id": {"in": []}}, {"and": [{"user_id": "bob"}]},
], ids=["session-only", "or", "empty-in", "lowercase-and"])
async def test_v1_reads_ignore_a_top_level_user_id_the_cloud_does_not_read(
    bob: httpx.AsyncClient, engine: respx.MockRouter, filters: dict
) -> None:
    route = every_route(engine)
    await bob.post(V1_ADD, json=v1_body("bobs-trip", "bob"))
    before = len(route.calls)
    got = await bob.post(V1_GET, json=v1_get(filters, user_id="bob"))
    found = await bob.post(V1_SEARCH, json={"query": "x", "user_id": "bob", "filters": filters})
    for response in (got, found):
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "user_id_required"
    assert forwarded(route, before) == []


async def test_v1_delete_is_by_the_callers_user_or_group_never_by_memory_id(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    await new_group(alice, "alices-group")
    await new_group(bob, "bobs-group")
    before = len(route.calls)
    refused = [
        (await bob.post(V1_DELETE, json={"memory_id": "mc-1"})).status_code,
        (await bob.post(V1_DELETE, json={"memory_id": "mc-1", "user_id": "bob"})).status_code,
        (await bob.post(V1_DELETE, json={"group_id": "alices-group"})).status_code,
        (await bob.post(V1_DELETE, json={"user_id": "alice"})).status_code,
        (await bob.post(V1_DELETE, json={"user_id": None, "sender_id": "bob"})).status_code,
        (await bob.post(V1_DELETE, json={"group_id": ""})).status_code,
    ]
    assert refused == [403, 403, 404, 403, 422, 422]
    assert forwarded(route, before) == []
    for body in ({"user_id": "bob"}, {"group_id": "bobs-group", "user_id": None},
                 {"user_id": "bob", "sender_id": "bob", "session_id": None}):
        assert (await bob.post(V1_DELETE, json=body)).status_code == 200, body
    assert len(forwarded(route, before)) == 3


async def test_v1_groups_are_owned_by_the_first_to_create_or_add_to_them(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    await new_group(alice, "alices-group")
    agent = (await bob.post("/agents", json={"name": "helper"})).json()["id"]
    before = len(route.calls)
    message = {"role": "user", "sender_id": "bob", "timestamp": 1, "content": "hi"}
    taken = [
        (await bob.post(GROUPS, json={"group_id": "alices-group"})).status_code,
        (await bob.post(GROUP_ADD, json={"group_id": "alices-group", "messages": [message]})
         ).status_code,
        (await bob.post("/api/v1/memories/group/flush", json={"group_id": "alices-group"})
         ).status_code,
        (await bob.get("/api/v1/groups/alices-group")).status_code,
        (await bob.patch("/api/v1/groups/alices-group", json={"name": "x"})).status_code,
    ]
    assert taken == [403, 403, 404, 404, 404]
    as_alice = {**message, "sender_id": "alice"}
    not_his_agent = {**message, "role": "assistant", "sender_id": "assistant"}
    for messages in ([as_alice], [message, not_his_agent]):
        response = await bob.post(GROUP_ADD, json={"group_id": "g2", "messages": messages})
        assert response.status_code == 403, response.text
    assert forwarded(route, before) == []
    ok = await bob.post(GROUP_ADD, json={"group_id": "bobs-group", "messages": [
        message, {**message, "role": "assistant", "sender_id": agent}]})
    assert ok.status_code == 200, ok.text
    assert (await bob.get("/api/v1/groups/bobs-group")).status_code == 200


async def test_v1_senders_are_the_caller(
    bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    assert (await bob.post("/api/v1/senders", json={"sender_id": "alice"})).status_code == 403
    assert (await bob.get("/api/v1/senders/alice")).status_code == 403
    assert (await bob.patch("/api/v1/senders/bob", json={"name": "Bob"})).status_code == 200
    assert len(route.calls) == 1


# --- route models: the Cloud's v2 API ----------------------------------------------------------

async def test_v2_delete_and_edit_are_the_callers_own(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    await alice.post(V2_ADD, json=v2_body("alices-trip", "alice"))
    before = len(route.calls)
    edit = {"action": "delete", "type": "explicit_info", "item_id": "p-1"}
    refused = [
        (await bob.post("/api/v2/memory/delete", json={})).status_code,
        (await bob.post("/api/v2/memory/delete", json={"session_id": "alices-trip"})).status_code,
        (await bob.post("/api/v2/memory/delete", json={"user_id": "alice"})).status_code,
        (await bob.post("/api/v2/memory/delete", json={"user_id": "bob",
                                                       "session_id": "alices-trip"})).status_code,
        (await bob.post("/api/v2/memory/edit", json={"user_id": "alice", "operations": [edit]})
         ).status_code,
        (await bob.post("/api/v2/memory/get", json={
            "user_id": "bob", "memory_type": "episode",
            "filters": {"session_id": "alices-trip"}})).status_code,
    ]
    assert refused == [422, 404, 403, 404, 403, 404]
    assert forwarded(route, before) == []
    assert (await bob.post("/api/v2/memory/delete", json={"user_id": "bob"})).status_code == 200
    added = {"action": "add", "type": "explicit_info", "data": {"city": "Lisbon"}}
    assert (await bob.post("/api/v2/memory/edit", json={"user_id": "bob", "operations": [added]})
            ).status_code == 200


async def test_v2_requests_are_validated_as_the_cloud_sdk_builds_them(
    bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    bad = [
        (V2_ADD, {**v2_body("s", "bob"), "mode": "batch"}),
        (V2_ADD, {**v2_body("s", "bob"), "session_id": ""}),
        (V2_SEARCH, {"query": "x", "user_id": "bob", "method": "llm_multiround"}),
        ("/api/v2/memory/get", {"user_id": "bob", "memory_type": "episodic_memory"}),
        ("/api/v2/memory/edit", {"user_id": "bob", "operations": []}),
    ]
    for path, body in bad:
        response = await bob.post(path, json=body)
        assert response.status_code == 422, (path, response.text)
    tasks = await bob.get("/api/v2/tasks?session_id=s")
    assert tasks.json()["error"]["code"] == "route_not_found"  # the Cloud serves no tasks
    assert not route.called


async def test_a_group_or_cube_named_like_another_user_is_no_oracle(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    """alice and bob hold keys, carol does not: naming either answers the same."""
    every_route(engine)
    answers = []
    for name in ("alice", "carol"):
        read = await bob.post(V1_GET, json=v1_get({"group_id": name}))
        cube = await bob.post(V2_SEARCH, json={"query": "x", "user_id": "bob",
                                               "mem_cube_id": name})  # the Cloud reads no cube
        created = await bob.post(GROUPS, json={"group_id": name})
        answers.append((read.status_code, read.json()["error"]["code"], cube.status_code,
                        created.status_code))
    assert answers[0] == answers[1] == (404, "not_found", 200, 200)


async def test_v0_reads_check_the_query_and_the_get_body_the_engine_merges(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    """EverMemOS reads the query string, then a GET body over it: both are read, both checked."""
    route = every_route(engine)
    message = {"message_id": "m1", "create_time": "2026-01-01T00:00:00+00:00",
               "content": "hi", "sender": "alice", "group_id": "alices-group"}
    assert (await alice.post("/api/v0/memories", json=message)).status_code == 200
    before = len(route.calls)
    for path in ("/api/v0/memories", "/api/v0/memories/search"):
        over = await bob.request("GET", f"{path}?user_id=bob", json={"user_id": "alice"})
        group = await bob.request("GET", f"{path}?user_id=bob", json={"group_id": "alices-group"})
        none = await bob.get(f"{path}?query=x")
        assert (over.status_code, group.status_code, none.status_code) == (403, 404, 422)
    by_id = await bob.request("DELETE", "/api/v0/memories", json={"memory_id": "m1"})
    assert by_id.json()["error"]["code"] == "user_id_required"
    assert forwarded(route, before) == []
    mine = await bob.request("DELETE", "/api/v0/memories", json={"memory_id": "m1",
                                                                  "user_id": "bob"})
    assert mine.status_code == 200


async def test_v0_reads_are_answered_like_a_search(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    """EverMemOS v0 answers (`result.memories`, `pending_messages`, `profiles`) keep their shape,
    lose other users' items and items of groups another user owns, and get `attachments`."""
    message = {"message_id": "m1", "create_time": "2026-01-01T00:00:00+00:00",
               "content": "hi", "group_id": "alices-group"}
    engine.post("/api/v0/memories").mock(return_value=httpx.Response(200, json={"status": "ok"}))
    assert (await alice.post("/api/v0/memories", json={**message, "sender": "alice"})
            ).status_code == 200
    assert (await bob.post("/api/v0/memories", json={**message, "sender": "bob",
                                                     "group_id": "bobs-group"})).status_code == 200
    page = {"status": "ok", "result": {
        "memories": [{"user_id": "bob", "group_id": "bobs-group", "summary": "bob's harbour"},
                     {"user_id": "alice", "group_id": "alices-group", "summary": "hers"},
                     {"group_id": "alices-group", "summary": "hers, no owner named"}],
        "pending_messages": [{"group_id": "alices-group", "content": "hers, pending"}],
        "profiles": [{"user_id": "alice", "profile_data": {"secret": "hers"}}],
        "total_count": 5}}
    for path in ("/api/v0/memories/search", "/api/v0/memories"):
        engine.get(path).mock(return_value=httpx.Response(200, json=page))
        response = await bob.get(f"{path}?user_id=bob&query=harbour")
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert result["memories"] == [{"user_id": "bob", "group_id": "bobs-group",
                                       "summary": "bob's harbour", "attachments": []}]
        assert result["pending_messages"] == [] and result["profiles"] == []
        assert "hers" not in response.text
        assert int(response.headers["content-length"]) == len(response.content)
