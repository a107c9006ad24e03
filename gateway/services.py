"""What an owned handler can reach: the app's services and the authenticated caller."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.requests import Request

from gateway.attachments.fetch_guard import FetchGuard
from gateway.attachments.files import FileStore
from gateway.attachments.leases import DEFAULT_LEASE_S, Lease
from gateway.attachments.links import FileLinks
from gateway.config import Settings
from gateway.identity.auth import Authenticator
from gateway.identity.ownership import OwnershipRules
from gateway.identity.principal import Principal
from gateway.llm.client import LlmClient
from gateway.metrics import Metrics
from gateway.search.index import AttachmentIndex
from gateway.serving.inprocess import Answer
from gateway.store import Database
from gateway.toolcalls.service import ToolCallService
from gateway.upstream.client import UpstreamClient
from gateway.upstream.proxy import Proxy
from gateway.userdata.erasure import Eraser
from gateway.userdata.refusal import ErasedUsers


@dataclass
class Services:
    settings: Settings
    db: Database
    upstream: UpstreamClient
    rules: OwnershipRules
    proxy: Proxy
    authenticator: Authenticator
    files: FileStore
    attachment_index: AttachmentIndex
    tool_calls: ToolCallService
    links: FileLinks  # download URLs, and how the engine gets stored files
    fetch_guard: FetchGuard  # which http(s) URIs the engine and the job service may be sent
    eraser: Eraser  # a user's erasure, across rows, files and the engine (SPEC §17)
    erased_users: ErasedUsers  # whether an id named by a credential was erased
    llm: LlmClient | None = None
    metrics: Metrics = field(default_factory=Metrics)
    # This process's hold on the intents it records (owner token and lease).
    lease: Lease = field(default_factory=lambda: Lease(DEFAULT_LEASE_S))
    # Per-feature helpers (file store, summariser, metrics...) registered at assembly.
    extras: dict[str, Any] = field(default_factory=dict)
    background: set[asyncio.Task[Any]] = field(default_factory=set)

    def spawn(self, work: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]:
        """Run work off the request path; its failure is logged, never raised to a request."""

        async def guarded() -> None:
            try:
                await work
            except Exception:
                logging.getLogger("gateway").exception("background work failed: %s", what)

        task = asyncio.get_running_loop().create_task(guarded())
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task

    async def drain(self) -> None:
        """Wait for background work (called at shutdown and by tests)."""
        while self.background:
            await asyncio.gather(*list(self.background), return_exceptions=True)


class Host(Protocol):
    """What a front door (MCP, the console) is given of the app: its settings, its services and
    `call_as`, the in-process call of a REST route as an authenticated principal."""

    settings: Settings
    services: Services

    async def call_as(self, principal: Principal, method: str, path: str,
                      **options: Any) -> Answer: ...


def services(request: Request) -> Services:
    found: Services = request.scope["gateway"]
    return found


def user_id(request: Request) -> str:
    found: str = request.scope["user_id"]
    return found


def request_id(request: Request) -> str:
    found: str = request.scope["request_id"]
    return found
