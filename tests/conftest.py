"""Shared fixtures: settings on a temp storage root, a respx-faked engine, an in-process app."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
import respx
from hypothesis import settings as hypothesis_settings

from gateway.app import Gateway, create_app
from gateway.config import Settings
from gateway.identity.auth import generate_key, hash_secret
from gateway.store import keys
from gateway.store.database import connect_sync, migrate
from tests.s3_server import S3Server, seaweedfs

ENGINE = "http://engine.test"

# CI runs the property tests on a fixed example sequence (no timing deadlines on a shared,
# noisy machine); local runs stay random to keep finding new cases.
hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """SeaweedFS, started once for the session by the first test that needs it."""
    with seaweedfs() as server:
        yield server


@pytest.fixture
def files_backend(request: pytest.FixtureRequest) -> str:
    """Where files go: "disk" (default) or "s3"; modules run on both with `on_both_stores`."""
    return getattr(request, "param", "disk")


# Marks a test module to run each test on local disk and on S3 (never skipped: SeaweedFS is
# started by the suite, and a failure to start fails the S3 half).
on_both_stores = pytest.mark.parametrize("files_backend", ["disk", "s3"], indirect=True)


def storage_values(tmp_path: Path, server: S3Server | None,
                   monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The storage keys of a test: files on disk under tmp_path, or on `server` when given."""
    values = {"root": str(tmp_path / "storage"), "database": str(tmp_path / "gw.db")}
    if server is not None:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        # A fresh prefix per test: every test sees an empty store.
        values["files"] = f"s3://{server.bucket}/t-{secrets.token_hex(6)}"
        values["s3_endpoint_url"] = server.endpoint_url
        values["s3_region"] = server.region
    return values


@pytest.fixture
def settings(tmp_path: Path, files_backend: str, request: pytest.FixtureRequest,
             monkeypatch: pytest.MonkeyPatch) -> Settings:
    return Settings().with_values(
        upstream={"base_url": ENGINE},
        storage=storage_values(
            tmp_path, request.getfixturevalue("s3_server") if files_backend == "s3" else None,
            monkeypatch),
    )


@pytest.fixture
def engine() -> respx.MockRouter:
    """The fake upstream engine; tests add routes to it."""
    return respx.MockRouter(base_url=ENGINE, assert_all_called=False)


def create_key(settings: Settings, user_id: str) -> str:
    migrate(settings.storage.database)
    conn = connect_sync(settings.storage.database)
    try:
        new = generate_key(user_id)
        keys.insert_sync(conn, new.key_id, new.user_id, hash_secret(new.secret))
        return new.token
    finally:
        conn.close()


@pytest.fixture
def make_key(settings: Settings) -> Callable[[str], str]:
    return lambda user_id: create_key(settings, user_id)


@pytest.fixture
async def app(settings: Settings, engine: respx.MockRouter) -> AsyncIterator[Gateway]:
    gateway = create_app(settings, upstream_transport=httpx.MockTransport(engine.async_handler))
    async with gateway.running():
        yield gateway


def client_for(app: Gateway, token: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app, client=("203.0.113.7", 5555)),
        base_url="http://gateway.test",
        headers=headers,
    )


@pytest.fixture
async def alice(app: Gateway, make_key: Callable[[str], str]) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app, make_key("alice")) as client:
        yield client


@pytest.fixture
async def bob(app: Gateway, make_key: Callable[[str], str]) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app, make_key("bob")) as client:
        yield client


@pytest.fixture
async def anonymous(app: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client
