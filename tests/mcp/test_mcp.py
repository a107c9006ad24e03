"""`/mcp` (SPEC §19) in process, with the official SDK's client, in front of the dev engine:
tools and resources as their REST twins, the caller's files as resource links, errors in the
§19 shapes, authorization as MCP asks (metadata, challenges, audience, scopes) and isolation.
Real processes: tests/e2e/test_e2e_mcp.py."""

from __future__ import annotations

import time
from typing import Any

import httpx
import httpx2
import jsonschema
import jwt
import pytest

from gateway.app import Gateway, create_app
from gateway.config import Settings
from gateway.devengine.app import create_dev_engine
from tests.conftest import create_key
from tests.mcp.conftest import MAP, PNG, PUBLIC, URL, connect, http, remember, running
from tests.mcp_helpers import (
    MODES,
    RPC_HEADERS,
    b64,
    blob,
    check_output,
    links,
    mcp_client,
    rpc,
    rpc_error,
    structured,
    tool_error,
)

METADATA = PUBLIC + "/.well-known/oauth-protected-resource/mcp"
SECRET = "s" * 40
TOOL_NAMES = {"search_memory", "add_memory", "flush_session", "get_memories", "upload_file",
              "list_sessions", "resolve_image_reference"}


# --- the tools and resources ----------------------------------------------------------------

async def test_tools_list_every_tool_with_valid_schemas(gw: Gateway, key: Any) -> None:
    async with connect(gw, key("alice", scopes="read")) as client:
        listed = await client.list_tools()
    assert {tool.name for tool in listed.tools} == TOOL_NAMES  # a read key sees every tool
    for tool in listed.tools:
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.output_schema is not None
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        assert tool.input_schema["type"] == tool.output_schema["type"] == "object"
        assert tool.input_schema.get("additionalProperties") is False
    [get] = [tool for tool in listed.tools if tool.name == "get_memories"]
    assert set(get.input_schema["properties"]) == {"memory_type", "agent_id", "page",
                                                   "page_size"}
    assert get.input_schema["required"] == ["memory_type"]  # agent_id: for an agent's memories


@pytest.mark.parametrize("mode", MODES)
async def test_add_with_an_image_then_search_then_read_the_linked_file(
        gw: Gateway, key: Any, mode: str) -> None:
    async with connect(gw, key("alice"), mode) as client:
        tools = await client.list_tools()
        added = await remember(client)
        [kept] = added["attachments"]
        assert kept["name"] == "lighthouse.png" and kept["mime_type"] == "image/png"
        assert kept["uri"].startswith("attachment://att_")

        found = await client.call_tool("search_memory", {"query": "lighthouse"})
        check_output(tools, "search_memory", found)
        [result] = structured(found)["results"]
        assert result["session_id"] == "trip" and "lighthouse" in result["content"]
        [attachment] = result["attachments"]
        assert attachment == {"type": "image", "name": "lighthouse.png", "uri": kept["uri"],
                              "mime_type": "image/png",
                              "url": f"{PUBLIC}/attachments/{kept['uri'][13:]}/content"}
        [link] = links(found)
        assert (link.uri, link.name, link.mime_type) == (kept["uri"], "lighthouse.png",
                                                         "image/png")
        assert found.content[0].type == "text" and "lighthouse" in found.content[0].text

        data, mime = blob(await client.read_resource(link.uri))
        assert data == PNG and mime == "image/png"


@pytest.mark.parametrize("mode", MODES)
async def test_upload_then_list_and_read_resources(gw: Gateway, key: Any, mode: str) -> None:
    async with connect(gw, key("alice"), mode) as client:
        tools = await client.list_tools()
        uploaded = await client.call_tool("upload_file", {"name": "trail-map.png",
                                                          "base64": b64(MAP)})
        check_output(tools, "upload_file", uploaded)
        up = structured(uploaded)
        assert up["uri"] == f"resource://{up['id']}" and up["size"] == len(MAP)
        assert up["content_type"] == "image/png"

        listed = await client.list_resources()
        assert [(r.uri, r.name, r.mime_type, r.size) for r in listed.resources] == [
            (up["uri"], "trail-map.png", "image/png", len(MAP))]
        data, mime = blob(await client.read_resource(up["uri"]))
        assert data == MAP and mime == "image/png"

        # The upload's memory links back to it as resource://.
        found = structured(await client.call_tool("search_memory", {"query": "trail-map"}))
        uris = {a["uri"] for r in found["results"] for a in r["attachments"]}
        assert uris == {up["uri"]}

        # add_memory can name it: the add maps the stored file, search links the upload.
        added = await client.call_tool("add_memory", {
            "session_id": "plans", "text": "we follow trail-map.png",
            "files": [{"resource_uri": up["uri"]}]})
        assert structured(added)["attachments"] == [
            {"name": "trail-map.png", "uri": up["uri"], "mime_type": "image/png"}]


