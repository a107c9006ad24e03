"""Assembly: the ASGI app that authenticates, routes to an owned handler or the proxy.

One request: request id → public route, or auth (user id) → owned route, or proxy.
`create_app(settings, upstream_transport=...)` is what tests and the CLI call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import tracing
from gateway.attachments import recovery
from gateway.attachments.fetch_guard import FetchGuard
from gateway.attachments.files import create_file_store
from gateway.attachments.leases import Lease
from gateway.attachments.links import NAME_ACCESS, FileLinks
from gateway.config import Settings
from gateway.console import CONSOLE_PREFIX, Console
from gateway.devjobs.runner import DevJobRunner
from gateway.errors import (
    GatewayError,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    RequestTimeout,
    RouteNotFound,
    Unauthorized,
)
from gateway.identity import acting
from gateway.identity.auth import Authenticator
from gateway.identity.jwt import JwtVerifier
from gateway.identity.ownership import OwnershipRules
from gateway.identity.principal import PRINCIPAL_KEY, Principal, require_admin
from gateway.limits.classes import OWNED, owned_classes
from gateway.limits.concurrency import ENGINE_TICKET
from gateway.limits.limiter import LIMIT_HEADERS_KEY, Limiter, with_retry_after
from gateway.llm.client import LlmClient
from gateway.logs import AccessLog
from gateway.metrics import PROXY_ROUTE, UNMATCHED_ROUTE, Metrics
from gateway.routes import OWNED_PREFIXES, PUBLIC_PATHS, PUBLIC_PREFIXES, all_routes
from gateway.search.answers import filtered_answer
from gateway.search.index import AttachmentIndex
from gateway.services import Services
from gateway.serving.asgi import (
    BODY_TIMED_OUT,
    ClientDisconnected,
    header,
    new_request_id,
    send_error,
)
from gateway.serving.inprocess import PREAUTHENTICATED, Answer, call
from gateway.serving.route_index import RouteIndex
from gateway.store import agents, user_rows
from gateway.store import attachments as attachment_store
from gateway.store.database import database_for
from gateway.toolcalls.jobs import HttpJobService, JobService
from gateway.toolcalls.registry import load_registry
from gateway.toolcalls.service import ToolCallService
from gateway.upstream.client import ENGINE_CALLS, EngineCalls, create_upstream
from gateway.upstream.flavors import check_erased_users, flavor_for
from gateway.upstream.proxy import TARGET_KEY, Proxy
from gateway.upstream.routes import parse_allowed
from gateway.upstream.target import parse_target
from gateway.userdata.erasure import Eraser
from gateway.userdata.refusal import ErasedUsers

if TYPE_CHECKING:
    from gateway.tracing import Tracing

log = logging.getLogger("gateway")
access_log = AccessLog()
ROUTE_KEY = "gateway.route"  # scope key: the path template of the owned route that ran
_CLIENT_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
ADMIN_PREFIX = "/admin"

class Gateway:
    def __init__(
        self,
        settings: Settings,
        upstream_transport: httpx.AsyncBaseTransport | None = None,
        llm_transport: httpx.AsyncBaseTransport | None = None,
        jobs_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        check_erased_users(settings)
        self.settings = settings
        self.tracing: Tracing | None = None  # create_app sets it when tracing.enabled
        db = database_for(settings.storage.database)
        files = create_file_store(settings.storage)
        jobs: JobService = (
            HttpJobService(settings.jobs.base_url, settings.jobs.timeout_s, jobs_transport)
            if settings.jobs.base_url
            else DevJobRunner(db, files, settings.jobs.dev_delay_s)
        )
        upstream = create_upstream(settings.upstream, upstream_transport,
                                   settings.limits.max_upstream_answer_bytes)
        rules = OwnershipRules(session_keys=flavor_for(settings).session_keys)
        rules.owns_agent = agents.owns_agent(db)
        rules.session_owner = partial(attachment_store.session_owner, db)
        rules.claim_session = partial(attachment_store.claim_session, db)
        flavor = flavor_for(settings)
        table = flavor.routes.with_routes(parse_allowed(entry)
                                          for entry in settings.upstream.allow_paths)
        links = FileLinks(settings, files, flavor.reads_local_files)
        fetch_guard = FetchGuard.from_settings(settings.upstream)
        jwt_verifier = (JwtVerifier(settings.auth_jwt)
                        if settings.auth_jwt.enabled else None)
        attachment_index = AttachmentIndex(db, links.download_url)
        self.services = Services(
            settings=settings,
            db=db,
            upstream=upstream,
            rules=rules,
            proxy=Proxy(settings, upstream, rules, table, fetch_guard, rules.claim,
                        partial(filtered_answer, attachment_index)),
            authenticator=Authenticator(db, settings.auth.key_cache_ttl_s, jwt_verifier),
            files=files,
            attachment_index=attachment_index,
            links=links,
            fetch_guard=fetch_guard,
            eraser=Eraser(db, files, upstream, flavor),
            erased_users=ErasedUsers(db, settings.auth.erased_users),
            tool_calls=ToolCallService(db, load_registry(settings.tools.registry), jobs,
                                       fetch_guard),
            llm=LlmClient(settings.llm, llm_transport) if settings.llm_enabled else None,
            metrics=Metrics(),
            lease=Lease.for_timeout(settings.upstream.timeout_s),
        )
        self.services.proxy.refused = self.services.erased_users.is_refused
        self.limiter = Limiter(settings, db)
        self._owned_classes = owned_classes(flavor)
        if self.limiter.enabled:
            self.services.proxy.admit = self.limiter.admit_engine
        self.services.proxy.slots = self.limiter.slots
        self._lease_upkeep: asyncio.Task[None] | None = None
        self._usage_upkeep: asyncio.Task[None] | None = None
        self._metrics = self.services.metrics if settings.metrics.enabled else None
        self.routes: list[BaseRoute] = all_routes(settings)
        self._index = RouteIndex(self.routes, OWNED_PREFIXES)
        self.console = Console(self) if settings.console.enabled else None
        self.mcp: McpDoor | None = None  # SPEC §19; off, the MCP SDK is never imported
        if settings.mcp.enabled:
            from gateway.mcp.mount import McpDoor

            self.mcp = McpDoor(self)

    # --- lifecycle ------------------------------------------------------------------------

    async def startup(self) -> None:
        os.makedirs(self.settings.storage.root, exist_ok=True)
        try:
            await self.services.files.open_store()
            await self.services.db.open()
            if self.services.links.access == NAME_ACCESS:
                log.warning("the engine gets stored files by name only: set server.public_url "
                            "(or keep files on S3) to hand them over as signed URLs")
            await self._settle_attachments()
            if self.mcp is not None:
                await self.mcp.start()
        except BaseException:
            # Close what was opened: the database's threads would keep the process alive.
            await self.shutdown()
            raise
        loop = asyncio.get_running_loop()
        self._lease_upkeep = loop.create_task(recovery.keep_leases(
            self.services.db, self.services.files, self.services.lease, _log_settled
        ))
        interval = self.settings.auth.last_used_interval_s
        if interval > 0:
            self._usage_upkeep = loop.create_task(_write_usage(self.services, interval))

    async def _settle_attachments(self) -> None:
        """Finish what a crash interrupted, then give every live resource its mapping."""
        _log_settled(await recovery.settle_leftover_intents(
            self.services.db, self.services.files, self.services.lease
        ))
        made = await attachment_store.backfill(self.services.db)
        if made:
            log.info("backfilled %d resource mapping(s)", made)
        if await user_rows.unfinished(self.services.db):
            # Off the start-up path: an engine that is down must not keep the gateway down.
            self.services.spawn(self._finish_erasures(), "finishing interrupted erasures")

    async def _finish_erasures(self) -> None:
        for user_id in await self.services.eraser.resume_all():
            log.warning("finished the interrupted erasure of user %s", user_id)

    async def shutdown(self) -> None:
        if self.mcp is not None:
            await self.mcp.stop()
        for task in (self._lease_upkeep, self._usage_upkeep):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._lease_upkeep = self._usage_upkeep = None
        try:  # nothing to write unless requests were served, so the database is open
            await self.services.authenticator.flush_usage()
        except Exception:
            log.exception("could not write the keys' last-used times")
        await self.services.drain()
        if self.tracing is not None:
            self.tracing.shutdown()
        if self.services.llm is not None:
            await self.services.llm.aclose()
        await self.services.upstream.aclose()
        await self.services.tool_calls.aclose()
        await self.services.files.close()
        await self.services.db.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        await self.startup()
        try:
            yield self
        finally:
            await self.shutdown()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        try:
            await self.startup()
        except Exception as exc:
            log.exception("start-up failed")
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
        await send({"type": "lifespan.startup.complete"})
        message = await receive()
        assert message["type"] == "lifespan.shutdown"
        await self.shutdown()
        await send({"type": "lifespan.shutdown.complete"})

    # --- requests -------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1003})
            return
        client_id = header(scope, b"x-request-id")
        if client_id is not None and _CLIENT_REQUEST_ID.fullmatch(client_id):
            request_id = client_id.decode()
        else:
            request_id = new_request_id()
        scope["request_id"] = request_id
        scope["gateway"] = self.services
        status = 0  # the response's, once started
        request_id_header = (b"x-request-id", request_id.encode())

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                # Names of other lengths are not lowered: most headers are not this one.
                headers = [h for h in message.get("headers", ())
                           if len(h[0]) != 12 or h[0].lower() != b"x-request-id"]
                headers.append(request_id_header)
                limit_headers = scope.get(LIMIT_HEADERS_KEY)
                if limit_headers:
                    headers.extend(limit_headers)
                message["headers"] = headers
            await send(message)

        began = time.perf_counter()
        calls = EngineCalls()
        calls_token = ENGINE_CALLS.set(calls)
        traced = self.tracing
        trace = None if traced is None else traced.begin(scope)
        try:
            if trace is None:
                await self._dispatch(scope, receive, send_with_id, request_id)
            else:
                trace_token = tracing.CURRENT.set(trace)
                try:
                    await self._dispatch(scope, receive, send_with_id, request_id)
                finally:
                    tracing.CURRENT.reset(trace_token)
        except ClientDisconnected:
            if scope.get(BODY_TIMED_OUT):  # the server answered 408 (serving/connections.py)
                status = RequestTimeout.status
            return
        except GatewayError as exc:
            if self._metrics is not None:
                self._metrics.gateway_error(exc)
            if isinstance(exc, RateLimited):
                with_retry_after(scope)
            if status:
                log.warning("error after response start (%s): %s", request_id, exc.message)
                raise
            await send_error(send_with_id, exc, request_id)
        except Exception:
            log.exception("unhandled error in request %s", request_id)
            if status:
                raise
            await send_error(send_with_id, GatewayError(), request_id)
        finally:
            self._finished(scope, status or 499, time.perf_counter() - began, calls)
            ENGINE_CALLS.reset(calls_token)
            if traced is not None and isinstance(trace, tracing.Trace):  # sampled and sent: spans
                try:
                    traced.finish(trace, scope, status or 499, scope.get(ROUTE_KEY))
                except Exception:  # a trace lost, never a request
                    log.exception("could not record the spans of request %s", request_id)

    def _finished(self, scope: Scope, status: int, seconds: float, calls: EngineCalls) -> None:
        """Count the request and write its access line; status 499: the client left first."""
        route = scope.get(ROUTE_KEY, UNMATCHED_ROUTE)
        if self._metrics is not None:
            self._metrics.request(route, scope["method"], status, seconds)
        if access_log.enabled():
            method, path = scope["method"], scope["path"]
            access_log.write(f"{method} {path} {status}", {
                "request_id": scope["request_id"],
                "user_id": scope.get("user_id"),
                "method": method,
                "route": route,
                "path": path,
                "status": status,
                # Whole microseconds as ms: `x * 1e6 // 1 / 1000` is int(x * 1e6) / 1000 for any
                # duration, with no int made (a third fewer instructions, for two fields a line).
                "duration_ms": seconds * 1e6 // 1 / 1000,
                "upstream_status": calls.status,
                "upstream_ms": calls.seconds * 1e6 // 1 / 1000,
            })

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> None:
        target = parse_target(scope["path"], scope.get("raw_path"),
                              scope.get("query_string", b""))
        # Routing, interception and the proxy all see the one normalised path (SPEC §5).
        path = target.path
        scope[TARGET_KEY] = target
        if path != scope["path"]:
            scope["path"], scope["raw_path"] = path, quote(path).encode()
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            await self._route(scope, receive, send, path)
            return
        if self.console is not None and (path == CONSOLE_PREFIX
                                         or path.startswith(CONSOLE_PREFIX + "/")):
            # The console's own session, never a key header, opens it (SPEC §20).
            scope[ROUTE_KEY] = CONSOLE_PREFIX
            await self.console(scope, receive, send)
            return
        if self.mcp is not None and path in self.mcp.paths:  # its own 401s and metadata
            scope[ROUTE_KEY] = path.rstrip("/") or path
            await self.mcp(scope, receive, send)
            return
        principal = scope.get(PREAUTHENTICATED)  # an in-process call (gateway/serving/inprocess.py)
        if principal is None:
            with tracing.span("auth"):
                principal = await self.services.authenticator.principal_for(
                    (header(scope, b"authorization") or b"").decode("latin-1"),
                    (header(scope, b"x-api-key") or b"").decode("latin-1"),
                )
        if path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/"):
            scope[PRINCIPAL_KEY] = principal
            scope["user_id"] = principal.user_id
            require_admin(scope)
            if not await self._route(scope, receive, send, path):
                raise RouteNotFound("no such endpoint")
            return
        if principal.kind == "admin":  # admin keys reach nothing but /admin/ (SPEC §17)
            raise RouteNotFound("an admin key reaches only the admin API (/admin/...); "
                                "this route takes a user key, a service key or a JWT")
        principal = acting.with_header(principal, header(scope, acting.ACTING_HEADER_KEY))
        scope[PRINCIPAL_KEY] = principal
        user = scope["user_id"] = principal.user_id
        # An erased user is refused to every credential (SPEC §17); a service key acting by a
        # route's user field is checked once that user is known (acting.settle_user).
        if user and await self.services.erased_users.is_refused(user):
            raise Unauthorized("this user's data was erased")
        if path.startswith(self._index.starts) and await self._route(scope, receive, send, path):
            return
        scope[ROUTE_KEY] = PROXY_ROUTE
        await self.services.proxy(scope, receive, send, user, request_id)

    async def call_as(self, principal: Principal, method: str, path: str,
                      **options: Any) -> Answer:
        """`method path` served to `principal` in process, as if it had sent its credential:
        the door the MCP tools and the console use into the REST routes' rules."""
        return await call(self, principal, method, path, **options)

    def add_route(self, route: BaseRoute) -> None:
        """Serve `route` before every other owned route (tests add failing ones)."""
        self.routes.insert(0, route)
        self._index = RouteIndex(self.routes, OWNED_PREFIXES)

    async def _route(self, scope: Scope, receive: Receive, send: Send, path: str) -> bool:
        """Run the owned route for this request; False when the path is not the gateway's."""
        plain = None if scope.get("root_path") else self._index.plain.get(path)
        if plain is not None and scope["method"] in plain.methods:
            # the one route of a path without parameters, for one of its methods: what
            # Route.matches and Route.handle would do, without matching the path again
            scope["endpoint"], scope["path_params"] = plain.route.endpoint, {}
            await self._run(scope, receive, send, plain.route, plain.app)
            return True
        partial: BaseRoute | None = None
        for route in self._index.candidates(scope):
            match, child = route.matches(scope)
            if match is Match.FULL:
                scope.update(child)
                await self._run(scope, receive, send, route, route.handle)
                return True
            if match is Match.PARTIAL and partial is None:
                partial = route
        if partial is not None and not getattr(partial, "passes_other_methods", False):
            raise MethodNotAllowed(f"{scope['method']} is not allowed on {path}")
        if any(path == p or path.startswith(p + "/") for p in OWNED_PREFIXES):
            raise NotFound(f"no such endpoint: {path}")
        return False

    async def _run(self, scope: Scope, receive: Receive, send: Send, route: BaseRoute,
                   app: ASGIApp) -> None:
        """The matched owned route: its scope and limits checked, then `app` run."""
        scope[ROUTE_KEY] = route.path  # type: ignore[attr-defined]
        principal = scope.get(PRINCIPAL_KEY)
        if principal is not None:
            _admit(principal, scope["method"], route)
        if self.limiter.enabled:
            await self.limiter.admit(scope, self._owned_classes.get(
                (scope["method"], scope[ROUTE_KEY]), OWNED))
        slots = self.limiter.slots
        if slots is None:
            await app(scope, receive, send)
            return
        # The user's engine-call slot, taken at the route's first engine call, wherever it is
        # made (the user it acts as is read then: a service key's is fixed by its route); the
        # pass-through takes its own (gateway/upstream/proxy.py).
        ticket = slots.ticket(scope)
        ticket_token = ENGINE_TICKET.set(ticket)
        try:
            await app(scope, receive, send)
        finally:
            ticket.close()
            ENGINE_TICKET.reset(ticket_token)


