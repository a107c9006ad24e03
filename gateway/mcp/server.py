"""The SDK's low-level MCP server with the gateway's tools and resources (SPEC §19).

Every handler finds its caller in the HTTP request that carried the message: the Principal the
gateway authenticated (gateway/mcp/mount.py) in the request's scope. Arguments are checked
against the tool's model first; a refusal is a JSON-RPC -32602 naming the field, whatever the
protocol version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from gateway.identity.principal import PRINCIPAL_KEY, Principal
from gateway.mcp import errors, resources
from gateway.mcp.tools import BY_NAME, TOOLS, Caller

if TYPE_CHECKING:
    from gateway.services import Host

NAME = "memory-gateway"
INSTRUCTIONS = (
    "Your long-term memory. search_memory before answering from what you were told earlier; "
    "add_memory to remember (text and files); files found come back as resource links that "
    "resources/read returns."
)


def build_server(gateway: Host, version: str) -> Server[Any]:
    listed = types.ListToolsResult(tools=[spec.tool() for spec in TOOLS])

    def caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller:
        scope = ctx.request.scope if ctx.request is not None else None
        principal = scope.get(PRINCIPAL_KEY) if scope is not None else None
        if scope is None or not isinstance(principal, Principal):  # only mount.py reaches here
            raise MCPError(types.INTERNAL_ERROR, "no authenticated caller")
        return Caller(gateway, principal, scope)

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listed

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> dict[str, Any]:
        spec = BY_NAME.get(params.name)
        if spec is None:
            raise errors.unknown_tool(params.name)
        try:
            arguments = spec.arguments.model_validate(params.arguments or {})
        except ValidationError as exc:
            raise errors.invalid_arguments(exc) from None
        answer = await spec.run(caller_of(ctx), arguments)
        answer["resultType"] = "complete"  # a final result (2026-07-28; older eras drop it)
        return answer

    async def list_resources(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        return await resources.list_resources(caller_of(ctx),
                                              params.cursor if params is not None else None)

    async def read_resource(ctx: ServerRequestContext[Any, Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return await resources.read_resource(caller_of(ctx), params.uri)

    def no_header_parameters(name: str) -> Mapping[str, Any] | None:
        """No tool declares an argument mirrored in an `Mcp-Param-*` header: nothing for the
        2026-07-28 transport to check there (without this it would list the tools per call)."""
        return None

    server: Server[Any] = Server(
        NAME, version=version, instructions=INSTRUCTIONS,
        get_tool_input_schema=no_header_parameters,
        on_list_tools=list_tools,
        on_list_resources=list_resources, on_read_resource=read_resource,
    )
    # Registered as a plain handler: its results are wire dicts (gateway/mcp/tools.py).
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    stamp = server.server_info_stamp  # fixed at construction, as the SDK stamps it

    async def tool_results_as_built(ctx: ServerRequestContext[Any, Any],
                                    call_next: CallNext) -> HandlerResult:
        """`tools/call` as the SDK's kernel runs it (the request's surface check, then the
        handler), its result sent as built: the SDK would check and re-dump each result
        against the protocol's schema (a tenth of a millisecond for a search's), and the
        results of gateway/mcp/tools.py are in that shape by construction
        (tests/mcp/test_mcp_exchange.py holds them to what the SDK makes of them). A request the
        surface refuses goes the SDK's way, for its own error."""
        if ctx.method != "tools/call":
            return await call_next(ctx)
        version = ctx.protocol_version
        try:
            methods.validate_client_request("tools/call", version, ctx.params)
            params = types.CallToolRequestParams.model_validate(ctx.params or {}, by_name=False)
        except (KeyError, ValueError):  # ValidationError is a ValueError
            return await call_next(ctx)
        return as_built(version, await call_tool(ctx, params), stamp)

    # The SDK's default OpenTelemetry span per message is left out: the gateway's own access
    # log and metrics already cover each request, and the tool's REST call.
    server.middleware = [tool_results_as_built]
    return server


def as_built(version: str, result: dict[str, Any], stamp: dict[str, Any]) -> dict[str, Any]:
    """A tool result in the wire form `ServerRunner._serialize` gives it at `version`: the
    handshake eras have no `resultType`; the 2026-07-28 era carries the server's identity in
    `_meta` (spec #3002)."""
    if version in MODERN_PROTOCOL_VERSIONS:
        return {**result, "_meta": {types.SERVER_INFO_META_KEY: stamp}}
    return {key: value for key, value in result.items() if key != "resultType"}