async def test_list_sessions_get_memories_and_resolve(gw: Gateway, key: Any) -> None:
    async with connect(gw, key("alice")) as client:
        tools = await client.list_tools()
        await remember(client, "first")
        await remember(client, "second")
        sessions = await client.call_tool("list_sessions", {})
        check_output(tools, "list_sessions", sessions)
        assert [s["session_id"] for s in structured(sessions)["items"]] == ["second", "first"]

        got = structured(await client.call_tool("get_memories", {"memory_type": "episode"}))
        episodes = got["data"]["episodes"]
        assert {e["session_id"] for e in episodes} == {"first", "second"}
        assert all(e["attachments"][0]["name"] == "lighthouse.png" for e in episodes)

        resolved = await client.call_tool("resolve_image_reference",
                                          {"conversation_id": "chat-1", "text": "the left one"})
        check_output(tools, "resolve_image_reference", resolved)
        assert structured(resolved)["needsClarification"] is True
    async with http(gw, key("alice")) as rest:
        audit = (await rest.get("/chats/chat-1/resolutions")).json()
    assert [row["rawText"] for row in audit["resolutions"]] == ["the left one"]


def agent_task(user: str, agent: str, ts: int = 1764547200000) -> list[dict[str, Any]]:
    """A task the engine keeps as the agent's case: a question, three tool rounds, an answer."""
    def said(role: str, sender: str, at: int, text: str, **extra: Any) -> dict[str, Any]:
        return {"role": role, "sender_id": sender, "timestamp": at, "content": text, **extra}
    rounds = []
    for i in range(3):
        call = {"id": f"call{i}", "type": "function",
                "function": {"name": "tide_table", "arguments": f'{{"day": {i}}}'}}
        rounds += [said("assistant", agent, ts + 10 * i + 1, "", tool_calls=[call]),
                   said("tool", agent, ts + 10 * i + 2, "low tide at noon",
                        tool_call_id=f"call{i}")]
    return [said("user", user, ts, "when is low tide this week?"), *rounds,
            said("assistant", agent, ts + 100, "low tide is at noon all week")]


async def test_get_memories_of_one_of_the_callers_agents(gw: Gateway, key: Any) -> None:
    token = key("alice")
    async with http(gw, token) as rest:
        agent = (await rest.post("/agents", json={"name": "tides"})).json()["id"]
        added = await rest.post("/api/v2/memory/add", json={
            "session_id": "tides", "messages": agent_task("alice", agent)})
        assert added.status_code == 200, added.text
        assert (await rest.post("/api/v2/memory/flush",
                                json={"session_id": "tides"})).status_code == 200
    async with connect(gw, token) as client:
        got = await client.call_tool("get_memories", {"memory_type": "agent_case",
                                                      "agent_id": agent})
        assert not got.is_error, got
        [case] = structured(got)["data"]["agent_cases"]
        assert case["agent_id"] == agent and case["session_id"] == "tides"
        assert "low tide" in case["task_intent"] and "tide_table" in case["approach"]
        skills = await client.call_tool("get_memories", {"memory_type": "agent_skill",
                                                         "agent_id": agent, "page_size": 5})
        assert not skills.is_error and structured(skills)["data"]["agent_skills"] == []
        # the caller's own memories take no agent; an agent's need one
        for arguments in ({"memory_type": "agent_case"}, {"memory_type": "agent_skill"},
                          {"memory_type": "episode", "agent_id": agent},
                          {"memory_type": "profile", "agent_id": agent}):
            error = await rpc_error(client, client.call_tool("get_memories", arguments))
            assert error["code"] == -32602 and error["data"]["field"] == "agent_id", error
            assert error["message"].startswith("agent_id: ")


