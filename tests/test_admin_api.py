"""The admin API (SPEC §17): keys for any user, users with their counts, the audit log."""

from __future__ import annotations

import httpx
import pytest

from gateway.app import Gateway
from gateway.config import Settings
from tests.conftest import client_for, create_key

pytestmark = pytest.mark.both_databases


@pytest.fixture
async def ops(app: Gateway, settings: Settings) -> httpx.AsyncClient:
    async with client_for(app, create_key(settings, "ops", kind="admin")) as client:
        yield client


async def test_a_key_made_through_the_api_works_once_shown_and_dies_when_revoked(
    app: Gateway, ops: httpx.AsyncClient
) -> None:
    made = await ops.post("/admin/keys", json={"userId": "bob", "name": "bob's laptop"})
    assert made.status_code == 201, made.text
    key = made.json()
    assert key["userId"] == "bob" and key["kind"] == "user" and key["state"] == "active"
    assert key["scopes"] == ["read", "write"] and key["name"] == "bob's laptop"
    assert key["token"].startswith(f"mgw_{key['id']}_")
    async with client_for(app, key["token"]) as bob:
        assert (await bob.get("/agents")).status_code == 200
        shown = (await ops.get(f"/admin/keys/{key['id']}")).json()
        assert "token" not in shown and shown["id"] == key["id"]
        secret = key["token"].removeprefix(f"mgw_{key['id']}_")  # may itself hold "_"
        assert secret and secret not in str((await ops.get("/admin/keys")).json())
        assert (await ops.delete(f"/admin/keys/{key['id']}")).status_code == 204
        assert (await bob.get("/agents")).status_code == 401
    assert (await ops.get(f"/admin/keys/{key['id']}")).json()["state"] == "revoked"
    assert (await ops.delete(f"/admin/keys/{key['id']}")).status_code == 204  # idempotent
    assert (await ops.get("/admin/keys/0123456789abcdef")).status_code == 404


async def test_service_keys_made_through_the_api_act_only_within_their_glob(
    app: Gateway, ops: httpx.AsyncClient
) -> None:
    made = (await ops.post("/admin/keys", json={
        "userId": "backend", "kind": "service", "users": "tenant-a.*", "scopes": ["read"],
        "expiresAt": 4_000_000_000_000})).json()
    assert made["kind"] == "service" and made["users"] == "tenant-a.*"
    assert made["scopes"] == ["read"] and made["expiresAt"] == 4_000_000_000_000
    async with client_for(app, made["token"]) as backend:
        inside = await backend.get("/agents", headers={"X-Memory-Gateway-User": "tenant-a.x"})
        outside = await backend.get("/agents", headers={"X-Memory-Gateway-User": "tenant-b.x"})
        write = await backend.post("/agents", json={"name": "A"},
                                   headers={"X-Memory-Gateway-User": "tenant-a.x"})
    assert (inside.status_code, outside.status_code, write.status_code) == (200, 403, 403)


