"""The official `mcp` SDK's client, pointed at a gateway in process or over the network."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import jsonschema
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

# Both eras the SDK speaks: the 2026-07-28 per-request envelope (its default) and the
# initialize handshake.
MODES = ("auto", "legacy")
LEGACY_VERSION = "2025-06-18"


@asynccontextmanager
async def mcp_client(url: str, token: str | None = None, *, mode: str = "auto",
                     transport: httpx2.AsyncBaseTransport | None = None,
                     headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    """The SDK's client of `url` with `Authorization: Bearer token` (and `headers`)."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    http = httpx2.AsyncClient(transport=transport, headers=sent, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode,
                            cache=None) as client:
        yield client


def rpc(method: str, params: dict[str, Any] | None = None, request_id: int = 1
        ) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


RPC_HEADERS = {"Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": LEGACY_VERSION}


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


async def tool_error(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The §4 error of a tool result with `isError` (the request id, which differs per call,
    removed)."""
    result = await client.call_tool(name, arguments)
    assert result.is_error, result
    error = dict(structured(result)["error"])
    error.pop("request_id", None)
    return error


async def rpc_error(client: Client, call: Any) -> dict[str, Any]:
    """The JSON-RPC error (code, message, data) an awaited client call raised."""
    try:
        await call
    except MCPError as exc:
        return {"code": exc.error.code, "message": exc.error.message, "data": exc.error.data}
    raise AssertionError("the call succeeded")


def check_output(tools: types.ListToolsResult, name: str, result: types.CallToolResult) -> None:
    """`result` holds structured content valid against the tool's declared outputSchema."""
    [tool] = [t for t in tools.tools if t.name == name]
    assert tool.output_schema is not None
    jsonschema.Draft202012Validator(tool.output_schema).validate(structured(result))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def links(result: types.CallToolResult) -> list[types.ResourceLink]:
    return [item for item in result.content if isinstance(item, types.ResourceLink)]


def blob(read: types.ReadResourceResult) -> tuple[bytes, str | None]:
    [content] = read.contents
    assert isinstance(content, types.BlobResourceContents)
    return base64.b64decode(content.blob), content.mime_type