# --- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("arguments", "field"), [
    ({"query": "x", "top_k": 0}, "top_k"),
    ({"query": "x", "top_k": 101}, "top_k"),
    ({"query": "x", "top_k": "5"}, "top_k"),
    ({}, "query"),
    ({"query": "x", "user_id": "bob"}, "user_id"),
])
async def test_arguments_outside_the_schema_are_invalid_params_naming_the_field(
        gw: Gateway, key: Any, mode: str, arguments: dict[str, Any], field: str) -> None:
    async with connect(gw, key("alice"), mode) as client:
        error = await rpc_error(client, client.call_tool("search_memory", arguments))
    assert error["code"] == -32602
    assert error["message"].startswith(f"{field}:")
    assert error["data"]["field"] == field


async def test_other_tools_name_their_bad_fields(gw: Gateway, key: Any) -> None:
    async with connect(gw, key("alice")) as client:
        for name, arguments, field in (
                ("add_memory", {"text": "x", "role": "system"}, "role"),
                ("add_memory", {}, "text"),
                ("add_memory", {"files": [{"name": "a.png"}]}, "files.0"),
                ("get_memories", {"memory_type": "everything"}, "memory_type"),
                ("get_memories", {"memory_type": "episode", "page_size": 1000}, "page_size"),
                ("upload_file", {"name": "a.png", "base64": "@@@"}, "base64"),
                ("list_sessions", {"cursor": "not-a-cursor"}, "cursor"),
                ("resolve_image_reference", {"conversation_id": "../x", "text": "it"},
                 "conversation_id")):
            error = await rpc_error(client, client.call_tool(name, arguments))
            assert error["code"] == -32602, (name, error)
            assert error["data"]["field"].startswith(field), (name, error)


async def test_route_refusals_and_engine_failures_are_tool_errors(
        mcp_settings: Settings, key: Any) -> None:
    token = key("alice")
    async with running(mcp_settings) as app, connect(app, token) as client:
        refused = await tool_error(client, "add_memory", {
            "role": "assistant", "agent_id": "agt_nobody", "text": "hello"})
        assert refused["status"] == 403 and refused["code"] == "forbidden"
        bad = await tool_error(client, "add_memory", {
            "text": "x", "files": [{"name": "a.png", "base64": "bm90IHBuZw="}]})
        assert bad["status"] == 422 and "base64" in bad["message"]

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with running(mcp_settings, httpx.MockTransport(down)) as app, \
            connect(app, token) as client:
        failed = await client.call_tool("search_memory", {"query": "anything"})
        assert failed.is_error
        assert structured(failed)["error"]["status"] == 502
        assert structured(failed)["error"]["code"] == "upstream_unavailable"
        assert set(structured(failed)["error"]) >= {"code", "message", "status"}


async def test_a_file_over_max_read_bytes_names_its_download_url(
        mcp_settings: Settings, key: Any) -> None:
    async with running(mcp_settings.with_values(mcp={"max_read_bytes": 100})) as app, \
            connect(app, key("alice")) as client:
        up = structured(await client.call_tool("upload_file", {"name": "big.png",
                                                               "base64": b64(MAP)}))
        error = await rpc_error(client, client.read_resource(up["uri"]))
    url = f"{PUBLIC}/resources/{up['id']}/content"
    assert error["data"] == {"uri": up["uri"], "size": len(MAP), "url": url}
    assert url in error["message"]


# --- authorization --------------------------------------------------------------------------

async def test_protected_resource_metadata_needs_no_credential(
        mcp_settings: Settings) -> None:
    configured = mcp_settings.with_values(auth_jwt={"issuer": "https://id.example",
                                                    "jwks_url": "https://id.example/jwks",
                                                    "audience": "memory-gateway"})
    async with running(configured) as app, http(app) as anonymous:
        for path in ("/.well-known/oauth-protected-resource/mcp",
                     "/.well-known/oauth-protected-resource"):
            answer = await anonymous.get(path)
            assert answer.status_code == 200, answer.text
            assert answer.json() == {
                "resource": URL, "authorization_servers": ["https://id.example"],
                "scopes_supported": ["memory:read", "memory:write"],
                "bearer_methods_supported": ["header"]}
    async with running(mcp_settings) as app, http(app) as anonymous:
        assert "authorization_servers" not in \
            (await anonymous.get("/.well-known/oauth-protected-resource/mcp")).json()


