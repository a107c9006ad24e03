"""`/mcp`'s single exchanges (gateway/mcp/exchange.py) and tool results sent as built
(gateway/mcp/server.py) answer as the SDK's own transport and serializer do: the same messages,
sent with them and without them (the SDK's streamable-HTTP transport, its result check), get
the same status, content type and JSON body, in every protocol era."""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any

import httpx
import orjson
import pytest
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from gateway.app import Gateway
from gateway.mcp import server as mcp_server
from tests.mcp.conftest import MAP, PUBLIC, connect, remember
from tests.mcp_helpers import b64

MODERN = MODERN_PROTOCOL_VERSIONS[-1]
ACCEPT = "application/json, text/event-stream"
REQUEST_ID = re.compile(r'(request_id\\?":\\?")[0-9a-f]{24,32}')


@contextmanager
def sdk_only(app: Gateway) -> Any:
    """The door as it is without the single exchanges and with the SDK's result check."""
    door = app.mcp
    assert door is not None
    exchange, middleware = door.exchange, door._server.middleware
    door.exchange, door._server.middleware = None, []
    try:
        yield
    finally:
        door.exchange, door._server.middleware = exchange, middleware


def message(method: str, params: dict[str, Any] | None = None, version: str | None = None,
            request_id: Any = 7) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if version == MODERN:
        params = {**(params or {}), "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}}
    if params is not None:
        body["params"] = params
    return body


def headers_for(version: str | None, method: str = "tools/call",
                name: str | None = "search_memory") -> dict[str, str]:
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    if version == MODERN:
        headers["Mcp-Method"] = method
        if name is not None:
            headers["Mcp-Name"] = name
    return headers


def call(name: str, arguments: Any, version: str | None) -> tuple[dict[str, str], bytes]:
    body = message("tools/call", {"name": name, "arguments": arguments}, version)
    return headers_for(version, name=name), orjson.dumps(body)


def plain(method: str, version: str | None, params: dict[str, Any] | None = None
          ) -> tuple[dict[str, str], bytes]:
    return (headers_for(version, method, params.get("uri") if params and method ==
                        "resources/read" else None),
            orjson.dumps(message(method, params, version)))


ERAS = (None, *HANDSHAKE_PROTOCOL_VERSIONS, MODERN)


def cases() -> list[tuple[str, str | None, dict[str, str], bytes]]:
    """(name, era, headers, body): the tools' calls, the protocol's other requests, and every
    refusal on the way to the kernel."""
    found: list[tuple[str, str | None, dict[str, str], bytes]] = []
    for era in ERAS:
        for name, arguments in (
                ("search_memory", {"query": "lighthouse"}),
                ("search_memory", {"query": "lighthouse", "top_k": 1, "session_id": "trip"}),
                ("search_memory", {"query": "nothing-like-it"}),
                ("search_memory", {"query": "x", "top_k": 0}),  # -32602 naming top_k
                ("search_memory", {"query": 5}),
                ("search_memory", {"query": "x", "unknown": 1}),
                ("get_memories", {"memory_type": "episode"}),
                ("list_sessions", {}),
                ("list_sessions", {"cursor": "not-a-cursor"}),
                ("add_memory", {"files": [{"resource_uri": "resource://res_nope"}]}),
                ("no_such_tool", {}),
                ("search_memory", ["not", "an", "object"])):
            found.append((f"{name} {arguments}", era, *call(name, arguments, era)))
        for method, params in (("tools/list", None), ("resources/list", None),
                               ("resources/read", {"uri": "resource://res_nope"}),
                               ("resources/templates/list", None), ("ping", None),
                               ("no/such/method", None),
                               ("tools/call", {"arguments": {"query": "x"}})):
            found.append((f"{method} {params}", era, *plain(method, era, params)))
        headers, body = call("search_memory", {"query": "lighthouse"}, era)
        found += [
            ("string id", era, headers, orjson.dumps({**orjson.loads(body), "id": "a-b"})),
            ("notification", era, headers_for(era, "notifications/initialized", None),
             orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            ("a response", era, headers, b'{"jsonrpc": "2.0", "id": 1, "result": {}}'),
            ("parse error", era, headers, b'{"jsonrpc": "2.0", "id": 1, '),
            ("a batch", era, headers, orjson.dumps([orjson.loads(body)])),
            ("not an envelope", era, headers, b'{"id": 1, "method": 5}'),
            ("SSE only", era, {**headers, "Accept": "text/event-stream"}, body),
            ("no Accept", era, {k: v for k, v in headers.items() if k != "Accept"}, body),
            ("text/plain", era, {**headers, "Content-Type": "text/plain"}, body),
            ("json-seq", era, {**headers, "Content-Type": "application/json-seq"}, body),
            ("charset", era, {**headers, "Content-Type": "application/json; charset=utf-8"},
             body),
            ("foreign host", era, {**headers, "Host": "evil.example"}, body),
            ("foreign origin", era, {**headers, "Origin": "https://evil.example"}, body),
            ("own origin", era, {**headers, "Origin": PUBLIC}, body),
            ("session id", era, {**headers, "Mcp-Session-Id": "abc"}, body),
            ("param header", era, {**headers, "Mcp-Param-Query": "lighthouse"}, body),
            ("initialize", era, headers_for(era, "initialize", None), orjson.dumps(message(
                "initialize", {"protocolVersion": era or "2025-03-26", "capabilities": {},
                               "clientInfo": {"name": "t", "version": "1"}}))),
        ]
    headers, body = call("search_memory", {"query": "lighthouse"}, MODERN)
    found += [
        ("unknown version", "2099-01-01", {**headers, "MCP-Protocol-Version": "2099-01-01"},
         body),
        ("modern header, no _meta", MODERN, headers,
         orjson.dumps(message("tools/call", {"name": "search_memory",
                                             "arguments": {"query": "lighthouse"}}))),
        ("method header mismatch", MODERN, {**headers, "Mcp-Method": "tools/list"}, body),
        ("name header mismatch", MODERN, {**headers, "Mcp-Name": "get_memories"}, body),
        ("no name header", MODERN, {k: v for k, v in headers.items() if k != "Mcp-Name"}, body),
        ("meta version mismatch", MODERN, headers, orjson.dumps(message(
            "tools/call", {"name": "search_memory", "arguments": {"query": "x"}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2025-06-18",
                "io.modelcontextprotocol/clientCapabilities": {}}}))),
    ]
    return found


async def answer(app: Gateway, token: str, headers: dict[str, str], body: bytes
                 ) -> tuple[int, str | None, Any]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url=PUBLIC) as client:
        sent = {"Authorization": f"Bearer {token}", **headers}
        got = await client.post("/mcp", content=body, headers=sent)
    content_type = got.headers.get("content-type")
    try:
        decoded: Any = got.json()
    except ValueError:
        return got.status_code, content_type, got.text
    # an engine's answer carries a request id of its own (get_memories)
    return got.status_code, content_type, orjson.loads(
        REQUEST_ID.sub(r"\1<id>", orjson.dumps(decoded).decode()))


