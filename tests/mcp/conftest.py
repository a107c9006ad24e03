"""What the in-process MCP tests share: a gateway in front of an in-memory dev engine, its
fixtures (`mcp_settings`, `gw`, `key`), the SDK's client and a plain HTTP client on it, and an
image remembered through the tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client

from gateway.app import Gateway, create_app
from gateway.config import Settings
from gateway.devengine.app import create_dev_engine
from tests.conftest import create_key
from tests.mcp_helpers import b64, mcp_client, structured

PUBLIC = "http://gateway.test"
URL = PUBLIC + "/mcp"
PNG = b"\x89PNG\r\n\x1a\n" + b"lighthouse-bytes" * 40
MAP = b"\x89PNG\r\n\x1a\n" + b"trail-map-bytes" * 30


@asynccontextmanager
async def running(settings: Settings, transport: httpx.AsyncBaseTransport | None = None
                  ) -> AsyncIterator[Gateway]:
    """A gateway in front of an in-memory dev engine (or `transport`)."""
    engine = create_dev_engine()
    async with engine.router.lifespan_context(engine):
        app = create_app(settings, upstream_transport=transport
                         or httpx.ASGITransport(app=engine))
        async with app.running():
            yield app


@pytest.fixture
def mcp_settings(settings: Settings) -> Settings:
    return settings.with_values(server={"public_url": PUBLIC})


@pytest.fixture
async def gw(mcp_settings: Settings) -> AsyncIterator[Gateway]:
    async with running(mcp_settings) as app:
        yield app


@pytest.fixture
def key(mcp_settings: Settings) -> Callable[..., str]:
    return lambda user, **options: create_key(mcp_settings, user, **options)


def connect(app: Gateway, token: str | None, mode: str = "auto",
            headers: dict[str, str] | None = None) -> Any:
    return mcp_client(URL, token, mode=mode, transport=httpx2.ASGITransport(app=app),
                      headers=headers)


def http(app: Gateway, token: str | None = None, **headers: str) -> httpx.AsyncClient:
    sent = dict(headers)
    if token:
        sent["Authorization"] = f"Bearer {token}"
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PUBLIC,
                             headers=sent)


async def remember(client: Client, session: str = "trip") -> dict[str, Any]:
    """An add with an image, then the session's flush: the image is then found by search."""
    added = await client.call_tool("add_memory", {
        "session_id": session, "text": "the lighthouse at dusk, lighthouse.png",
        "files": [{"name": "lighthouse.png", "base64": b64(PNG)}]})
    assert not added.is_error, added
    flushed = await client.call_tool("flush_session", {"session_id": session})
    assert not flushed.is_error, flushed
    return structured(added)