async def test_a_request_without_a_valid_credential_gets_the_challenge(
        gw: Gateway, key: Any) -> None:
    challenge = f'Bearer resource_metadata="{METADATA}"'
    async with http(gw, **RPC_HEADERS) as anonymous:
        answer = await anonymous.post("/mcp", json=rpc("tools/list"))
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == challenge
        assert answer.json()["error"]["code"] == "unauthorized"
        for token in ("mgw_unknown_key", key("ops", kind="admin")):
            answer = await anonymous.post("/mcp", json=rpc("tools/list"),
                                          headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"] == challenge + ', error="invalid_token"'


async def test_disabled_mcp_answers_404_everywhere(mcp_settings: Settings, key: Any) -> None:
    async with running(mcp_settings.with_values(mcp={"enabled": False})) as app, \
            http(app, key("alice"), **RPC_HEADERS) as alice:
        assert (await alice.post("/mcp", json=rpc("tools/list"))).status_code == 404
        for path in ("/.well-known/oauth-protected-resource/mcp",
                     "/.well-known/oauth-protected-resource"):
            assert (await alice.get(path)).status_code == 404


@pytest.mark.parametrize(("scopes", "method", "params", "needed"), [
    ("read", "tools/call", {"name": "add_memory", "arguments": {"text": "x"}}, "memory:write"),
    ("read", "tools/call", {"name": "upload_file",
                            "arguments": {"name": "a.png", "base64": "AA=="}}, "memory:write"),
    ("read", "tools/call", {"name": "flush_session", "arguments": {"session_id": "s"}},
     "memory:write"),
    ("read", "tools/call", {"name": "resolve_image_reference",
                            "arguments": {"conversation_id": "c", "text": "it"}}, "memory:write"),
    ("write", "tools/call", {"name": "search_memory", "arguments": {"query": "x"}},
     "memory:read"),
    ("write", "tools/call", {"name": "get_memories", "arguments": {"memory_type": "episode"}},
     "memory:read"),
    ("write", "tools/call", {"name": "list_sessions", "arguments": {}}, "memory:read"),
    ("write", "resources/list", {}, "memory:read"),
    ("write", "resources/read", {"uri": "resource://res_x"}, "memory:read"),
])
async def test_calls_outside_the_credentials_scopes_are_403_insufficient_scope(
        gw: Gateway, key: Any, scopes: str, method: str, params: dict[str, Any],
        needed: str) -> None:
    async with http(gw, key("alice", scopes=scopes), **RPC_HEADERS) as client:
        answer = await client.post("/mcp", json=rpc(method, params, request_id=7))
    assert answer.status_code == 403, answer.text
    assert answer.headers["www-authenticate"].startswith(
        f'Bearer error="insufficient_scope", scope="{needed}"')
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == 7
    assert body["error"]["data"]["code"] == "insufficient_scope"
    assert body["error"]["data"]["status"] == 403


async def test_a_read_key_reads_through_the_sdk_client(gw: Gateway, key: Any) -> None:
    async with connect(gw, key("alice")) as writer:
        await remember(writer)
    async with connect(gw, key("alice", scopes="read")) as reader:
        found = structured(await reader.call_tool("search_memory", {"query": "lighthouse"}))
        assert found["results"]


def _token(audience: str | list[str], subject: str = "alice") -> str:
    return jwt.encode({"sub": subject, "aud": audience, "exp": int(time.time()) + 600},
                      SECRET, algorithm="HS256")


async def test_jwts_on_mcp_must_carry_the_mcp_audience(mcp_settings: Settings) -> None:
    settings = mcp_settings.with_values(auth_jwt={"secret": SECRET, "audience": "rest-api"})
    async with running(settings) as app:
        async with connect(app, _token(URL)) as client:
            assert structured(await client.call_tool("list_sessions", {}))["items"] == []
        async with connect(app, _token(["rest-api", URL])) as client:
            await client.list_tools()
        rest_only = _token("rest-api")
        async with http(app, rest_only, **RPC_HEADERS) as client:
            answer = await client.post("/mcp", json=rpc("tools/list"))
            assert answer.status_code == 401
            assert 'error="invalid_token"' in answer.headers["www-authenticate"]
            assert (await client.get("/resources")).status_code == 200  # REST takes it
    explicit = settings.with_values(mcp={"jwt_audience": "https://memory.example/mcp"})
    async with running(explicit) as app:
        async with connect(app, _token("https://memory.example/mcp")) as client:
            await client.list_tools()
        async with http(app, _token(URL), **RPC_HEADERS) as client:
            assert (await client.post("/mcp", json=rpc("tools/list"))).status_code == 401


async def test_without_an_mcp_audience_jwts_are_refused_and_keys_still_work(
        settings: Settings) -> None:
    no_public = settings.with_values(auth_jwt={"secret": SECRET, "audience": "rest-api"})
    async with running(no_public) as app:
        async with http(app, _token(["rest-api", "/mcp", URL]), **RPC_HEADERS) as client:
            answer = await client.post("/mcp", json=rpc("tools/list"))
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"] == (
                'Bearer resource_metadata="/.well-known/oauth-protected-resource/mcp", '
                'error="invalid_token"')
        async with connect(app, create_key(no_public, "alice"),
                           headers={"Host": "127.0.0.1:8080"}) as client:
            await client.list_tools()


