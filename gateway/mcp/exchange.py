"""One POST, one JSON-RPC request, one JSON answer: the SDK's single-exchange kernel, both eras.

In stateless JSON mode a POST carrying one JSON-RPC request is answered by one JSON body and
nothing else: no session, no stream, no server-initiated request (SPEC §19). The SDK serves the
2026-07-28 envelope that way (`serve_one`, its per-request kernel entry); for the handshake
eras it builds a transport, a dispatcher, memory streams and a task group per request and tears
them down again. This module runs such a request through the same kernel (`serve_one`: the
same runner, handlers, validation, middleware and error ladder) and writes its answer as each
era's transport would (docs/decisions.md, "MCP requests as single exchanges").

Only the plain case is taken: a POST the SDK would pass on to its kernel (its own security,
Accept, Content-Type and envelope checks, called here), holding one request other than
`initialize` and `subscriptions/listen`. Anything else, and every refusal, is handed to the
SDK's transport with the body replayed, so its answers are its own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.runner import modern_error_data, serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp.shared.jsonrpc_dispatcher import (
    handler_exception_to_error_data,
    progress_token_from_params,
)
from mcp.shared.message import MessageMetadata, ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    ProgressToken,
    RequestId,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Scope, Send

from gateway.serving.asgi import JSON_TYPE, send_bytes

log = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
NOT_SINGLE = frozenset({"initialize", "subscriptions/listen"})  # the SDK's own paths


@dataclass
class Exchange:
    """The request's dispatch context: a reply and nothing else (the SDK's `DispatchContext`
    as its single-exchange entry and its stateless JSON transport give it)."""

    transport: TransportContext
    request_id: RequestId
    message_metadata: MessageMetadata
    progress_token: ProgressToken | None = None
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = field(default=False, init=False)

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None,
                               opts: CallOptions | None = None) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None,
                     opts: CallOptions | None = None) -> None:
        return None  # a JSON answer carries the reply only (as the SDK drops it there)

    async def progress(self, progress: float, total: float | None = None,
                       message: str | None = None) -> None:
        return None


class SingleExchange:
    """Answers the plain POSTs of both eras through `serve_one`; says False to the rest."""

    def __init__(self, server: Server[Any], security: TransportSecuritySettings) -> None:
        self.server = server
        self.security = TransportSecurityMiddleware(security)
        # `get_tool_input_schema` answers None for every tool (gateway/mcp/server.py): no
        # `Mcp-Param-*` header is declared, so the SDK's header check never refuses one.
        assert server.get_tool_input_schema is not None
        self.lifespan_state: Any = None

    async def answer(self, scope: Scope, body: bytes, send: Send) -> bool:
        """True once the request was answered; False when it is the SDK transport's."""
        request = Request(scope, _no_receive)
        headers = request.headers
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if (headers.get(SESSION_HEADER) is not None or not check_accept_headers(request)[0]
                or not _json_content(headers.get("content-type", ""))):
            return False
        if await self.security.validate_request(request, is_post=True) is not None:
            return False
        try:
            decoded = orjson.loads(body)
        except orjson.JSONDecodeError:
            return False
        if not isinstance(decoded, dict) or "id" not in decoded \
                or decoded.get("method") in NOT_SINGLE:
            return False
        try:
            message = JSONRPCRequest.model_validate(decoded, by_name=False)
        except ValidationError:
            return False
        if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS:
            await self._handshake_era(request, message, version, send)
            return True
        if find_duplicated_routing_header(headers.items()) is not None:
            return False
        verdict = classify_inbound_request(decoded, headers=dict(headers))
        if not isinstance(verdict, InboundModernRoute):
            return False
        await self._modern_era(request, message, verdict, send)
        return True

    async def _serve(self, exchange: Exchange, message: JSONRPCRequest,
                     connection: Connection) -> dict[str, Any]:
        """The request through the SDK's kernel: its runner, handlers and middleware."""
        return await serve_one(self.server, exchange, message.method, message.params,
                               connection=connection, lifespan_state=self.lifespan_state)

    async def _handshake_era(self, request: Request, message: JSONRPCRequest,
                             version: str | None, send: Send) -> None:
        """As the stateless JSON transport answers: HTTP 200 with the response or the error
        its dispatcher makes of what the handler raised (`code=0` for the unmapped)."""
        connection = Connection.from_envelope(version or DEFAULT_NEGOTIATED_VERSION, None, None)
        exchange = _exchange(message, TransportContext(kind="streamable-http",
                                                       can_send_request=False),
                             ServerMessageMetadata(request_context=request,
                                                   can_send_request=False))
        try:
            result = await self._serve(exchange, message, connection)
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:
                log.exception("handler for %r raised", message.method)
                error = ErrorData(code=0, message=str(exc))
            reply = JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
            await _send(send, 200, reply.model_dump_json(by_alias=True,
                                                         exclude_unset=True).encode())
            return
        await _send(send, 200, _response(message.id, result))

    async def _modern_era(self, request: Request, message: JSONRPCRequest,
                          verdict: InboundModernRoute, send: Send) -> None:
        """As the SDK's 2026-07-28 JSON entry answers: the error's table-mapped status."""
        connection = Connection.from_envelope(verdict.protocol_version, verdict.client_info,
                                              verdict.client_capabilities)
        exchange = _exchange(message, TransportContext(kind="streamable-http",
                                                       can_send_request=False,
                                                       headers=request.headers),
                             ServerMessageMetadata(request_context=request))
        try:
            result = await self._serve(exchange, message, connection)
        except Exception as exc:
            error = modern_error_data(exc)
            reply = JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
            body = reply.model_dump(mode="json", by_alias=True, exclude_none=True)
            await _send(send, ERROR_CODE_HTTP_STATUS.get(error.code, 200), orjson.dumps(body))
            return
        await _send(send, 200, _response(message.id, result))


def _exchange(message: JSONRPCRequest, transport: TransportContext,
              metadata: ServerMessageMetadata) -> Exchange:
    return Exchange(transport=transport, request_id=message.id, message_metadata=metadata,
                    progress_token=progress_token_from_params(message.params))


def _response(request_id: RequestId, result: dict[str, Any]) -> bytes:
    """The JSON-RPC response the SDK's `JSONRPCResponse` dumps, for a result the kernel already
    put in its wire form (`ServerRunner._serialize`)."""
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


async def _send(send: Send, status: int, body: bytes) -> None:
    await send_bytes(send, status, body, [(b"content-type", JSON_TYPE)])


def _json_content(content_type: str) -> bool:
    """`application/json` as both eras' transports require it (the handshake-era one is the
    stricter: one of the media types before any parameter is exactly that)."""
    media = content_type.split(";")[0]
    return content_type.lower().startswith("application/json") and any(
        part.strip() == "application/json" for part in media.split(","))


async def _no_receive() -> Any:
    raise RuntimeError("the body was read already")
