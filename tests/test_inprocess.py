"""In-process calls as an authenticated principal (gateway/serving/inprocess.py): the seam the
MCP tools and the console use into the REST routes, with every rule of theirs and no credential."""

from __future__ import annotations

import httpx
import respx

from gateway.app import Gateway
from gateway.identity.principal import READ, Principal
from tests.attachment_helpers import PNG, engine_ok


def as_user(user_id: str, *scopes: str) -> Principal:
    return Principal("user", f"test:{user_id}", user_id, frozenset(scopes or (READ, "write")))


async def test_call_as_a_user_sees_only_that_users_rows(
    app: Gateway, alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine_ok(engine)
    uploaded = await alice.post("/resources", files={"file": ("a.png", PNG, "image/png")})
    assert uploaded.status_code == 201, uploaded.text
    mine = await app.call_as(as_user("alice"), "GET", "/resources")
    theirs = await app.call_as(as_user("bob"), "GET", "/resources")
    assert mine.status == 200
    assert [item["id"] for item in mine.json()["items"]] == [uploaded.json()["id"]]
    assert theirs.json()["items"] == []
    foreign = await app.call_as(as_user("bob"), "GET", f"/resources/{uploaded.json()['id']}")
    assert foreign.status == 404
    assert foreign.json()["error"]["code"] == "not_found"


async def test_call_as_honours_scopes_and_the_admin_boundary(app: Gateway) -> None:
    reader = await app.call_as(as_user("alice", READ), "POST", "/agents", json={"name": "a"})
    assert reader.status == 403
    assert reader.json()["error"]["code"] == "insufficient_scope"
    admin = Principal("admin", "adm", "ops", frozenset({READ, "write"}))
    assert (await app.call_as(admin, "GET", "/resources")).status == 404


async def test_call_as_carries_the_callers_request_id(app: Gateway) -> None:
    answer = await app.call_as(as_user("alice"), "GET", "/agents",
                               origin={"request_id": "req-123", "client": ("10.0.0.1", 5)})
    assert answer.status == 200
    assert answer.header("x-request-id") == "req-123"


async def test_a_network_request_cannot_claim_a_principal(anonymous: httpx.AsyncClient) -> None:
    answer = await anonymous.get("/resources", headers={"gateway.preauthenticated": "alice"})
    assert answer.status_code == 401