async def test_a_host_the_gateway_does_not_serve_is_refused(gw: Gateway, key: Any) -> None:
    async with http(gw, key("alice"), **RPC_HEADERS) as client:
        answer = await client.post("/mcp", json=rpc("tools/list"),
                                   headers={"Host": "attacker.example"})
        assert answer.status_code == 421
        answer = await client.post("/mcp", json=rpc("tools/list"),
                                   headers={"Origin": "http://attacker.example"})
        assert answer.status_code == 403
        answer = await client.post("/mcp", json=rpc("tools/list"),
                                   headers={"Origin": PUBLIC})
        assert answer.status_code == 200


async def test_a_service_key_acts_for_the_user_its_header_names(gw: Gateway, key: Any) -> None:
    async with connect(gw, key("alice")) as alice:
        await remember(alice)
    service = key("svc", kind="service")
    async with connect(gw, service, headers={"X-Memory-Gateway-User": "alice"}) as as_alice:
        assert structured(await as_alice.call_tool("search_memory",
                                                   {"query": "lighthouse"}))["results"]
    async with connect(gw, service, headers={"X-Memory-Gateway-User": "bob"}) as as_bob:
        assert structured(await as_bob.call_tool("search_memory",
                                                 {"query": "lighthouse"}))["results"] == []


async def test_the_credential_never_reaches_the_engine(mcp_settings: Settings, key: Any) -> None:
    engine = create_dev_engine()
    inner = httpx.ASGITransport(app=engine)
    seen: list[httpx.Headers] = []

    class Recording(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(request.headers)
            return await inner.handle_async_request(request)

    token = key("alice")
    async with engine.router.lifespan_context(engine):
        app = create_app(mcp_settings, upstream_transport=Recording())
        async with app.running(), connect(app, token) as client:
            await remember(client)
            await client.call_tool("search_memory", {"query": "lighthouse"})
            await client.call_tool("get_memories", {"memory_type": "episode"})
    assert len(seen) >= 4
    for headers in seen:
        assert "authorization" not in headers
        assert token not in str(headers)
        assert headers.get("x-memory-gateway-user") in (None, "alice")


async def test_another_mcp_path_moves_the_endpoint_and_its_metadata(
        mcp_settings: Settings, key: Any) -> None:
    moved = mcp_settings.with_values(mcp={"path": "/agents-mcp"})
    async with running(moved) as app:
        async with http(app) as anonymous:
            meta = await anonymous.get("/.well-known/oauth-protected-resource/agents-mcp")
            assert meta.json()["resource"] == PUBLIC + "/agents-mcp"
            refused = await anonymous.post("/agents-mcp", json=rpc("tools/list"),
                                           headers=RPC_HEADERS)
            assert refused.headers["www-authenticate"] == (
                f'Bearer resource_metadata="{PUBLIC}/.well-known/oauth-protected-resource'
                '/agents-mcp"')
        async with mcp_client(PUBLIC + "/agents-mcp", key("alice"),
                              transport=httpx2.ASGITransport(app=app)) as client:
            assert len((await client.list_tools()).tools) == len(TOOL_NAMES)
