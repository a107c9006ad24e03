"""Shared fixtures: settings on a temp storage root, a respx-faked engine, an in-process app.

Modules marked `both_databases` run each test that uses `settings` twice: on SQLite and on
PostgreSQL (a throw-away cluster started once per session, a new database per test). A cluster
that cannot start fails those tests; nothing is skipped.

The app reaches the faked engine through an httpx transport, except in modules marked
`both_clients` (the route suite): there each test runs once per production upstream client,
each over a real loopback socket to the same faked engine (tests/loopback_engine.py). Modules
marked both ways run twice, not four times: SQLite with the native client, PostgreSQL with
httpx (the database and the upstream client do not meet).

Modules marked `on_both_stores` run each test with files on local disk and on S3 (SeaweedFS,
started once per session on free loopback ports, a fresh prefix per test).

No in-process test asks a real resolver (the machine may have no DNS): the fetch guard's names
resolve through `SUITE_DNS` (tests/fake_dns.py).

`--fast` (`scripts/test --fast`) is the edit loop: pure logic, route models and in-process
routes on SQLite and local files. It leaves out tests/e2e/ and tests/reliability/, every test
that uses a server fixture (PostgreSQL, S3, the OpenID provider), and every test marked
`processes`; the both-databases and both-stores parametrisations run their SQLite and disk
case only. A fast test that starts a process anyway fails, naming the marker it lacks.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest
import respx
from hypothesis import settings as hypothesis_settings

from gateway.app import Gateway, create_app
from gateway.attachments import fetch_guard
from gateway.config import Settings
from gateway.identity.auth import generate_key, hash_secret
from gateway.store.database import is_postgresql, migrate
from gateway.store.ids import now_ms
from tests import databases, postgres_server
from tests.fake_dns import SUITE_DNS
from tests.loopback_engine import LoopbackEngine
from tests.oidc_server import OidcProvider, oidc_provider
from tests.s3_server import S3Server, seaweedfs

ENGINE = "http://engine.test"
UPSTREAM_CLIENTS = ("native", "httpx")
# The whole-exchange deadline over loopback: an engine that never answers costs this long.
LOOPBACK_TIMEOUT_S = 2.0

# CI runs the property tests on a fixed example sequence (no timing deadlines on a shared,
# noisy machine); local runs stay random to keep finding new cases.
hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")
# The edit loop tries fewer generated examples per property; the whole suite keeps the default.
FAST_EXAMPLES = 20  # examples a property under --fast
hypothesis_settings.register_profile("fast", max_examples=FAST_EXAMPLES, deadline=None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def suite_dns() -> Iterator[None]:
    """Every guard built without its own resolver resolves through the suite's table (from
    the session's start: module-scoped apps are built before function-scoped fixtures)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fetch_guard, "default_resolver", SUITE_DNS.resolve)
        yield