@pytest.mark.parametrize("body, field", [
    ({"userId": "../etc"}, "userId"),
    ({"userId": "bob", "kind": "admin"}, "kind"),
    ({"userId": "bob", "scopes": []}, "scopes"),
    ({"userId": "bob", "scopes": ["delete"]}, "scopes.0"),
    ({"userId": "bob", "users": "x*"}, "users"),
    ({"userId": "bob", "expiresAt": -5}, "expiresAt"),
    ({"userId": "bob", "expiresAt": "tomorrow"}, "expiresAt"),
    ({}, "userId"),
])
async def test_a_bad_key_request_is_422_and_makes_nothing(
    ops: httpx.AsyncClient, body: dict[str, object], field: str
) -> None:
    response = await ops.post("/admin/keys", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    listed = (await ops.get("/admin/keys")).json()["items"]
    assert [key["userId"] for key in listed] == ["ops"]  # only the admin key itself


async def test_keys_page_by_cursor_and_filter_by_user(ops: httpx.AsyncClient) -> None:
    made = [(await ops.post("/admin/keys", json={"userId": user})).json()["id"]
            for user in ["u1", "u2", "u1", "u3", "u1"]]
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": "2", "userId": "u1", **({"cursor": cursor} if cursor else {})}
        page = (await ops.get("/admin/keys", params=params)).json()
        assert len(page["items"]) <= 2
        seen += [key["id"] for key in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [made[0], made[2], made[4]]
    assert (await ops.get("/admin/keys", params={"cursor": "garbage"})).status_code == 422


async def test_users_are_listed_with_their_counts(
    app: Gateway, settings: Settings, ops: httpx.AsyncClient
) -> None:
    async with client_for(app, create_key(settings, "bob")) as bob:
        await bob.post("/agents", json={"name": "A"})
        await bob.post("/agents", json={"name": "B"})
        fact = await bob.post("/memory-facts", json={"scope": "image", "factType": "style",
                                                     "key": "palette", "value": "pastel"})
        assert fact.status_code in (200, 201), fact.text
    create_key(settings, "carol")
    first = (await ops.get("/admin/users", params={"limit": "1"})).json()
    rest = (await ops.get("/admin/users", params={"cursor": first["nextCursor"]})).json()
    users = {user["userId"]: user for user in first["items"] + rest["items"]}
    assert set(users) == {"bob", "carol"}  # the admin key's owner is no user
    assert users["bob"]["agents"] == 2 and users["bob"]["keys"] == 1
    assert users["bob"]["facts"] == 1
    assert users["carol"] == {"userId": "carol", "keys": 1, "resources": 0, "conversations": 0,
                              "agents": 0, "facts": 0, "assets": 0, "sessions": 0}
    assert rest["nextCursor"] is None


async def test_every_admin_action_is_in_the_audit_log(
    ops: httpx.AsyncClient, settings: Settings
) -> None:
    admin_id = ops.headers["Authorization"].split("_")[1]
    made = (await ops.post("/admin/keys", json={"userId": "bob"})).json()
    await ops.delete(f"/admin/keys/{made['id']}")
    await ops.get("/admin/keys")  # reading changes nothing: not an action
    log = (await ops.get("/admin/audit")).json()
    entries = [(e["adminKeyId"], e["action"], e["target"]) for e in log["items"]]
    assert entries == [(admin_id, "keys.create", made["id"]),
                       (admin_id, "keys.revoke", made["id"])]
    assert all(isinstance(e["atMs"], int) and e["atMs"] > 0 for e in log["items"])
    first = (await ops.get("/admin/audit", params={"limit": "1"})).json()
    second = (await ops.get("/admin/audit", params={"cursor": first["nextCursor"]})).json()
    assert [e["action"] for e in first["items"] + second["items"]] == ["keys.create",
                                                                        "keys.revoke"]
    revokes = (await ops.get("/admin/audit", params={"action": "keys.revoke"})).json()
    assert [(e["action"], e["target"]) for e in revokes["items"]] == [("keys.revoke",
                                                                       made["id"])]


async def test_a_read_only_admin_key_reads_the_admin_api_and_changes_nothing(
    app: Gateway, settings: Settings, ops: httpx.AsyncClient
) -> None:
    victim = (await ops.post("/admin/keys", json={"userId": "zed"})).json()
    auditor = create_key(settings, "auditor", kind="admin", scopes="read")
    async with client_for(app, auditor) as reader:
        assert (await reader.get("/admin/keys")).status_code == 200
        assert (await reader.get("/admin/audit")).status_code == 200
        refused = [await reader.post("/admin/keys", json={"userId": "mallory", "kind": "service"}),
                   await reader.delete(f"/admin/keys/{victim['id']}"),
                   await reader.delete("/admin/users/zed")]
    for answer in refused:
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["code"] == "insufficient_scope"
    assert (await ops.get(f"/admin/keys/{victim['id']}")).json()["state"] == "active"
    listed = (await ops.get("/admin/keys")).json()["items"]
    assert "mallory" not in {key["userId"] for key in listed}


async def test_an_admin_key_outside_admin_is_a_404_that_says_why(ops: httpx.AsyncClient) -> None:
    """SPEC §17 keeps the 404; its message says what the key reaches and what the route takes."""
    for path in ("/agents", "/memories/search", "/api/v2/memory/search"):
        response = await ops.get(path)
        assert response.status_code == 404
        message = response.json()["error"]["message"]
        assert "admin key reaches only the admin API" in message and "user key" in message
