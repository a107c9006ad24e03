"""A recording fake engine and in-process gateways for the security tests."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt as pyjwt
import pytest

from gateway.app import Gateway, create_app
from gateway.config import Settings
from tests.conftest import create_key

Answer = Callable[[httpx.Request], httpx.Response]


def _default_answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"user_id": "bob", "results": [], "data": {}, "result": {}})


@dataclass
class RecordingEngine:
    """Answers every request (by `answer`), keeping what it was sent."""

    answer: Answer = _default_answer
    requests: list[httpx.Request] = field(default_factory=list)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        self.requests.append(request)
        return self.answer(request)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def seen(self) -> list[bytes]:
        """Each request as the bytes an engine reads: target, headers, body."""
        return [b"\n".join([str(r.url).encode(), *(k + b": " + v for k, v in r.headers.raw),
                            r.content]) for r in self.requests]


# The suites' gateways also trust JWTs signed with this secret, so the isolation sweeps can run
# with a JWT for bob as well (the real OpenID provider's tokens: tests/test_jwt.py).
JWT_SECRET = "isolation-suite-secret-of-32-bytes-or-more"
JWT_AUDIENCE = "memory-gateway-tests"
JWT_SETTINGS = {"secret": JWT_SECRET, "audience": JWT_AUDIENCE}


def settings_for(tmp: Path, **upstream: Any) -> Settings:
    return Settings().with_values(
        upstream={"base_url": "http://engine.test", **upstream},
        storage={"root": str(tmp / "storage"), "database": str(tmp / "gw.db")},
        auth={"jwt": JWT_SETTINGS},
    )


def jwt_for(user: str) -> str:
    now = int(time.time())
    return pyjwt.encode({"sub": user, "aud": JWT_AUDIENCE, "iat": now, "exp": now + 3600},
                        JWT_SECRET, "HS256")


@asynccontextmanager
async def gateway_with(settings: Settings, engine: RecordingEngine) -> AsyncIterator[Gateway]:
    app = create_app(settings, upstream_transport=engine.transport())
    async with app.running():
        yield app


# The in-process fixtures the security modules share. A module imports the ones it uses
# (pytest finds a fixture among its globals, under the fixture's name): `engine`, `settings`,
# `app`, `alice`, `bob`.
@pytest.fixture(name="engine")
def engine_fixture() -> RecordingEngine:
    return RecordingEngine()


@pytest.fixture(name="settings")
def settings_fixture(tmp_path: Path) -> Settings:
    return settings_for(tmp_path)


@pytest.fixture(name="app")
async def app_fixture(settings: Settings, engine: RecordingEngine) -> AsyncIterator[Gateway]:
    async with gateway_with(settings, engine) as gateway:
        yield gateway


@pytest.fixture(name="alice")
async def alice_fixture(app: Gateway, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with keyed(app, settings, "alice") as alice:
        yield alice


@pytest.fixture(name="bob")
async def bob_fixture(app: Gateway, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with keyed(app, settings, "bob") as bob:
        yield bob


def client(app: Gateway, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app, client=("203.0.113.9", 1)),
                             base_url="http://gateway.test", headers=headers or {})


def keyed(app: Gateway, settings: Settings, user: str) -> httpx.AsyncClient:
    return client(app, {"Authorization": f"Bearer {create_key(settings, user)}"})


# Every kind of credential that can name a user (SPEC §17): the isolation sweeps run once per
# kind and must find nothing. "service" acts by X-Memory-Gateway-User; "service-glob" is a
# service key restricted to that one user, acting by the route's own user field; "jwt" is a
# token from the identity provider (the gateway must trust JWT_SETTINGS).
CREDENTIAL_KINDS = ("user", "service", "service-glob", "jwt")


def credential_headers(settings: Settings, user: str, kind: str) -> dict[str, str]:
    """Request headers of a credential of `kind` that acts for `user`."""
    if kind == "user":
        return {"Authorization": f"Bearer {create_key(settings, user)}"}
    if kind == "service":
        token = create_key(settings, "backend", kind="service")
        return {"Authorization": f"Bearer {token}", "X-Memory-Gateway-User": user}
    if kind == "service-glob":
        token = create_key(settings, "backend", kind="service", users=user)
        return {"Authorization": f"Bearer {token}"}
    if kind == "jwt":
        return {"Authorization": f"Bearer {jwt_for(user)}"}
    raise AssertionError(kind)


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content) if request.content else None
