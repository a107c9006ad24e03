"""Credentials of the product's users (SPEC §3, §17): service keys acting for users, scopes,
expiry, last use, and the header that names the acting user."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
import respx

from gateway.app import Gateway
from gateway.config import Settings
from tests import databases
from tests.attachment_helpers import answer_search, engine_ok, episodes
from tests.conftest import StartGateway, client_for, create_key

pytestmark = pytest.mark.both_databases

ADD = {"session_id": "s1", "messages": [
    {"role": "user", "sender_id": "bob", "timestamp": 1764547200000, "content": "hello"}]}


def now_ms() -> int:
    return int(time.time() * 1000)


def keyed(app: Gateway, token: str, **headers: str) -> httpx.AsyncClient:
    client = client_for(app, token)
    client.headers.update(headers)
    return client


def error_code(response: httpx.Response) -> str:
    code: str = response.json()["error"]["code"]
    return code


# --- service keys ------------------------------------------------------------------------


async def test_a_service_key_acts_for_the_user_its_header_names(
    app: Gateway, settings: Settings
) -> None:
    service = create_key(settings, "backend", kind="service")
    async with keyed(app, service, **{"X-Memory-Gateway-User": "bob"}) as as_bob, \
            keyed(app, service, **{"X-Memory-Gateway-User": "alice"}) as as_alice, \
            client_for(app, create_key(settings, "bob")) as bob:
        made = await as_bob.post("/agents", json={"name": "Helper"})
        assert made.status_code == 201, made.text
        agent_id = made.json()["id"]
        # bob's own key sees what the service key made for him; alice, through the same
        # service key, does not.
        assert (await bob.get(f"/agents/{agent_id}")).status_code == 200
        assert (await as_alice.get(f"/agents/{agent_id}")).status_code == 404
        assert [a["id"] for a in (await as_alice.get("/agents")).json()["agents"]] == []


async def test_a_service_key_on_an_owned_route_must_name_its_user(
    app: Gateway, settings: Settings
) -> None:
    service = create_key(settings, "backend", kind="service")
    async with keyed(app, service) as nobody:
        response = await nobody.get("/agents")
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "X-Memory-Gateway-User"


async def test_a_service_key_on_an_engine_route_acts_for_the_routes_user_field(
    app: Gateway, settings: Settings, engine: respx.MockRouter
) -> None:
    routes = engine_ok(engine)
    searched = answer_search(engine, episodes())
    service = create_key(settings, "backend", kind="service")
    async with keyed(app, service) as backend:
        added = await backend.post("/api/v2/memory/add", json=ADD)
        found = await backend.post("/api/v2/memory/search",
                                   json={"query": "hello", "user_id": "bob"})
    assert added.status_code == 200, added.text
    assert found.status_code == 200, found.text
    assert routes["add"].calls.last.request.headers["x-memory-user-id"] == "bob"
    assert searched.calls.last.request.headers["x-memory-user-id"] == "bob"
    # The session is bob's now: bob's own key may add to it, alice's may not.
    owners = databases.rows(settings.storage.database,
                            "SELECT user_id FROM memory_sessions WHERE session_id = ?", "s1")
    assert [row["user_id"] for row in owners] == ["bob"]


async def test_header_and_route_user_field_that_differ_are_403(
    app: Gateway, settings: Settings, engine: respx.MockRouter
) -> None:
    searched = answer_search(engine, episodes())
    service = create_key(settings, "backend", kind="service")
    async with keyed(app, service, **{"X-Memory-Gateway-User": "bob"}) as backend:
        response = await backend.post("/api/v2/memory/search",
                                      json={"query": "x", "user_id": "alice"})
    assert response.status_code == 403
    assert searched.call_count == 0


async def test_an_engine_route_naming_no_user_needs_the_header(
    app: Gateway, settings: Settings, engine: respx.MockRouter
) -> None:
    routes = engine_ok(engine)
    service = create_key(settings, "backend", kind="service")
    async with keyed(app, service) as backend:
        response = await backend.post("/api/v2/memory/flush", json={"session_id": "s1"})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "X-Memory-Gateway-User"
    assert routes["flush"].call_count == 0


async def test_a_request_naming_two_users_is_refused_to_a_service_key(
    app: Gateway, settings: Settings, engine: respx.MockRouter
) -> None:
    routes = engine_ok(engine)
    service = create_key(settings, "backend", kind="service")
    body = {"session_id": "s2", "messages": [
        {"role": "user", "sender_id": "bob", "timestamp": 1764547200000, "content": "a"},
        {"role": "user", "sender_id": "alice", "timestamp": 1764547200001, "content": "b"}]}
    async with keyed(app, service) as backend:
        response = await backend.post("/api/v2/memory/add", json=body)
    assert response.status_code == 403
    assert routes["add"].call_count == 0


async def test_a_service_keys_glob_bounds_whom_it_acts_for(
    app: Gateway, settings: Settings, engine: respx.MockRouter
) -> None:
    searched = answer_search(engine, episodes())
    service = create_key(settings, "backend", kind="service", users="tenant-a.*")
    async with keyed(app, service, **{"X-Memory-Gateway-User": "tenant-a.bob"}) as inside, \
            keyed(app, service, **{"X-Memory-Gateway-User": "tenant-b.bob"}) as outside, \
            keyed(app, service) as by_field:
        assert (await inside.get("/agents")).status_code == 200
        refused = await outside.get("/agents")
        field = await by_field.post("/api/v2/memory/search",
                                    json={"query": "x", "user_id": "tenant-b.eve"})
    assert refused.status_code == 403
    assert field.status_code == 403
    assert searched.call_count == 0


@pytest.mark.parametrize("value", ["../etc", "", "_gateway", "a" * 200, "bob smith"])
async def test_a_service_key_cannot_act_for_an_invalid_user_id(
    app: Gateway, settings: Settings, value: str
) -> None:
    service = create_key(settings, "backend", kind="service")
    async with keyed(app, service, **{"X-Memory-Gateway-User": value}) as backend:
        response = await backend.get("/agents")
    assert response.status_code == 422, response.text


async def test_the_header_from_a_user_key_must_name_its_own_user(
    app: Gateway, settings: Settings
) -> None:
    token = create_key(settings, "bob")
    async with keyed(app, token, **{"X-Memory-Gateway-User": "alice"}) as pretending, \
            keyed(app, token, **{"X-Memory-Gateway-User": "bob"}) as honest:
        assert (await pretending.get("/agents")).status_code == 403
        assert (await honest.get("/agents")).status_code == 200


async def test_the_acting_header_never_reaches_the_engine(
    app: Gateway, settings: Settings, engine: respx.MockRouter
) -> None:
    searched = answer_search(engine, episodes())
    service = create_key(settings, "backend", kind="service")
    async with keyed(app, service, **{"X-Memory-Gateway-User": "bob"}) as backend:
        assert (await backend.post("/api/v2/memory/search",
                                   json={"query": "x", "user_id": "bob"})).status_code == 200
    sent = searched.calls.last.request.headers
    assert "x-memory-gateway-user" not in sent and sent["x-memory-user-id"] == "bob"


# --- scopes --------------------------------------------------------------------------------


async def test_a_read_key_reads_and_cannot_write(
    app: Gateway, settings: Settings, engine: respx.MockRouter
) -> None:
    routes = engine_ok(engine)
    searched = answer_search(engine, episodes())
    reader = create_key(settings, "bob", scopes="read")
    async with keyed(app, reader) as bob:
        assert (await bob.get("/agents")).status_code == 200
        assert (await bob.post("/memories/search",
                               json={"query": "x", "user_id": "bob"})).status_code == 200
        assert (await bob.post("/api/v2/memory/search",
                               json={"query": "x", "user_id": "bob"})).status_code == 200
        refused = [await bob.post("/agents", json={"name": "A"}),
                   await bob.post("/api/v2/memory/add", json=ADD),
                   await bob.post("/api/v2/memory/flush", json={"session_id": "s1"}),
                   await bob.post("/resources", files={"file": ("a.txt", b"a", "text/plain")})]
    assert [(r.status_code, error_code(r)) for r in refused] == [(403, "insufficient_scope")] * 4
    assert routes["add"].call_count == routes["flush"].call_count == 0
    assert searched.call_count == 2


async def test_a_write_key_cannot_read(
    app: Gateway, settings: Settings, engine: respx.MockRouter
) -> None:
    routes = engine_ok(engine)
    searched = answer_search(engine, episodes())
    writer = create_key(settings, "bob", scopes="write")
    async with keyed(app, writer) as bob:
        assert (await bob.post("/api/v2/memory/add", json=ADD)).status_code == 200
        reads = [await bob.get("/agents"),
                 await bob.post("/api/v2/memory/search", json={"query": "x", "user_id": "bob"})]
    assert [(r.status_code, error_code(r)) for r in reads] == [(403, "insufficient_scope")] * 2
    assert routes["add"].call_count == 1 and searched.call_count == 0


def test_every_engine_route_is_a_read_or_a_write_by_what_it_does() -> None:
    from gateway.upstream.flavors import FLAVORS

    reads = {(name, route.method, route.pattern) for name, flavor in FLAVORS.items()
             for route in flavor.routes.routes if route.read_only}
    writes = {(name, route.method, route.pattern) for name, flavor in FLAVORS.items()
              for route in flavor.routes.routes if not route.read_only}
    assert ("everos", "POST", "/api/v2/memory/search") in reads
    assert ("everos", "POST", "/api/v2/memory/get") in reads
    assert ("everos", "GET", "/api/v2/tasks") in reads
    assert ("mem0", "POST", "/v3/memories/") in reads  # mem0's list
    assert ("memos", "POST", "/product/get_all") in reads
    assert ("everos", "POST", "/api/v2/memory/add") in writes
    assert ("everos", "POST", "/api/v2/memory/flush") in writes
    assert ("mem0", "DELETE", "/memories") in writes
    assert ("mem0", "PUT", "/memories/{memory_id}") in writes
    assert ("memos", "POST", "/product/delete_memory") in writes
    assert ("everos-cloud", "PATCH", "/api/v1/groups/{group_id}") in writes


# --- lifetimes -----------------------------------------------------------------------------


async def test_an_expired_key_is_401(app: Gateway, settings: Settings) -> None:
    expired = create_key(settings, "bob", expires_at_ms=now_ms() - 1)
    async with keyed(app, expired) as bob:
        response = await bob.get("/agents")
    assert response.status_code == 401
    assert "expired" in response.json()["error"]["message"]


async def test_a_key_expiring_while_kept_in_the_cache_stops_at_its_expiry(
    settings: Settings, start_gateway: StartGateway
) -> None:
    soon = create_key(settings, "bob", expires_at_ms=now_ms() + 600)
    async with start_gateway(settings.with_values(auth={"key_cache_ttl_s": 3600})) as app, \
            keyed(app, soon) as bob:
        assert (await bob.get("/agents")).status_code == 200  # now cached
        time.sleep(0.7)
        assert (await bob.get("/agents")).status_code == 401


async def test_last_use_is_written_in_batches_without_dropping_cached_keys(
    settings: Settings, start_gateway: StartGateway
) -> None:
    token = create_key(settings, "bob")
    key_id = token.split("_")[1]
    async with start_gateway(settings.with_values(auth={"last_used_interval_s": 0})) as app, \
            keyed(app, token) as bob:
        assert (await bob.get("/agents")).status_code == 200
        assert _last_used(settings, key_id) is None  # not on the request path
        generation = app.services.db.generation("keys")
        before = now_ms()
        await app.services.authenticator.flush_usage()
        assert _last_used(settings, key_id) >= before - 5000
        # Moving the last-used time invalidates no process's cache of keys.
        assert app.services.db.generation("keys") == generation
    # Shutdown writes what was noted since.


async def test_shutdown_writes_the_last_use_noted_since_the_last_write(
    settings: Settings, start_gateway: StartGateway
) -> None:
    token = create_key(settings, "bob")
    async with start_gateway(settings.with_values(auth={"last_used_interval_s": 0})) as app, \
            keyed(app, token) as bob:
        assert (await bob.get("/agents")).status_code == 200
    assert _last_used(settings, token.split("_")[1]) is not None


def _last_used(settings: Settings, key_id: str) -> Any:
    [row] = databases.rows(settings.storage.database,
                           "SELECT last_used_at_ms FROM api_keys WHERE id = ?", key_id)
    return row["last_used_at_ms"]


# --- admin keys reach only /admin/ ------------------------------------------------------


async def test_an_admin_key_reaches_nothing_but_the_admin_api(
    app: Gateway, settings: Settings, engine: respx.MockRouter
) -> None:
    searched = answer_search(engine, episodes())
    admin = create_key(settings, "ops", kind="admin")
    async with keyed(app, admin) as ops:
        owned = await ops.get("/agents")
        proxied = await ops.post("/api/v2/memory/search", json={"query": "x", "user_id": "ops"})
        admin_api = await ops.get("/admin/keys")
    assert owned.status_code == proxied.status_code == 404
    assert error_code(owned) == error_code(proxied) == "route_not_found"
    assert admin_api.status_code == 200
    assert searched.call_count == 0


@pytest.mark.parametrize("kind", ["user", "service"])
async def test_no_other_credential_finds_the_admin_api(
    app: Gateway, settings: Settings, kind: str
) -> None:
    token = create_key(settings, "bob", kind=kind)
    async with keyed(app, token, **{"X-Memory-Gateway-User": "bob"}) as bob:
        for method, path in [("GET", "/admin/keys"), ("POST", "/admin/keys"),
                             ("GET", "/admin/users"), ("GET", "/admin/audit"),
                             ("GET", "/admin/nothing-here")]:
            response = await bob.request(method, path, content=json.dumps({"userId": "bob"}))
            assert response.status_code == 404, (method, path)
            assert error_code(response) == "route_not_found"


async def test_an_erased_user_is_refused_to_a_service_key_however_it_names_them(
    app: Gateway, settings: Settings, engine: respx.MockRouter
) -> None:
    searched = answer_search(engine, episodes())
    admin = create_key(settings, "ops", kind="admin")
    service = create_key(settings, "backend", kind="service")
    create_key(settings, "bob")  # bob is known to the gateway (an id never seen is 404)
    async with keyed(app, admin) as ops:
        erased = await ops.delete("/admin/users/bob")
    assert erased.status_code == 200, erased.text
    async with keyed(app, service) as by_field, \
            keyed(app, service, **{"X-Memory-Gateway-User": "bob"}) as by_header:
        field = await by_field.post("/api/v2/memory/search",
                                    json={"query": "x", "user_id": "bob"})
        named = await by_header.get("/agents")
        other = await by_field.post("/api/v2/memory/search",
                                    json={"query": "x", "user_id": "carol"})
    assert (field.status_code, named.status_code) == (401, 401)
    assert other.status_code == 200  # the key still acts for everyone else
    assert searched.call_count == 1