async def test_every_message_gets_the_answer_the_sdk_transport_gives(
        gw: Gateway, key: Any) -> None:
    token = key("alice")
    async with connect(gw, token) as client:
        await remember(client)
        await client.call_tool("upload_file", {"name": "trail-map.png", "base64": b64(MAP)})
    compared = 0
    for name, era, headers, body in cases():
        fast = await answer(gw, token, headers, body)
        with sdk_only(gw):
            sdk = await answer(gw, token, headers, body)
        assert fast == sdk, f"{name} ({era})"
        compared += 1
    assert compared > 200


async def test_a_search_is_answered_without_the_sdk_transport(gw: Gateway, key: Any) -> None:
    """The single exchange does answer the plain case (the comparison above is not two runs
    of the SDK's transport)."""
    door = gw.mcp
    assert door is not None and door._manager is not None
    token = key("alice")
    for era in ERAS:
        headers, body = call("search_memory", {"query": "lighthouse"}, era)
        served = door._manager.handle_request

        async def refused(*args: Any) -> None:
            raise AssertionError("reached the SDK's transport")

        door._manager.handle_request = refused  # type: ignore[method-assign]
        try:
            status, _, decoded = await answer(gw, token, headers, body)
        finally:
            door._manager.handle_request = served  # type: ignore[method-assign]
        assert status == 200 and decoded["result"]["structuredContent"] == {"results": []}


async def test_tool_results_as_built_are_what_the_sdk_makes_of_them(
        gw: Gateway, key: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every result each tool built in these calls, in every era, equals the SDK's own
    check-and-dump of it (`ServerRunner._serialize`, the step the gateway leaves out)."""
    built: list[tuple[str, dict[str, Any]]] = []
    as_built = mcp_server.as_built

    def recording(version: str, result: dict[str, Any], stamp: dict[str, Any]
                  ) -> dict[str, Any]:
        built.append((version, result))
        return as_built(version, result, stamp)

    monkeypatch.setattr(mcp_server, "as_built", recording)
    token = key("alice")
    async with connect(gw, token) as client:
        await remember(client)
        uploaded = await client.call_tool("upload_file", {"name": "trail-map.png",
                                                          "base64": b64(MAP)})
        for name, arguments in (
                ("search_memory", {"query": "lighthouse"}),
                ("search_memory", {"query": "trail-map"}),
                ("search_memory", {"query": "nothing-like-it"}),
                ("get_memories", {"memory_type": "episode"}),
                ("list_sessions", {}),
                ("add_memory", {"text": "plans", "files": [
                    {"resource_uri": uploaded.structured_content["uri"]}]}),  # type: ignore
                ("add_memory", {"files": [{"resource_uri": "resource://res_nope"}]}),
                ("resolve_image_reference", {"conversation_id": "c1", "text": "the left one"}),
                ("flush_session", {"session_id": "trip"})):
            await client.call_tool(name, arguments)
    assert {tuple(sorted(r)) for _, r in built} >= {
        ("content", "resultType", "structuredContent"),
        ("content", "isError", "resultType", "structuredContent")}
    door = gw.mcp
    assert door is not None
    stamp = door._server.server_info_stamp
    for _, result in built:
        for version in (*HANDSHAKE_PROTOCOL_VERSIONS, MODERN):
            runner = ServerRunner(door._server, Connection.from_envelope(version, None, None),
                                  {})
            sdk = runner._serialize("tools/call", version, dict(result))
            assert as_built(version, result, stamp) == sdk, (version, result)
