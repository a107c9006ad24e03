"""One test per finding of the engine-surface review (issue 11), each failing on the old code.

Two users, alice and bob; bob holds a valid key and tries to reach alice's memories. Where the
engine must not be contacted, the recording fake engine's request list proves it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import Gateway
from gateway.config import Settings
from tests.attachment_helpers import rows
from tests.conftest import create_key, storage_values
from tests.s3_server import S3Server
from tests.security.support import (  # noqa: F401 (fixtures, found by name)
    RecordingEngine,
    alice_fixture,
    app_fixture,
    bob_fixture,
    body_of,
    client,
    engine_fixture,
    gateway_with,
    keyed,
    settings_fixture,
    settings_for,
)

ALICE_GET = json.dumps({"user_id": "alice", "memory_type": "episode"})


def mem0(tmp_path: Path, **upstream: Any) -> Settings:
    return settings_for(tmp_path, flavor="mem0", **upstream)


# --- 2: body checks switched off by encoding -------------------------------------------------

async def _chunks() -> AsyncIterator[bytes]:
    yield ALICE_GET[:10].encode()
    yield ALICE_GET[10:].encode()


ENCODED: list[tuple[str, dict[str, str], Any]] = [
    ("bom", {"Content-Type": "application/json"}, b"\xef\xbb\xbf" + ALICE_GET.encode()),
    ("utf-16", {"Content-Type": "application/json"}, ALICE_GET.encode("utf-16")),
    ("octet-stream", {"Content-Type": "application/octet-stream"}, ALICE_GET.encode()),
    ("text/plain", {"Content-Type": "text/plain"}, ALICE_GET.encode()),
    ("image/png", {"Content-Type": "image/png"}, ALICE_GET.encode()),
    ("no-break space", {"Content-Type": "application/json"}, b"\xc2\xa0" + ALICE_GET.encode()),
    ("octet-stream above 1 MiB", {"Content-Type": "application/octet-stream"},
     json.dumps({"user_id": "alice", "pad": "x" * (1100 * 1024)}).encode()),
    ("json above 1 MiB", {"Content-Type": "application/json"},
     json.dumps({"user_id": "alice", "pad": "x" * (1100 * 1024)}).encode()),
]


@pytest.mark.parametrize("name,headers,content", ENCODED, ids=[e[0] for e in ENCODED])
async def test_2_body_in_any_encoding_naming_another_user_is_not_forwarded(
    bob: httpx.AsyncClient, engine: RecordingEngine, name: str, headers: dict[str, str],
    content: bytes,
) -> None:
    response = await bob.post("/api/v2/memory/get", content=content, headers=headers)
    assert response.status_code in (403, 415, 422), (name, response.text)
    assert engine.requests == []


async def test_2_chunked_and_doubly_typed_bodies_are_read_and_checked(
    bob: httpx.AsyncClient, engine: RecordingEngine
) -> None:
    chunked = await bob.post("/api/v2/memory/get", content=_chunks(),
                             headers={"Content-Type": "application/json"})
    assert chunked.status_code == 403
    doubled = await bob.post("/api/v2/memory/get", content=ALICE_GET.encode(), headers=[
        ("Content-Type", "text/plain"), ("Content-Type", "application/json")])
    assert doubled.status_code == 415
    assert doubled.json()["error"]["code"] == "unsupported_media_type"
    assert engine.requests == []


# --- 3: query checks switched off by percent-encoding ------------------------------------------

@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("query", [
    "user%5Fid=alice", "%75ser_id=alice", "user_id=bob&user_id=alice", "run%5Fid=alices-run",
    "agent%5Fid=alices-agent", "user_id=al%69ce",
])
async def test_3_percent_encoded_or_repeated_query_ids_are_checked(
    tmp_path: Path, engine: RecordingEngine, method: str, query: str
) -> None:
    settings = mem0(tmp_path)
    async with gateway_with(settings, engine) as app, keyed(app, settings, "alice") as alice, \
            keyed(app, settings, "bob") as bob:
        added = await alice.post("/memories", json={
            "user_id": "alice", "run_id": "alices-run",
            "messages": [{"role": "user", "content": "hello"}]})
        assert added.status_code == 200
        engine.requests.clear()
        response = await bob.request(method, f"/memories?{query}")
    assert response.status_code in (403, 404, 422), response.text
    assert engine.requests == []


# --- 4: reads that span users -----------------------------------------------------------------

async def test_4_get_without_a_user_id_is_refused_not_answered_with_everyone(
    bob: httpx.AsyncClient, engine: RecordingEngine
) -> None:
    # EverOS 1.5.1 pins every get to its top-level user_id XOR agent_id; filters name no owner.
    for body in ({}, {"memory_type": "episode"},
                 {"memory_type": "episode", "filters": {"session_id": {"ne": "x"}}},
                 {"memory_type": "episode",
                  "filters": {"OR": [{"user_id": "bob"}, {"session_id": "x"}]}},
                 {"memory_type": "episode", "filters": {"user_id": "bob"}}):
        response = await bob.post("/api/v2/memory/get", json=body)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "validation_error"
    assert engine.requests == []
    mine = await bob.post("/api/v2/memory/get", json={"user_id": "bob", "memory_type": "episode"})
    assert mine.status_code == 200
    assert len(engine.requests) == 1


# --- 6: other users' files as attachments -------------------------------------------------------

async def test_6_file_uris_outside_the_callers_storage_are_refused(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: RecordingEngine, settings: Settings
) -> None:
    upload = await alice.post("/resources", files={"file": ("secret.png", b"\x89PNG alice")})
    assert upload.status_code == 201
    root = Path(settings.storage.root).resolve()
    [alices_file] = (root / "alice" / "resources").rglob("secret.png")
    engine.requests.clear()
    for uri in (alices_file.as_uri(), Path(settings.storage.database).resolve().as_uri(),
                "file:///etc/passwd", f"file://{root}/bob/../alice/resources",
                "FILE:///etc/passwd", "file:/etc/passwd", "/etc/passwd", "file://localhost/etc/passwd",
                "smb://host/share/x.png", "C:\\Windows\\win.ini"):
        response = await bob.post("/api/v2/memory/add", json={
            "session_id": "bobs", "messages": [{"role": "user", "sender_id": "bob",
                                                "timestamp": 1760000000000, "content": [
                {"type": "image", "uri": uri, "name": "x.png"}]}]})
        assert response.status_code == 422, (uri, response.text)
        assert response.json()["error"]["code"] == "uri_not_allowed"
    assert engine.requests == []
    assert rows(settings, "SELECT * FROM memory_attachments WHERE user_id = 'bob'") == []
    own = await alice.post("/memories/add", json={
        "session_id": "hers", "messages": [{"role": "user", "sender_id": "alice",
                                                "timestamp": 1760000000000, "content": [
            {"type": "image", "uri": alices_file.as_uri()}]}]})
    assert own.status_code == 200, own.text


async def test_6_on_s3_only_the_callers_own_objects_of_the_gateways_store_pass(
    tmp_path: Path, engine: RecordingEngine, s3_server: S3Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings().with_values(upstream={"base_url": "http://engine.test"},
                                      storage=storage_values(tmp_path, s3_server, monkeypatch))
    store = settings.storage.files
    bucket = store.removeprefix("s3://").partition("/")[0]
    async with gateway_with(settings, engine) as app, keyed(app, settings, "alice") as alice, \
            keyed(app, settings, "bob") as bob:
        upload = await alice.post("/resources", files={"file": ("secret.png", b"\x89PNG alice")})
        assert upload.status_code == 201
        alices = f"{store}/alice/resources/{upload.json()['id']}/secret.png"
        engine.requests.clear()
        for uri in (alices, f"{store}/bob/../alice/resources/{upload.json()['id']}/secret.png",
                    f"{store}/alice", f"{store}/", f"{store}/_file_url_secret",
                    f"{store}//alice/resources/x/y.png",
                    alices.replace(f"{bucket}/", f"{bucket}/./", 1),
                    f"s3://{bucket}/elsewhere/alice/x.png"):
            response = await bob.post("/api/v2/memory/add", json={
                "session_id": "bobs", "messages": [{"role": "user", "sender_id": "bob",
                                                    "timestamp": 1760000000000,
                                                    "content": [{"type": "image", "uri": uri,
                                                                 "name": "x.png"}]}]})
            assert response.status_code == 422, (uri, response.text)
            assert response.json()["error"]["code"] == "uri_not_allowed"
        assert engine.requests == []
        own = await alice.post("/memories/add", json={
            "session_id": "hers", "messages": [{"role": "user", "sender_id": "alice",
                                                "timestamp": 1760000000000,
                                                "content": [{"type": "image", "uri": alices}]}]})
        assert own.status_code == 200, own.text
        # Other buckets are the client's to name; the gateway's own bucket is not.
        elsewhere = await bob.post("/memories/add", json={
            "session_id": "bobs", "messages": [{"role": "user", "sender_id": "bob",
                                                "timestamp": 1760000000000, "content": [
                {"type": "image", "uri": "s3://another-bucket/alice/x.png"}]}]})
        assert elsewhere.status_code == 200, elsewhere.text


# --- 7: identity headers -----------------------------------------------------------------------

async def test_7_user_header_spellings_and_configured_headers_come_only_from_the_gateway(
    tmp_path: Path, engine: RecordingEngine
) -> None:
    settings = settings_for(tmp_path, headers={"X-Engine-Key": "engine-secret"})
    async with gateway_with(settings, engine) as app, keyed(app, settings, "bob") as bob:
        response = await bob.post("/api/v2/memory/get", json={
            "user_id": "bob", "memory_type": "episode"}, headers=[
            ("X_Memory_User_Id", "alice"), ("x-memory-user_id", "alice"),
            ("X-MEMORY-USER-ID", "alice"), ("X-Engine-Key", "forged"), ("x_engine_key", "forged")])
    assert response.status_code == 200
    [sent] = engine.requests
    names = [name.lower().replace(b"_", b"-") for name, _ in sent.headers.raw]
    assert names.count(b"x-memory-user-id") == 1 and sent.headers["x-memory-user-id"] == "bob"
    assert names.count(b"x-engine-key") == 1 and sent.headers["x-engine-key"] == "engine-secret"


# --- 8: search scope --------------------------------------------------------------------------

@pytest.mark.parametrize("native_search", [True, False])
async def test_8_a_foreign_session_is_dropped_whatever_app_id_the_search_names(
    tmp_path: Path, native_search: bool
) -> None:
    episode = {"id": "e1", "session_id": "alices", "episode": "alice's secret",
               "score": 0.9}

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/search"):
            return httpx.Response(200, json={"data": {"episodes": [episode]}})
        return httpx.Response(200, json={"status": "ok"})

    engine = RecordingEngine(answer)
    settings = settings_for(tmp_path).with_values(server={"native_search": native_search})
    async with gateway_with(settings, engine) as app, keyed(app, settings, "alice") as alice, \
            keyed(app, settings, "bob") as bob:
        added = await alice.post("/memories/add", json={"session_id": "alices", "messages": [
            {"role": "user", "sender_id": "alice", "timestamp": 1760000000000,
             "content": "secret"}]})
        assert added.status_code == 200
        for extra in ({}, {"app_id": "x"}, {"project_id": "y"}, {"app_id": "x", "project_id": "y"}):
            found = await bob.post("/api/v2/memory/search",
                                   json={"query": "secret", "user_id": "bob", **extra})
            assert found.status_code == 200
            assert found.json()["data"]["episodes"] == [], extra


# --- 9 (lone surrogate): unencodable engine data ------------------------------------------------

@pytest.mark.parametrize("flavor,path,answer", [
    ("everos", "/memories/search", b'{"data": {"episodes": [{"id": "1", "episode": "\\ud800"}]}}'),
    ("everos", "/api/v2/memory/search",
     b'{"data": {"episodes": [{"id": "1", "episode": "\\ud800x"}]}}'),
    ("mem0", "/memories/search", b'{"results": [{"id": "1", "memory": "\\udfff"}]}'),
])
async def test_9_a_lone_surrogate_in_a_search_item_is_a_502(
    tmp_path: Path, flavor: str, path: str, answer: bytes
) -> None:
    engine = RecordingEngine(lambda request: httpx.Response(
        200, content=answer, headers={"Content-Type": "application/json"}))
    settings = settings_for(tmp_path, flavor=flavor)
    async with gateway_with(settings, engine) as app, keyed(app, settings, "bob") as bob:
        response = await bob.post(path, json={"query": "x", "user_id": "bob"})
    assert response.status_code in (200, 502), response.text
    if response.status_code == 502:
        assert response.json()["error"]["code"] == "upstream_bad_response"
    else:  # passed on as the engine wrote it: still the escape, never a broken encoding
        assert b"\\ud800" in response.content


# --- 10: engine administration and unchecked API generations ----------------------------------

@pytest.mark.parametrize("flavor,method,path", [
    ("mem0", "POST", "/reset"), ("mem0", "POST", "/configure"), ("mem0", "POST", "/reset/"),
    ("mem0", "POST", "//configure"), ("mem0", "GET", "/v1/entities/"),
    ("mem0", "POST", "/api/v1/orgs/organizations/o/projects/p/"),
    ("memos", "POST", "/admin/reset"), ("memos", "GET", "/admin/users"),
    ("memos", "POST", "/product/configure"), ("memos", "POST", "/product/users/register"),
    ("everos-cloud", "GET", "/api/v1/settings"), ("everos-cloud", "PUT", "/api/v1/settings"),
    ("everos", "GET", "/redoc"), ("everos", "PUT", "/api/v2/knowledge/items/7"),
])
async def test_10_engine_administration_is_in_no_table(
    tmp_path: Path, engine: RecordingEngine, flavor: str, method: str, path: str
) -> None:
    settings = settings_for(tmp_path, flavor=flavor)
    async with gateway_with(settings, engine) as app, keyed(app, settings, "bob") as bob:
        response = await bob.request(method, path, json={"user_id": "bob"})
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "route_not_found"
    assert engine.requests == []


async def test_10_the_engines_docs_page_is_never_reached_the_gateways_own_answers(
    tmp_path: Path, engine: RecordingEngine
) -> None:
    settings = settings_for(tmp_path, flavor="everos")
    async with gateway_with(settings, engine) as app, keyed(app, settings, "bob") as bob:
        response = await bob.get("/docs")
    assert response.status_code == 200
    assert "<h1>memory-gateway" in response.text
    assert engine.requests == []


async def test_10_mem0_list_without_ids_is_refused(
    tmp_path: Path, engine: RecordingEngine
) -> None:
    settings = mem0(tmp_path)
    async with gateway_with(settings, engine) as app, keyed(app, settings, "bob") as bob:
        listed = await bob.get("/memories")
        deleted = await bob.delete("/memories")
        everyone = await bob.post("/v3/memories/", json={"filters": {"OR": [{"user_id": "bob"},
                                                                          {"run_id": "r"}]}})
    # A run named in a read must be the caller's, OR or not: "r" is no one's, so 404.
    assert [listed.status_code, deleted.status_code, everyone.status_code] == [422, 422, 404]
    assert engine.requests == []


async def test_10_evermemos_v0_is_not_served_by_everos_1x_and_so_closed(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: RecordingEngine
) -> None:
    message = {"message_id": "m1", "create_time": "2026-01-01T00:00:00+00:00",
               "content": "hello", "group_id": "alices-group", "sender": "bob"}
    for method, path in (("POST", "/api/v0/memories"), ("GET", "/api/v0/memories/search"),
                         ("DELETE", "/api/v0/memories")):
        response = await bob.request(method, path, json=message)
        assert response.json()["error"]["code"] == "route_not_found", path
    assert engine.requests == []


async def test_10_memos_cubes_are_owned_like_sessions(
    tmp_path: Path, engine: RecordingEngine
) -> None:
    settings = settings_for(tmp_path, flavor="memos")
    async with gateway_with(settings, engine) as app, keyed(app, settings, "alice") as alice, \
            keyed(app, settings, "bob") as bob:
        added = await alice.post("/product/add", json={
            "user_id": "alice", "mem_cube_id": "alice:cube",
            "messages": [{"role": "user", "content": "hi"}]})
        assert added.status_code == 200, added.text
        engine.requests.clear()
        searched = await bob.post("/product/search", json={
            "user_id": "bob", "query": "hi", "mem_cube_id": "alice:cube"})
        listed = await bob.post("/product/get_all", json={
            "user_id": "bob", "memory_type": "text_mem", "mem_cube_ids": ["alice:cube"]})
    # Another user's cube reads like no one's (no existence oracle).
    assert searched.status_code == 404 and listed.status_code == 404
    assert engine.requests == []


# --- 11: clients that send other credentials -----------------------------------------------------

async def test_11_token_and_x_api_key_credentials_are_accepted(
    app: Gateway, settings: Settings, engine: RecordingEngine
) -> None:
    key = create_key(settings, "bob")
    for headers in ({"Authorization": f"Token {key}"}, {"X-API-Key": key},
                    {"Authorization": f"token {key}", "X-API-Key": key}):
        async with client(app, headers) as bob:
            response = await bob.post("/api/v2/memory/get",
                                      json={"user_id": "bob", "memory_type": "episode"})
        assert response.status_code == 200, (headers, response.text)
    for sent in engine.requests:
        assert "authorization" not in sent.headers and "x-api-key" not in sent.headers
        assert sent.headers["x-memory-user-id"] == "bob"
    async with client(app, {"Authorization": f"Token {key}", "X-API-Key": "mgw_other"}) as mixed:
        assert (await mixed.get("/resources")).status_code == 401
    assert body_of(engine.requests[0]) == {"user_id": "bob", "memory_type": "episode"}
