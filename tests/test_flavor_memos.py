"""`upstream.flavor = memos`: MemOS's `/product/add` and `/product/search` and the server routes
past them, end to end against a respx fake that checks what MemOS is sent. The route models
(gateway/upstream/flavors/memos_models.py) say which cubes each route reaches: every one must be
the caller's, claimed by their add."""

from __future__ import annotations

import base64

import httpx
import pytest
import respx

from gateway.config import Settings
from tests.attachment_helpers import PNG, files_under, rows
from tests.engine_fixtures import USER_HEADER, answer, sent
from tests.flavor_requests import every_route, forwarded

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


@pytest.mark.parametrize(("body", "add", "search"), [
    ({"user_id": "bob", "messages": []}, 403, 403),
    ({"user_id": "alice", "mem_cube_id": "bob", "messages": []}, 403, 404),
    # The search reads alice's own cube, hers by its name.
    ({"user_id": "alice", "writable_cube_ids": ["alice", "bob"], "messages": []}, 403, 200),
    ({"user_id": "alice", "readable_cube_ids": ["alice", "bob"], "messages": []}, 200, 404),
    ({"user_id": "alice", "session_id": "bobs-trip", "messages": []}, 403, 404),
], ids=["user", "cube", "writable", "readable", "session"])
async def test_naming_another_user_cube_or_session_is_refused(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter, body: dict,
    add: int, search: int,
) -> None:
    """An add claims what it writes (another's: 403); a search reads only the caller's cubes
    and sessions (anything else: 404). An add reads no readable cubes, a search writes none."""
    answer(engine, "/product/add", "memos_add")
    answer(engine, "/product/search", "memos_search")
    await native_add(bob, "bob", "bobs-trip")  # bob's own cube, "bob", is his from now on
    calls = len(engine.calls)
    added = await alice.post("/product/add", json=body)
    searched = await alice.post("/product/search", json={**body, "query": "x"})
    assert (added.status_code, searched.status_code) == (add, search), (added.text,
                                                                       searched.text)
    assert len(engine.calls) == calls + (add == 200) + (search == 200)


# --- route models: the cubes each route reaches --------------------------------------------------

async def add(client: httpx.AsyncClient, user: str, **fields: object) -> None:
    response = await client.post("/product/add", json={
        "user_id": user, "messages": [{"role": "user", "content": "hi"}], **fields})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("cubes", [["alice:cube"], ["bob:cube", "alice:cube"], ["nobodys"]])
async def test_get_all_reads_the_first_of_mem_cube_ids_and_each_must_be_yours(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter, cubes: list
) -> None:
    route = every_route(engine)
    await add(alice, "alice", writable_cube_ids=["alice:cube"])
    await add(bob, "bob", writable_cube_ids=["bob:cube"])
    before = len(route.calls)
    response = await bob.post("/product/get_all", json={
        "user_id": "bob", "memory_type": "text_mem", "mem_cube_ids": cubes})
    assert response.status_code == 404, response.text
    mine = await bob.post("/product/get_all", json={
        "user_id": "bob", "memory_type": "text_mem", "mem_cube_ids": ["bob:cube"]})
    assert mine.status_code == 200
    assert len(forwarded(route, before)) == 1


