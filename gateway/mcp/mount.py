"""The MCP door in the app (SPEC §19): metadata, credentials, scopes, then the SDK's transport.

The app hands this door every request for `mcp.path` and the protected-resource metadata
before it authenticates anything (gateway/app.py), because the endpoint answers a missing or
bad credential as MCP's authorization spec asks: 401 with `WWW-Authenticate: Bearer
resource_metadata=…`. The credential is checked by the gateway's own authenticator (keys,
service keys, JWTs for the endpoint's audience) and never travels further. A call outside the
credential's scopes is refused here, before the SDK runs: HTTP 403 with `insufficient_scope`.

The SDK serves the rest statelessly (no MCP session lives in a process, JSON answers), so any
worker or instance answers any request; its session manager runs in a task the app starts and
stops with itself. Its DNS-rebinding checks allow loopback and the `server.public_url` host.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import orjson
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from gateway import __version__
from gateway.errors import InsufficientScope, MethodNotAllowed, Unauthorized, error_body
from gateway.identity import acting
from gateway.identity.principal import ALL_SCOPES, PRINCIPAL_KEY, READ, WRITE, Principal
from gateway.mcp.errors import INSUFFICIENT_SCOPE
from gateway.mcp.exchange import SingleExchange
from gateway.mcp.metadata import READ_SCOPE, WRITE_SCOPE, Endpoint
from gateway.mcp.server import build_server
from gateway.mcp.tools import BY_NAME
from gateway.serving.asgi import (
    JSON_TYPE,
    declared_length,
    header,
    read_body,
    replay,
    send_bytes,
)

if TYPE_CHECKING:
    from gateway.services import Host

READ_METHODS = frozenset({"resources/list", "resources/read", "resources/templates/list"})


class McpDoor:
    def __init__(self, gateway: Host) -> None:
        self.gateway = gateway
        self.endpoint = Endpoint.from_settings(gateway.settings)
        self.paths = frozenset({self.endpoint.path, self.endpoint.path + "/",
                                *self.endpoint.metadata_paths})
        self._server = build_server(gateway, __version__)
        self._security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=self.endpoint.allowed_hosts(),
            allowed_origins=self.endpoint.allowed_origins(),
        )
        # Plain POSTs are single exchanges through the SDK's kernel; None: all to its transport
        self.exchange: SingleExchange | None = SingleExchange(self._server, self._security)
        self._manager: StreamableHTTPSessionManager | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    # --- lifecycle: the SDK's session manager, in a task of its own ------------------------

    async def start(self) -> None:
        manager = StreamableHTTPSessionManager(
            app=self._server, json_response=True, stateless=True,
            security_settings=self._security,
            max_request_body_size=self.gateway.settings.limits.max_body_bytes,
        )
        ready, stop = asyncio.Event(), asyncio.Event()

        async def run() -> None:
            async with manager.run():
                ready.set()
                await stop.wait()

        task = asyncio.get_running_loop().create_task(run())
        waiting = asyncio.ensure_future(ready.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.is_set():
            waiting.cancel()
            await task  # raises what stopped it
        if self.exchange is not None:  # the state of the server's lifespan the manager entered
            self.exchange.lifespan_state = manager._lifespan_state
        self._manager, self._stop, self._task = manager, stop, task

    async def stop(self) -> None:
        if self._task is None or self._stop is None:
            return
        self._stop.set()
        with contextlib.suppress(Exception):
            await self._task
        self._manager = self._stop = self._task = None

    # --- requests --------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] in self.endpoint.metadata_paths:
            await self._metadata(scope, send)
            return
        principal = await self._authenticated(scope, send)
        if principal is None:
            return
        manager = self._manager
        if manager is None:
            raise RuntimeError("the MCP endpoint is not started")
        if scope["method"] == "POST":
            limit = self.gateway.settings.limits.max_body_bytes
            partial = not principal.scopes >= ALL_SCOPES
            declared = declared_length(scope)
            body = None
            if partial or (self.exchange is not None and declared is not None
                           and declared <= limit):  # else the SDK's own limit answers
                body = await read_body(scope, receive, limit)
            # a credential that lacks a scope: what the message calls decides (403 or on)
            if partial and not await self._in_scope(principal, body or b"", scope, send):
                return
            if body is not None:
                if self.exchange is not None and await self.exchange.answer(scope, body, send):
                    return
                receive = replay(body, receive)
        await manager.handle_request(scope, receive, send)

    async def _metadata(self, scope: Scope, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            raise MethodNotAllowed(f"{scope['method']} is not allowed on {scope['path']}")
        await send_bytes(send, 200, orjson.dumps(self.endpoint.metadata()),
                         [(b"content-type", JSON_TYPE),
                          (b"cache-control", b"public, max-age=3600")])

    async def _authenticated(self, scope: Scope, send: Send) -> Principal | None:
        """The caller, or None once a 401 with the endpoint's challenge was sent."""
        authorization = (header(scope, b"authorization") or b"").decode("latin-1")
        api_key = (header(scope, b"x-api-key") or b"").decode("latin-1")
        services = self.gateway.services
        try:
            principal = await services.authenticator.principal_for(
                authorization, api_key, jwt_audience=self.endpoint.audience)
            if principal.kind == "admin":  # admin keys reach nothing but /admin/ (SPEC §17)
                raise Unauthorized("admin keys reach only /admin/")
            principal = acting.with_header(principal, header(scope, acting.ACTING_HEADER_KEY))
            acting.require_acting_user(principal)
            if await services.erased_users.is_refused(principal.user_id):
                raise Unauthorized("this user's data was erased")
        except Unauthorized as exc:
            challenge = self.endpoint.challenge(bool(authorization.strip() or api_key.strip()))
            await send_bytes(send, exc.status, _error_bytes(exc, scope), [
                (b"content-type", JSON_TYPE), (b"www-authenticate", challenge.encode())])
            return None
        scope[PRINCIPAL_KEY] = principal
        scope["user_id"] = principal.user_id
        return principal

    async def _in_scope(self, principal: Principal, body: bytes, scope: Scope,
                        send: Send) -> bool:
        """False once a 403 was sent for a message the credential's scopes do not allow."""
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            return True  # the SDK answers a parse error
        messages = message if isinstance(message, list) else [message]
        for one in messages:
            needed = needed_scope(one)
            if needed is not None and not principal.allows(needed):
                await self._refuse_scope(needed, one, scope, send)
                return False
        return True

    async def _refuse_scope(self, needed: str, message: Any, scope: Scope, send: Send) -> None:
        wire_scope = WRITE_SCOPE if needed == WRITE else READ_SCOPE
        exc = InsufficientScope(f"this credential is not allowed to {needed} "
                                f"(it needs {wire_scope})")
        error = error_body(exc, scope["request_id"])["error"]
        body = {"jsonrpc": "2.0", "id": message.get("id") if isinstance(message, dict) else None,
                "error": {"code": INSUFFICIENT_SCOPE, "message": exc.message, "data": error}}
        await send_bytes(send, 403, orjson.dumps(body), [
            (b"content-type", JSON_TYPE),
            (b"www-authenticate", self.endpoint.insufficient_scope(wire_scope).encode())])


def needed_scope(message: Any) -> str | None:
    """The scope a JSON-RPC message needs: `write` for a write tool, `read` for a read tool and
    the resources; None for everything else (the handshake, `tools/list`, pings)."""
    if not isinstance(message, dict):
        return None
    method = message.get("method")
    if method == "tools/call":
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        spec = BY_NAME.get(name) if isinstance(name, str) else None
        if spec is None:
            return None
        return WRITE if spec.writes else READ
    return READ if method in READ_METHODS else None


def _error_bytes(exc: Unauthorized, scope: Scope) -> bytes:
    return orjson.dumps(error_body(exc, scope["request_id"]))