async def _write_usage(svc: Services, interval: float) -> None:
    """Every `interval` seconds, the keys' last-used times noted since the last write."""
    while True:
        await asyncio.sleep(interval)
        try:
            await svc.authenticator.flush_usage()
        except Exception:
            log.exception("could not write the keys' last-used times (kept for the next try)")


def _admit(principal: Principal, method: str, route: BaseRoute) -> None:
    """An owned route's scope check; a service key must have said whom it acts for, except on
    an engine path, whose handler takes the user from the route's user field."""
    # Admin keys honour their scopes like every credential (SPEC §17): a `read` admin key
    # reads the admin API and changes nothing.
    acting.require_scope(principal, method in ("GET", "HEAD") or getattr(route, "reads", False))
    if principal.kind != "admin" and not getattr(route, "names_user_in_body", False):
        acting.require_acting_user(principal)


def _log_settled(settled: recovery.Recovery) -> None:
    if settled.committed:
        log.warning("settled %d interrupted add/upload(s) by keeping their data",
                    len(settled.committed))
    if settled.dropped:
        log.warning("dropped %d interrupted add/upload(s) that never reached the engine",
                    len(settled.dropped))


def create_app(
    settings: Settings,
    *,
    upstream_transport: httpx.AsyncBaseTransport | None = None,
    llm_transport: httpx.AsyncBaseTransport | None = None,
    jobs_transport: httpx.AsyncBaseTransport | None = None,
    span_exporter: Any = None,
) -> Gateway:
    """The gateway app; tests inject fake upstream, model and job-service transports (respx,
    MockTransport) and, with tracing on, a span exporter (the SDK's InMemorySpanExporter)."""
    app = Gateway(settings, upstream_transport, llm_transport, jobs_transport)
    if settings.tracing.enabled:
        from gateway.tracing import Tracing

        app.tracing = Tracing(settings.tracing, span_exporter)
    return app
