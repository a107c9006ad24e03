"""`upstream.flavor = mem0`: the open-source REST server's `/memories` and `/search` and the
platform API's `/v1`..`/v3` routes, end to end against a respx fake that checks what mem0 is
sent. The route models (gateway/upstream/flavors/mem0_models.py) are mem0's own request models:
what each route reads, and the filter trees that bound it."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest
import respx

from gateway.config import Settings
from tests.attachment_helpers import PNG, files_under, rows
from tests.conftest import StartGateway, client_for
from tests.engine_fixtures import USER_HEADER, answer, sent
from tests.flavor_requests import every_route, forwarded

# The route suite runs once per production upstream client over a loopback engine (conftest).
pytestmark = [pytest.mark.both_clients, pytest.mark.both_databases]

B64 = base64.b64encode(PNG).decode()


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.with_values(upstream={"flavor": "mem0"})


def mem0_add(engine: respx.MockRouter) -> respx.Route:
    return answer(engine, "/memories", "mem0_add")


def platform_add(engine: respx.MockRouter) -> respx.Route:
    return answer(engine, "/v3/memories/add/", "mem0_add")


async def native_add(client: httpx.AsyncClient, user: str, run_id: str) -> httpx.Response:
    """The platform's add (`MemoryClient.add`): its content may be a multimodal part."""
    return await client.post("/v3/memories/add/", json={
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
    route = platform_add(engine)
    response = await native_add(alice, "alice", "trip-1")
    assert response.status_code == 200
    assert response.json()["results"][0]["event"] == "ADD"
    request, body = sent(route)
    assert request.url.path == "/v3/memories/add/" and request.headers[USER_HEADER] == "alice"
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


async def test_server_add_with_a_file_part_is_refused_as_the_server_refuses_it(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = mem0_add(engine)
    response = await alice.post("/memories", json={"user_id": "alice", "messages": [
        {"role": "user", "content": {"type": "image_url", "image_url": {"url": "https://x/a.png"}}}]})
    assert response.status_code == 422  # server/main.py: `Message.content: str`
    assert response.json()["error"]["field"].startswith("messages.0.content")
    assert not route.called


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
    bot = (await alice.post("/agents", json={"name": "bot"})).json()["id"]
    response = await alice.post("/memories/add", json={
        "session_id": "trip-1", "agent_id": None, "messages": [
            {"role": "user", "sender_id": "alice", "timestamp": 1, "content": [
                {"type": "text", "text": "the harbour at dawn"},
                {"type": "image", "base64": B64, "name": "harbour.png"}]},
            {"role": "assistant", "sender_id": bot, "content": "lovely"}]})
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
    platform_add(engine)
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
    platform_add(engine)
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


@pytest.mark.parametrize(("method", "path", "body", "status"), [
    ("POST", "/memories", {"user_id": "bob", "messages": [{"role": "user", "content": "x"}]},
     403),
    ("POST", "/memories", {"run_id": "bobs-trip", "messages": [{"role": "user", "content": "x"}]},
     403),
    ("POST", "/search", {"query": "x", "user_id": "alice", "run_id": "bobs-trip"}, 404),
    ("POST", "/search", {"query": "x", "user_id": "alice",
                         "filters": {"AND": [{"user_id": "bob"}]}}, 403),
    ("POST", "/search", {"query": "x", "filters": {"user_id": {"ne": "alice"}}}, 403),
    ("POST", "/search", {"query": "x", "user_id": "alice", "filters": {"user_id": "bob"}}, 403),
    ("GET", "/memories?run_id=bobs-trip", None, 404),
    ("GET", "/memories?user_id=alice&run_id=bobs-trip", None, 404),
])
async def test_naming_another_user_or_their_run_is_refused_and_not_forwarded(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter,
    method: str, path: str, body: dict | None, status: int,
) -> None:
    mem0_add(engine)
    added = await bob.post("/memories", json={
        "user_id": "bob", "run_id": "bobs-trip", "messages": [{"role": "user", "content": "x"}]})
    assert added.status_code == 200
    calls = len(engine.calls)
    response = await alice.request(method, path, json=body)
    assert response.status_code == status, response.text
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


# --- route models: what bounds a read (the filter trees of the platform and the server) ---------

async def add_run(client: httpx.AsyncClient, user: str, run_id: str) -> None:
    response = await client.post("/memories", json={
        "user_id": user, "run_id": run_id, "messages": [{"role": "user", "content": "x"}]})
    assert response.status_code == 200, response.text


async def test_or_and_not_filters_never_scope_a_read(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    await add_run(alice, "alice", "alices-run")
    before = len(route.calls)
    everyone_since = {"OR": [{"user_id": "alice"}, {"created_at": {"gte": "2000-01-01"}}]}
    listed = await alice.post("/v3/memories/", json={"filters": everyone_since})
    assert listed.status_code == 422, listed.text
    assert listed.json()["error"]["code"] == "user_id_required"
    # The platform reads no run_id in the query: there it bounds nothing and is refused.
    in_query = await alice.post("/v3/memories/?run_id=alices-run",
                                json={"filters": everyone_since})
    assert in_query.status_code == 422, in_query.text
    assert in_query.json()["error"]["field"] == "query.run_id"
    for filters in ({"NOT": {"user_id": "alice"}}, {"NOT": [{"user_id": "alice"}]},
                    {"$not": [{"agent_id": "x"}]}, {"AND": [{"NOT": {"user_id": "alice"}}]}):
        searched = await alice.post("/v3/memories/search/", json={"query": "x",
                                                                   "filters": filters})
        assert searched.status_code == 403, (filters, searched.text)
    assert forwarded(route, before) == []


@pytest.mark.parametrize("filters", [
    {"user_id": []}, {"user_id": {"in": []}}, {"agent_id": []}, {"AND": [{"user_id": []}]},
    {"OR": [{"user_id": "alice"}]}, {"$or": [{"user_id": "alice"}]},
    {"AND": [{"OR": [{"user_id": "alice"}, {"run_id": "alices-run"}]}]},
    {"app_id": "photos"},
], ids=["user-empty", "user-in-empty", "agent-empty", "and-empty", "or", "$or", "and-or",
        "app"])
async def test_filters_that_pin_no_one_are_user_id_required(
    alice: httpx.AsyncClient, engine: respx.MockRouter, filters: dict
) -> None:
    route = every_route(engine)
    await add_run(alice, "alice", "alices-run")
    before = len(route.calls)
    for path, body in (("/v3/memories/", {"filters": filters}),
                       ("/v3/memories/search/", {"query": "x", "filters": filters}),
                       ("/v1/summary/", {"filters": filters})):
        response = await alice.post(path, json=body)
        assert response.status_code == 422, (path, response.text)
        assert response.json()["error"]["code"] == "user_id_required"
    assert forwarded(route, before) == []


@pytest.mark.parametrize("filters", [
    {"user_id": {"ne": "alice"}}, {"user_id": {"gt": "a"}},
    {"user_id": {"in": ["alice", "bob"]}}, {"user_id": {"nin": ["alice"]}},
    {"user_id": {"icontains": "a"}}, {"AND": [{"user_id": "alice"}, {"user_id": "bob"}]},
    {"user_id": "alice", "OR": [{"user_id": {"ne": "alice"}}, {"run_id": "r"}]},
    {"user_id": "alice", "$or": [{"user_id": "bob"}]},
    {"user_id": "alice", "metadata": {"user_id": "bob"}},
    {"user_id": "alice", "agent_id": "someone-elses-agent"},
], ids=["ne", "gt", "in-other", "nin", "icontains", "and-other", "or-ne",
        "$or-other", "nested", "agent"])
async def test_a_condition_that_can_match_another_user_is_403_wherever_it_sits(
    alice: httpx.AsyncClient, engine: respx.MockRouter, filters: dict
) -> None:
    route = every_route(engine)
    for path, body in (("/v3/memories/", {"filters": filters}),
                       ("/v3/memories/search/", {"query": "x", "filters": filters}),
                       ("/search", {"query": "x", "user_id": "alice", "filters": filters})):
        response = await alice.post(path, json=body)
        assert response.status_code == 403, (path, response.text)
    assert not route.called


@pytest.mark.parametrize("filters", [
    {"user_id": "alice"}, {"AND": [{"user_id": "alice"}, {"created_at": {"gte": "2026-01-01"}}]},
    {"AND": [{"AND": [{"user_id": {"in": ["alice"]}}]}]},
    {"user_id": "alice", "OR": [{"categories": {"in": ["travel"]}}, {"run_id": "alices-run"}]},
    {"run_id": "alices-run"},
], ids=["user", "and", "nested-and", "user-and-or", "own-run"])
async def test_conjunctions_pinning_the_caller_scope_and_go_through_unchanged(
    alice: httpx.AsyncClient, engine: respx.MockRouter, filters: dict
) -> None:
    route = every_route(engine)
    await add_run(alice, "alice", "alices-run")
    before = len(route.calls)
    raw = json.dumps({"filters": filters, "page_size": 5}).encode()
    response = await alice.post("/v3/memories/?page=2", content=raw,
                                headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    [request] = forwarded(route, before)
    assert request.url.path == "/v3/memories/" and request.url.query == b"page=2"
    assert request.content == raw


async def test_a_value_where_the_platform_does_not_read_it_does_not_scope(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    wide = {"OR": [{"user_id": "alice"}, {"created_at": {"gte": "2000-01-01"}}]}
    in_query = await alice.post("/v3/memories/?user_id=alice", json={"filters": wide})
    assert in_query.status_code == 422 and in_query.json()["error"]["field"] == "query.user_id"
    # The platform rejects top-level entity ids (400): the gateway says so first.
    top_level = await alice.post("/v3/memories/search/", json={
        "query": "x", "user_id": "alice", "filters": wide})
    assert top_level.status_code == 422 and "top-level" in top_level.json()["error"]["message"]
    # The server's list reads its query only: a body names no one.
    body = await alice.request("GET", "/memories", json={"user_id": "alice"})
    assert body.json()["error"]["code"] == "user_id_required"
    assert not route.called


async def test_a_search_body_id_replaces_the_filters_one_and_each_must_be_yours(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    mine = await alice.post("/search", json={"query": "x", "user_id": "alice",
                                             "filters": {"OR": [{"created_at": {"gt": "1"}}]}})
    assert mine.status_code == 200, mine.text  # the top-level user_id lands in the filters
    theirs = await alice.post("/search", json={"query": "x", "user_id": "alice",
                                               "filters": {"AND": [{"user_id": "bob"}]}})
    assert theirs.status_code == 403  # an AND condition replaces the top-level one
    none = await alice.post("/search", json={"query": "x", "filters": {"AND": [
        {"user_id": "alice"}]}})
    assert none.status_code == 422  # Memory.search wants an id at the top of the filters
    assert len(route.calls) == 1


async def test_delete_all_of_the_platform_is_bounded_by_user_agent_or_run(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    await add_run(alice, "alice", "alices-run")
    before = len(route.calls)
    assert (await alice.delete("/v1/memories/?user_id=alice")).status_code == 200
    assert (await alice.delete("/v1/memories/?run_id=alices-run")).status_code == 200
    # `*` is every run (or user) to the engine, never an id: refused wherever it sits.
    assert (await alice.delete("/v1/memories/?user_id=alice&run_id=*")).status_code == 422
    assert (await alice.delete("/v1/memories/?user_id=*")).status_code == 422
    assert (await alice.delete("/v1/memories/?app_id=photos")).status_code == 422
    assert (await alice.delete("/v1/memories/?run_id=*")).status_code == 422
    assert [r.url.query for r in forwarded(route, before)] == [
        b"user_id=alice", b"run_id=alices-run"]


async def test_exports_and_summaries_are_read_by_filters_naming_the_caller(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    pinned = {"AND": [{"user_id": "alice"}]}
    assert (await alice.post("/v1/exports/", json={"schema": {}, "filters": pinned})
            ).status_code == 200
    flat = await alice.post("/v1/exports/", json={"schema": {}, "filters": {"user_id": "alice"}})
    assert flat.status_code == 422  # the platform rejects flat export filters (400)
    by_id = await alice.post("/v1/exports/get/", json={"memory_export_id": "e-1",
                                                       "filters": pinned})
    assert by_id.status_code == 403  # an export id has no owner the gateway knows
    assert (await alice.post("/v1/exports/get/", json={"filters": pinned})).status_code == 200
    assert (await alice.post("/v1/summary/", json={"filters": {"user_id": "alice"}})
            ).status_code == 200
    assert len(route.calls) == 3


async def test_entities_are_the_callers_own(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    await add_run(bob, "bob", "bobs-run")
    before = len(route.calls)
    assert (await alice.get("/v2/entities/user/alice/")).status_code == 200
    assert (await alice.get("/v2/entities/user/bob/")).status_code == 403
    assert (await alice.delete("/v2/entities/run/bobs-run/")).status_code == 404
    assert (await alice.get("/v2/entities/app/photos/")).status_code == 404  # not opened
    assert [r.url.path for r in forwarded(route, before)] == ["/v2/entities/user/alice/"]


async def test_a_run_or_cube_named_like_another_user_is_no_oracle(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    """alice and bob hold keys, carol does not: naming either reads the same."""
    every_route(engine)
    answers = []
    for name in ("alice", "carol"):
        run = await bob.get(f"/memories?user_id=bob&run_id={name}")
        cube = await bob.post("/search", json={"query": "x", "user_id": "bob",
                                               "mem_cube_id": name})  # mem0 reads no cube
        added = await bob.post("/memories", json={
            "user_id": "bob", "run_id": f"{name}-run", "mem_cube_id": name,
            "messages": [{"role": "user", "content": "x"}]})
        answers.append((run.status_code, run.json()["error"]["code"], cube.status_code,
                        added.status_code))
    assert answers[0] == answers[1] == (404, "not_found", 200, 200)


async def test_the_servers_api_key_travels_in_upstream_headers_only(
    settings: Settings, engine: respx.MockRouter, make_key, start_gateway: StartGateway
) -> None:
    route = every_route(engine)
    keyed = settings.with_values(upstream={"headers": {"X-API-Key": "mem0-server-key"}})
    async with start_gateway(keyed) as app, client_for(app) as client:
        response = await client.get("/memories?user_id=alice",
                                    headers={"X-API-Key": make_key("alice")})
    assert response.status_code == 200, response.text
    [request] = route.calls
    assert request.request.headers.get_list("x-api-key") == ["mem0-server-key"]
    assert request.request.headers[USER_HEADER] == "alice"
