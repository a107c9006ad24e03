"""Shared fixtures: settings on a temp storage root, a respx-faked engine, an in-process app.

Modules marked `both_databases` run each test that uses `settings` twice: on SQLite and on
PostgreSQL (a throw-away cluster started once per session, a new database per test). A cluster
that cannot start fails those tests; nothing is skipped.
"""

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
from gateway.ids import now_ms
from gateway.store.database import is_postgresql, migrate
from tests import databases, postgres_server
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


BACKENDS = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "both_databases"
    ):
        metafunc.parametrize("database_backend", BACKENDS, indirect=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[postgres_server.PostgresServer]:
    """One PostgreSQL cluster for the session, stopped by PID at the end."""
    server = postgres_server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_database(postgres: postgres_server.PostgresServer) -> str:
    """A migrated database shared by the session's tests; emptied before each."""
    url = postgres.create_database()
    migrate(url)
    return url


@pytest.fixture
def database_backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def database_url(database_backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A new, empty database of the test's backend: a file, or a PostgreSQL database."""
    if database_backend == "postgresql":
        server: postgres_server.PostgresServer = request.getfixturevalue("postgres")
        url: str = request.getfixturevalue("postgres_database")
        server.empty_tables(url)
        return url
    return str(tmp_path / "gw.db")


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


def storage_values(tmp_path: Path, server: S3Server | None, monkeypatch: pytest.MonkeyPatch,
                   database: str | None = None) -> dict[str, str]:
    """The storage keys of a test: files on disk under tmp_path, or on `server` when given."""
    values = {"root": str(tmp_path / "storage"),
              "database": database or str(tmp_path / "gw.db")}
    if server is not None:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        # A fresh prefix per test: every test sees an empty store.
        values["files"] = f"s3://{server.bucket}/t-{secrets.token_hex(6)}"
        values["s3_endpoint_url"] = server.endpoint_url
        values["s3_region"] = server.region
    return values


@pytest.fixture
def settings(tmp_path: Path, database_url: str, files_backend: str,
             request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Settings:
    return Settings().with_values(
        upstream={"base_url": ENGINE},
        storage=storage_values(
            tmp_path, request.getfixturevalue("s3_server") if files_backend == "s3" else None,
            monkeypatch, database_url),
    )


@pytest.fixture
def engine() -> respx.MockRouter:
    """The fake upstream engine; tests add routes to it."""
    return respx.MockRouter(base_url=ENGINE, assert_all_called=False)


def create_key(settings: Settings, user_id: str) -> str:
    """A key made as `memory-gateway keys create` makes it (database migrated first)."""
    if not is_postgresql(settings.storage.database):  # the session's PostgreSQL one is migrated
        migrate(settings.storage.database)
    new = generate_key(user_id)
    databases.execute(
        settings.storage.database,
        "INSERT INTO api_keys (id, user_id, secret_sha256, created_at_ms) VALUES (?, ?, ?, ?)",
        new.key_id, new.user_id, hash_secret(new.secret), now_ms(),
    )
    return new.token


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
