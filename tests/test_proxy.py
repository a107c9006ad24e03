"""Pass-through rules of SPEC §5 and the body checks of SPEC §3, with the engine faked by respx."""

import gzip
import json

import httpx
import pytest
import respx

from gateway.app import Gateway
from gateway.config import Settings
from tests.conftest import client_for

# The route suite runs on both databases and through both production upstream clients over a
# loopback engine, paired (conftest): SQLite with the native client, PostgreSQL with httpx.
pytestmark = [pytest.mark.both_databases, pytest.mark.both_clients]
# Engine routes beyond the everos table, opened as an operator would (SPEC §5): the mechanics
# of forwarding are the same for them.
OPENED = ["PUT /api/v2/knowledge/*", "GET /api/v2/things", "GET /z", "GET /big",
          "POST /upload", "GET /x"]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.with_values(upstream={"allow_paths": OPENED})


async def test_forwards_method_path_query_body_and_returns_bytes_unchanged(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = engine.put("/api/v2/knowledge/items/7").mock(
        return_value=httpx.Response(207, content=b'{"ok": 1}', headers={"X-Engine": "yes"})
    )
    response = await alice.put(
        "/api/v2/knowledge/items/7?x=1&y=%20z", content=b'{"a": 1}',
        headers={"Content-Type": "application/json", "X-Custom": "kept"},
    )
    assert response.status_code == 207
    assert response.content == b'{"ok": 1}'
    assert response.headers["x-engine"] == "yes"
    sent = route.calls.last.request
    assert sent.method == "PUT"
    assert sent.url.raw_path == b"/api/v2/knowledge/items/7?x=1&y=%20z"
    assert sent.content == b'{"a": 1}'
    assert sent.headers["x-custom"] == "kept"


async def test_strips_hop_by_hop_and_authorization_and_sets_forwarding_headers(
    alice: httpx.AsyncClient, engine: respx.MockRouter, app: Gateway
) -> None:
    route = engine.get("/api/v2/things").mock(return_value=httpx.Response(200, json={}))
    await alice.get(
        "/api/v2/things",
        headers={
            "Connection": "keep-alive, X-Secret-Hop",
            "X-Secret-Hop": "1",
            "Keep-Alive": "timeout=5",
            "TE": "trailers",
            "Upgrade": "h2c",
            "Proxy-Authorization": "Basic eA==",
            "X-Memory-User-Id": "mallory",
            "X-Forwarded-For": "1.2.3.4",
        },
    )
    sent = route.calls.last.request.headers
    for name in ("authorization", "connection", "x-secret-hop", "keep-alive", "te", "upgrade",
                 "proxy-authorization"):
        assert name not in sent, name
    assert sent.get_list("x-memory-user-id") == ["alice"]
    assert sent["x-forwarded-for"] == "203.0.113.7"
    assert sent["x-forwarded-proto"] == "http"
    assert sent["x-forwarded-host"] == "gateway.test"
    assert sent["host"] == app.settings.upstream.base_url.removeprefix("http://")  # the engine's
    assert sent["x-request-id"]


async def test_configured_upstream_headers_are_added(
    settings, engine: respx.MockRouter, make_key, start_gateway
) -> None:
    route = engine.get("/x").mock(return_value=httpx.Response(200))
    configured = settings.with_values(upstream={"headers": {"X-Api-Key": "engine-secret"}})
    async with start_gateway(configured) as gateway, \
            client_for(gateway, make_key("alice")) as client:
        await client.get("/x")
    assert route.calls.last.request.headers["x-api-key"] == "engine-secret"


async def test_compressed_response_passes_through_still_compressed(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    compressed = gzip.compress(b'{"hello": "world"}' * 50)
    engine.get("/z").mock(
        return_value=httpx.Response(
            200, content=compressed, headers={"Content-Encoding": "gzip"}
        )
    )
    async with alice.stream("GET", "/z") as response:
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
    assert raw == compressed
    assert response.headers["content-encoding"] == "gzip"


async def test_large_response_streams_to_client_intact(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    big = bytes(range(256)) * 20_000  # 5 MB, above the buffering threshold

    async def chunks():
        for i in range(0, len(big), 65536):
            yield big[i : i + 65536]

    engine.get("/big").mock(return_value=httpx.Response(200, content=chunks()))
    response = await alice.get("/big")
    assert response.content == big


async def test_large_chunked_json_request_is_read_checked_and_forwarded(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    payload = json.dumps({"user_id": "alice", "pad": "x" * (3 * 1024 * 1024)}).encode()
    route = engine.post("/upload").mock(return_value=httpx.Response(201))

    async def body():
        for i in range(0, len(payload), 100_000):
            yield payload[i : i + 100_000]

    response = await alice.post(
        "/upload", content=body(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 201
    assert route.calls.last.request.content == payload
    octets = await alice.post("/upload", content=b"\x00" * 10,
                              headers={"Content-Type": "application/octet-stream"})
    assert octets.status_code == 415 and route.call_count == 1


async def test_missing_unknown_and_malformed_keys_are_401(
    app: Gateway, engine: respx.MockRouter
) -> None:
    route = engine.get("/x").mock(return_value=httpx.Response(200))
    for token in (None, "nope", "mgw_0123456789abcdef_" + "a" * 43):
        async with client_for(app, token) as client:
            response = await client.get("/x")
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"
    assert not route.called


async def test_user_message_with_another_sender_is_403_and_not_forwarded(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = engine.post("/api/v2/memory/add").mock(return_value=httpx.Response(200, json={}))
    body = {"session_id": "s", "messages": [
        {"role": "user", "sender_id": "alice", "timestamp": 1760000000000, "content": "hi"},
        {"role": "user", "sender_id": "bob", "timestamp": 1760000000000, "content": "i am bob"},
    ]}
    for path in ("/memories/add", "/api/v2/memory/add", "/api/v1/memory/add"):
        response = await alice.post(path, json=body)
        assert response.status_code == 403, path
        assert response.json()["error"]["field"] == "messages[1].sender_id"
    assert not route.called


async def test_assistant_message_sender_must_be_one_of_the_callers_agents(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = engine.post("/api/v2/memory/add").mock(return_value=httpx.Response(200, json={}))
    body = {"session_id": "s", "messages": [
        {"role": "assistant", "sender_id": "assistant-1", "content": "hello"}]}
    response = await alice.post("/memories/add", json=body)
    assert response.status_code == 403
    assert not route.called
    agent = (await alice.post("/agents", json={"name": "helper"})).json()["id"]
    body["messages"][0]["sender_id"] = agent
    response = await alice.post("/memories/add", json=body)
    assert response.status_code == 200
    assert json.loads(route.calls.last.request.content) == body


async def test_search_for_another_user_is_403_and_not_forwarded(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = engine.post("/api/v2/memory/search").mock(return_value=httpx.Response(200, json={}))
    response = await alice.post("/memories/search", json={"query": "x", "user_id": "bob"})
    assert response.status_code == 403
    # EverOS filters cannot name an owner; a user id in the query is not read: both refused.
    response = await alice.post("/memories/search",
                                json={"query": "x", "filters": {"user_id": "bob"}})
    assert response.status_code == 422
    response = await alice.post("/api/v2/memory/get?user_id=bob", json={})
    assert response.status_code == 422
    assert not route.called


async def test_agent_id_without_agents_is_refused(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = engine.post("/api/v2/memory/get").mock(return_value=httpx.Response(200, json={}))
    response = await alice.post("/api/v2/memory/get",
                                json={"agent_id": "someone-elses", "memory_type": "agent_case"})
    assert response.status_code == 403
    assert response.json()["error"]["field"] == "agent_id"
    assert not route.called


async def test_own_user_id_passes(alice: httpx.AsyncClient, engine: respx.MockRouter) -> None:
    route = engine.post("/api/v2/memory/search").mock(
        return_value=httpx.Response(200, json={"data": {"episodes": []}})
    )
    response = await alice.post("/api/v2/memory/search", json={"query": "x", "user_id": "alice"})
    assert response.status_code == 200
    assert route.called


async def test_owned_prefix_never_reaches_the_engine(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = engine.route().mock(return_value=httpx.Response(200))
    response = await alice.get("/agents/x/unknown/deeper")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert not route.called


async def test_wrong_method_on_owned_route_is_405(alice: httpx.AsyncClient) -> None:
    response = await alice.get("/memories/add")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


async def test_json_body_over_limit_is_413_before_forwarding(
    settings, engine: respx.MockRouter, make_key, start_gateway
) -> None:
    route = engine.post("/api/v2/memory/get").mock(return_value=httpx.Response(200))
    limited = settings.with_values(limits={"max_body_bytes": 1000})
    async with start_gateway(limited) as gateway, \
            client_for(gateway, make_key("alice")) as client:
        response = await client.post("/api/v2/memory/get", content=b"{" + b" " * 2000 + b"}",
                                     headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert not route.called