BACKENDS = ("sqlite", "postgresql")
FILE_BACKENDS = ("disk", "s3")
# What --fast leaves out: the folders of real processes and faults, and the tests that use a
# server the suite starts (directly or through another fixture).
SLOW_FOLDERS = ("e2e", "reliability")
SERVER_FIXTURES = frozenset({"postgres", "postgres_database", "s3_server", "oidc"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fast", action="store_true",
                     help="the edit loop: in-process tests on SQLite and local files only")


def fast(config: pytest.Config) -> bool:
    return bool(config.getoption("--fast"))


def pytest_configure(config: pytest.Config) -> None:
    if fast(config):
        hypothesis_settings.load_profile("fast")


def is_slow(item: pytest.Item) -> bool:
    folder = Path(str(item.path)).relative_to(Path(__file__).parent).parts[0]
    return (folder in SLOW_FOLDERS or item.get_closest_marker("processes") is not None
            or not SERVER_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not fast(config):
        return
    slow = [item for item in items if is_slow(item)]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not is_slow(item)]
    for item in items:  # a property's own @settings would outrank the "fast" profile
        fewer_examples(getattr(item, "obj", None))


def fewer_examples(test: object, most: int = FAST_EXAMPLES) -> None:
    """At most `most` examples for a property test, whatever its own @settings asks (hypothesis
    reads the settings off the wrapped test when it runs)."""
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if own is not None and own.max_examples > most:
        test._hypothesis_internal_use_settings = hypothesis_settings(  # type: ignore[union-attr]
            own, max_examples=most)


@pytest.fixture(autouse=True)
def no_process_in_the_fast_loop(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under --fast, a test that starts a process fails loudly: it belongs outside the loop."""
    if not fast(request.config):
        yield
        return

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"{request.node.nodeid} starts a process under --fast: mark it "
                             "@pytest.mark.processes (or use a server fixture)")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", refuse)
        yield


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    def marked(name: str, fixture: str) -> bool:
        return (fixture in metafunc.fixturenames
                and metafunc.definition.get_closest_marker(name) is not None)

    quick = fast(metafunc.config)  # one case of each axis: SQLite, local files, native client
    backends = BACKENDS[:1] if quick else BACKENDS
    file_backends = FILE_BACKENDS[:1] if quick else FILE_BACKENDS
    clients = UPSTREAM_CLIENTS[:1] if quick else UPSTREAM_CLIENTS
    on_databases = marked("both_databases", "database_backend")
    on_clients = marked("both_clients", "upstream_client")
    if on_databases and on_clients:  # paired, not crossed: the two layers do not meet
        pairs = list(zip(backends, clients, strict=True))
        metafunc.parametrize(("database_backend", "upstream_client"), pairs, indirect=True,
                             ids=[f"{backend}-{client}" for backend, client in pairs])
    elif on_databases:
        metafunc.parametrize("database_backend", backends, indirect=True)
    elif on_clients:
        metafunc.parametrize("upstream_client", clients, indirect=True)
    if marked("on_both_stores", "files_backend"):
        metafunc.parametrize("files_backend", file_backends, indirect=True)


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


@pytest.fixture(scope="session")
def oidc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    """A real OpenID provider (tests/oidc_server.py), started once for the session by the first
    test that needs it; `oidc.mint(user_id)` gives a JWT for any user."""
    with oidc_provider(tmp_path_factory.mktemp("oidc")) as provider:
        yield provider


def jwt_values(provider: OidcProvider, **extra: object) -> dict[str, object]:
    """The [auth.jwt] keys of a gateway that trusts `provider` (discovery from its issuer)."""
    return {"issuer": provider.issuer, "audience": provider.audience, **extra}


@pytest.fixture
def files_backend(request: pytest.FixtureRequest) -> str:
    """Where files go: "disk" (default) or "s3"; modules run on both with `on_both_stores`."""
    return str(getattr(request, "param", "disk"))


# Marks a test module to run each test that uses `settings` on local disk and on S3 (never
# skipped: SeaweedFS is started by the suite, and a failure to start fails the S3 half).
on_both_stores = pytest.mark.on_both_stores


def storage_values(tmp_path: Path, server: S3Server | None, monkeypatch: pytest.MonkeyPatch,
                   database: str | None = None) -> dict[str, str]:
    """The storage keys of a test: files on disk under tmp_path, or on `server` when given;
    the database is `database`, else a SQLite file under tmp_path."""
    values = {"root": str(tmp_path / "storage"), "database": database or str(tmp_path / "gw.db")}
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


def create_key(settings: Settings, user_id: str, *, kind: str = "user",
               scopes: str = "read,write", users: str = "",
               expires_at_ms: int | None = None) -> str:
    """A key made as `memory-gateway keys create` makes it (database migrated first)."""
    if not is_postgresql(settings.storage.database):  # the session's PostgreSQL one is migrated
        migrate(settings.storage.database)
    new = generate_key(user_id)
    databases.execute(
        settings.storage.database,
        "INSERT INTO api_keys (id, user_id, secret_sha256, created_at_ms, kind, scopes,"
        " users_glob, expires_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        new.key_id, new.user_id, hash_secret(new.secret), now_ms(), kind, scopes, users,
        expires_at_ms,
    )
    return new.token


@pytest.fixture
def make_key(settings: Settings) -> Callable[[str], str]:
    return lambda user_id: create_key(settings, user_id)


@pytest.fixture
def upstream_client(request: pytest.FixtureRequest) -> str | None:
    """The production client to reach the engine with over loopback; None = httpx transport."""
    return getattr(request, "param", None)


StartGateway = Callable[[Settings], AbstractAsyncContextManager[Gateway]]


@pytest.fixture
def start_gateway(engine: respx.MockRouter, upstream_client: str | None) -> StartGateway:
    """Runs an app for some settings in front of the faked engine (see the module docstring)."""

    @asynccontextmanager
    async def start(settings: Settings) -> AsyncIterator[Gateway]:
        if upstream_client is None:
            transport = httpx.MockTransport(engine.async_handler)
            gateway = create_app(settings, upstream_transport=transport)
            async with gateway.running():
                yield gateway
            return
        async with LoopbackEngine(engine, ENGINE) as url:
            gateway = create_app(settings.with_values(upstream={
                "base_url": url, "client": upstream_client, "timeout_s": LOOPBACK_TIMEOUT_S}))
            async with gateway.running():
                yield gateway

    return start


@pytest.fixture
async def app(settings: Settings, start_gateway: StartGateway) -> AsyncIterator[Gateway]:
    async with start_gateway(settings) as gateway:
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
