"""What an owned handler can reach: the app's services and the authenticated caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from gateway.auth import Authenticator
from gateway.config import Settings
from gateway.ownership import OwnershipRules
from gateway.proxy import Proxy
from gateway.store import Database
from gateway.upstream import UpstreamClient


@dataclass
class Services:
    settings: Settings
    db: Database
    upstream: UpstreamClient
    rules: OwnershipRules
    proxy: Proxy
    authenticator: Authenticator
    # Per-feature helpers (file store, summariser, metrics...) registered at assembly.
    extras: dict[str, Any] = field(default_factory=dict)


def services(request: Request) -> Services:
    found: Services = request.scope["gateway"]
    return found


def user_id(request: Request) -> str:
    found: str = request.scope["user_id"]
    return found


def request_id(request: Request) -> str:
    found: str = request.scope["request_id"]
    return found