async def test_delete_by_memory_ids_is_refused_whatever_cubes_it_names(
    bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    await add(bob, "bob", writable_cube_ids=["bob:cube"])
    before = len(route.calls)
    response = await bob.post("/product/delete_memory", json={
        "writable_cube_ids": ["bob:cube"], "memory_ids": ["m-1"]})
    assert response.status_code == 403  # MemOS deletes memory ids in every cube
    assert response.json()["error"]["field"] == "memory_ids"
    assert forwarded(route, before) == []


@pytest.mark.parametrize(("body", "status"), [
    ({"writable_cube_ids": ["bob:cube"], "filter": {"created_at": {"gt": "2026"}}}, 422),
    ({"writable_cube_ids": ["bob:cube"], "session_id": "s"}, 422),
    ({"file_ids": ["f-1"]}, 422),
    ({"user_id": "bob", "filter": {"user_id": "alice"}}, 403),
    ({"user_id": "bob", "writable_cube_ids": ["alice:cube"]}, 404),
    ({"user_id": "bob", "session_id": "alices-trip"}, 404),
    ({"user_id": "alice"}, 403),
    ({"user_id": "bob", "memory_ids": ["m-1"]}, 422),  # the engine: exactly one mode
    ({"user_id": "bob", "writable_cube_ids": ["bob:cube"]}, 200),
    ({"user_id": "bob", "session_id": "bobs-trip", "filter": {"and": [{"key": "x"}]}}, 200),
    ({"writable_cube_ids": ["bob:cube"], "file_ids": ["f-1"]}, 200),
], ids=["filter-no-user", "session-no-user", "files-no-cube", "filter-other-user",
        "other-cube", "other-session", "other-user", "two-modes", "own", "own-session-filter",
        "own-files"])
async def test_delete_memory_is_bounded_to_the_callers_memories(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter, body: dict,
    status: int,
) -> None:
    route = every_route(engine)
    await add(alice, "alice", writable_cube_ids=["alice:cube"], session_id="alices-trip")
    await add(bob, "bob", writable_cube_ids=["bob:cube"], session_id="bobs-trip")
    before = len(route.calls)
    response = await bob.post("/product/delete_memory", json=body)
    assert response.status_code == status, response.text
    assert len(forwarded(route, before)) == (status == 200)


@pytest.mark.parametrize(("filter_", "status"), [
    ({"user_id": "alice"}, 403), ({"and": [{"manager_user_id": "alice"}]}, 403),
    ({"or": [{"user_id": {"in": ["bob", "alice"]}}]}, 403), ({"user_id": {"gt": "a"}}, 403),
    ({"user_name": "alice:cube"}, 404), ({"session_id": {"in": ["alices-trip"]}}, 404),
    ({"user_name = 'alice:cube' OR true OR n.x": 1}, 422), ({"memory": "x' OR '1'='1"}, 422),
    ({"and": [{"created_at": {"gt": "2026-01-01"}}, {"user_id": "bob"}]}, 200),
], ids=["user", "manager", "or-in", "gt", "cube", "session", "key-injection", "quote",
        "own"])
async def test_the_filter_of_a_search_is_checked(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter, filter_: dict,
    status: int,
) -> None:
    route = every_route(engine)
    await add(alice, "alice", writable_cube_ids=["alice:cube"], session_id="alices-trip")
    await add(bob, "bob")
    before = len(route.calls)
    response = await bob.post("/product/search", json={"query": "x", "user_id": "bob",
                                                         "filter": filter_})
    assert response.status_code == status, response.text
    assert len(forwarded(route, before)) == (status == 200)


async def test_manager_user_id_must_be_the_caller(
    bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    response = await bob.post("/product/add", json={
        "user_id": "bob", "manager_user_id": "alice", "messages": "hi"})
    assert response.status_code == 403
    chat = await bob.post("/product/chat/complete", json={
        "user_id": "bob", "query": "x", "manager_user_id": "alice"})
    assert chat.status_code == 403
    assert not route.called


async def test_project_id_does_not_open_another_users_session(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    """MemOS sessions are global: a project names no other namespace of them."""
    route = every_route(engine)
    await add(alice, "alice", session_id="alices-trip")
    before = len(route.calls)
    for project in ("p", "default", "other"):
        response = await bob.post("/product/add", json={
            "user_id": "bob", "project_id": project, "session_id": "alices-trip",
            "messages": "hi"})
        assert response.status_code == 403, (project, response.text)
    assert forwarded(route, before) == []


async def test_chat_routes_are_the_servers_and_read_only_the_callers_cubes(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    await add(alice, "alice", writable_cube_ids=["alice:cube"])
    await add(bob, "bob")  # claims bob's own cube, "bob"
    before = len(route.calls)
    gone = await bob.post("/product/chat", json={"user_id": "bob", "query": "x"})
    assert gone.json()["error"]["code"] == "route_not_found"  # MemOS serves no /product/chat
    for path in ("/product/chat/complete", "/product/chat/stream"):
        theirs = await bob.post(path, json={"user_id": "bob", "query": "x",
                                            "readable_cube_ids": ["alice:cube"]})
        assert theirs.status_code == 404, (path, theirs.text)
        written = await bob.post(path, json={"user_id": "bob", "query": "x",
                                             "writable_cube_ids": ["alice:cube"]})
        assert written.status_code == 404, (path, written.text)
    streamed = await bob.post("/product/chat/stream", json={
        "user_id": "bob", "query": "x", "mem_cube_id": "alice:cube"})
    assert streamed.status_code == 404  # ChatRequest: mem_cube_id stands in for the lists
    # chat/complete's handler never reads mem_cube_id: bob's own cube is what it reads.
    complete = await bob.post("/product/chat/complete", json={
        "user_id": "bob", "query": "x", "mem_cube_id": "alice:cube"})
    assert complete.status_code == 200, complete.text
    assert [r.url.path for r in forwarded(route, before)] == ["/product/chat/complete"]


async def test_an_add_claims_the_cube_it_writes_even_when_unnamed(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = every_route(engine)
    await add(bob, "bob")  # MemOS writes the cube named like the user: "bob"
    before = len(route.calls)
    stolen = await alice.post("/product/add", json={
        "user_id": "alice", "writable_cube_ids": ["bob"], "messages": "hi"})
    assert stolen.status_code == 403
    read = await alice.post("/product/search", json={
        "user_id": "alice", "query": "x", "readable_cube_ids": ["bob"]})
    assert read.status_code == 404
    assert forwarded(route, before) == []
    assert (await bob.post("/product/search", json={"user_id": "bob", "query": "x"})
            ).status_code == 200


async def test_a_cube_named_like_another_user_is_no_oracle(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    """alice and bob hold keys, carol does not: a cube named after either answers the same."""
    every_route(engine)
    answers = []
    for name in ("alice", "carol"):
        read = await bob.post("/product/search", json={"user_id": "bob", "query": "x",
                                                       "mem_cube_id": name})
        added = await bob.post("/product/add", json={"user_id": "bob", "mem_cube_id": name,
                                                      "messages": "hi"})
        answers.append((read.status_code, read.json()["error"]["code"], added.status_code))
    assert answers[0] == answers[1] == (404, "not_found", 403)


@pytest.mark.parametrize("body", [
    {"user_id": "bob", "writable_cube_ids": ["x' OR 1=1 --"], "messages": "hi"},
    {"user_id": "bob", "mem_cube_id": "a b", "messages": "hi"},
    {"user_id": "bob", "doc_path": "/etc/passwd", "messages": "hi"},
], ids=["quoted-cube", "spaced-cube", "doc-path"])
async def test_what_the_engine_would_splice_into_its_queries_is_refused(
    bob: httpx.AsyncClient, engine: respx.MockRouter, body: dict
) -> None:
    route = every_route(engine)
    response = await bob.post("/product/add", json=body)
    assert response.status_code == 422, response.text
    assert not route.called


async def test_the_cube_the_gateways_own_add_writes_is_the_callers(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    every_route(engine)
    added = await bob.post("/memories/add", json={"session_id": "bobs-trip", "messages": [
        {"role": "user", "sender_id": "bob", "content": "hi"}]})
    assert added.status_code == 200, added.text  # MemOS wrote cube "bob"
    claimed = await alice.post("/product/add", json={
        "user_id": "alice", "writable_cube_ids": ["bob"], "messages": "hi"})
    assert claimed.status_code == 403


async def test_the_cube_an_uploads_ingestion_writes_is_the_uploaders(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    every_route(engine)
    uploaded = await bob.post("/resources", files={"file": ("notes.txt", b"bob's notes")})
    assert uploaded.status_code == 201, uploaded.text  # its ingestion wrote cube "bob"
    claimed = await alice.post("/product/add", json={
        "user_id": "alice", "writable_cube_ids": ["bob"], "messages": "hi"})
    assert claimed.status_code == 403
