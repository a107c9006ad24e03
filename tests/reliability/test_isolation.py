"""Isolation (SPEC §3): every owned endpoint, called by bob with alice's ids, answers as if they
did not exist (404; 403 on the memory-proxy surface; 422 where an id rides in a body), never shows
bob any of alice's data, and leaves alice's data as it was.

The matrix is checked against the app's own route table: an endpoint without a probe fails the
test, so a new endpoint cannot ship without saying how it keeps users apart.

bob's credential (his key, a service key naming him, a JWT) only decides who he is; the rows
each probe reaches are the database's. The two axes are paired, not crossed: the whole matrix
runs on each database, and with each credential once (alice, whose data stays as it was, uses
her own key on both).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from starlette.routing import Route

from gateway.app import Gateway, create_app
from gateway.config import Settings
from tests.attachment_helpers import PNG, engine_ok, episodes, rows
from tests.conftest import client_for
from tests.reliability.support import assert_error_shape
from tests.security.support import JWT_SETTINGS, credential_headers

pytestmark = pytest.mark.reliability
# (database, bob's credential): each database and each credential at least once.
PAIRS = [("sqlite", "user"), ("postgresql", "service"), ("postgresql", "jwt")]

SECRET = "ALICE-SECRET"
PUBLIC = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/openapi.json"), ("GET", "/docs"),
          ("GET", "/metrics")}


@dataclass(frozen=True)
class Probe:
    method: str
    route: str  # the route's path template, as in the app's route table
    path: Callable[[dict[str, str]], str]
    status: int
    body: Callable[[dict[str, str]], Any] | None = None
    code: str | None = None  # the error code, for error statuses
    files: dict[str, Any] | None = None


def p(method: str, route: str, status: int, body: Callable[[dict[str, str]], Any] | None = None,
      code: str | None = None, *, path: str | None = None,
      files: dict[str, Any] | None = None) -> Probe:
    template = path or route
    return Probe(method, route, lambda ids: template.format(**ids), status, body, code, files)


def add_to(session: str) -> Callable[[dict[str, str]], Any]:
    return lambda ids: {"session_id": session, "messages": [
        {"role": "user", "sender_id": "bob", "timestamp": 1764547200000, "content": "hi"}]}


def search_as(user: str) -> Callable[[dict[str, str]], Any]:
    return lambda ids: {"query": "note", "user_id": user}


def get_as(user: str) -> Callable[[dict[str, str]], Any]:
    return lambda ids: {"user_id": user, "memory_type": "episode"}


NOT_FOUND, FORBIDDEN, OWNED = "not_found", "forbidden", "session_owned_by_another_user"
PROBES: list[Probe] = [
    *(p("GET", path, 200) for _, path in sorted(PUBLIC)),
    # The memory-proxy surface: another user's session or id is refused before anything is sent.
    *(p("POST", path, 403, add_to("alice-session"), OWNED)
      for path in ("/memories/add", "/api/v2/memory/add", "/api/v1/memory/add")),
    *(p("POST", path, 403, search_as("alice"), FORBIDDEN)
      for path in ("/memories/search", "/api/v2/memory/search", "/api/v1/memory/search")),
    # ... and bob's own search drops the results of alice's sessions the engine sends back.
    *(p("POST", path, 200, search_as("bob"))
      for path in ("/memories/search", "/api/v2/memory/search", "/api/v1/memory/search")),
    p("POST", "/resources", 201, files={"file": ("bob.png", b"bob's bytes", "image/png")}),
    p("GET", "/resources", 200),
    p("GET", "/resources/{resource_id}", 404, code=NOT_FOUND),
    p("DELETE", "/resources/{resource_id}", 404, code=NOT_FOUND),
    p("GET", "/resources/{resource_id}/content", 404, code=NOT_FOUND),
    p("GET", "/attachments/{attachment_id}/content", 404, code=NOT_FOUND),
    # No key needed, and none helps: only a token this gateway signed opens a file.
    p("GET", "/files/{token}", 404, code=NOT_FOUND, path="/files/{attachment_id}.{resource_id}"),
    p("POST", "/assets", 422, lambda ids: {
        "mediaType": "image", "sourceType": "generated", "originalUrl": "https://b.example/x.png",
        "parentAssetIds": [ids["asset_id"]]}, "validation_error"),
    p("GET", "/assets/{asset_id}", 404, code=NOT_FOUND),
    p("GET", "/assets/{asset_id}/lineage", 404, code=NOT_FOUND),
    p("POST", "/assets/{asset_id}/relations", 404, lambda ids: {
        "toAssetId": ids["bob_asset_id"], "relationType": "reference_of"}, NOT_FOUND),
    p("POST", "/assets/{asset_id}/relations", 422, lambda ids: {
        "toAssetId": ids["asset_id"], "relationType": "reference_of"}, "validation_error",
      path="/assets/{bob_asset_id}/relations"),
    # Chat ids are the caller's own namespace: bob's "alice-chat" is another, empty chat.
    p("GET", "/chats/{chat_id}/working-state", 200),
    p("PUT", "/chats/{chat_id}/working-state", 422,
      lambda ids: {"currentFocusAssetId": ids["asset_id"]}, "validation_error"),
    p("POST", "/chats/{chat_id}/results", 422, lambda ids: {"assetIds": [ids["asset_id"]]},
      "validation_error"),
    p("POST", "/chats/{chat_id}/resolve", 422,
      lambda ids: {"text": "this one", "uploadedAssetIds": [ids["asset_id"]]}, "validation_error"),
    p("POST", "/chats/{chat_id}/resolve", 200, lambda ids: {
        "text": "第一张", "contextPayload": {"canvasImageNodes": [
            {"nodeId": "n1", "assetId": ids["asset_id"], "url": "https://a.example/1.png",
             "x": 0, "y": 0, "isSelected": True}]}}),
    p("GET", "/chats/{chat_id}/resolutions", 200),
    p("POST", "/agents", 201, lambda ids: {"name": "bob's agent"}),
    p("GET", "/agents", 200),
    p("GET", "/agents/{agent_id}", 404, code=NOT_FOUND),
    p("PATCH", "/agents/{agent_id}", 404, lambda ids: {"name": "taken"}, NOT_FOUND),
    p("DELETE", "/agents/{agent_id}", 404, code=NOT_FOUND),
    p("GET", "/agents/{agent_id}/conversation", 404, code=NOT_FOUND),
    p("GET", "/agents/{agent_id}/conversations", 404, code=NOT_FOUND),
    p("POST", "/agents/{agent_id}/conversations", 404, lambda ids: {"title": "x"}, NOT_FOUND),
    p("GET", "/conversations/{conversation_id}", 404, code=NOT_FOUND),
    p("DELETE", "/conversations/{conversation_id}", 404, code=NOT_FOUND),
    p("GET", "/conversations/{conversation_id}/messages", 404, code=NOT_FOUND),
    p("POST", "/conversations/{conversation_id}/messages", 404,
      lambda ids: {"clientMessageId": "b1", "role": "user", "content": "hi"}, NOT_FOUND),
    *(p("POST", "/conversations/{conversation_id}/messages", 422, lambda ids, source=source: {
        "clientMessageId": f"b-{source}", "role": "user", "content": "look",
        "attachments": [{"source": source, "referenceId": ids[f"{source}_id"]}]},
        "validation_error", path="/conversations/{bob_conversation_id}/messages")
      for source in ("resource", "asset")),
    p("POST", "/agents/{agent_id}/memories", 404,
      lambda ids: {"type": "t", "content": "c"}, NOT_FOUND),
    p("POST", "/agents/{agent_id}/memories", 422,
      lambda ids: {"type": "t", "content": "c", "sourceMessageId": ids["message_id"]},
      "validation_error", path="/agents/{bob_agent_id}/memories"),
    p("GET", "/agents/{agent_id}/memories", 404, code=NOT_FOUND),
    *(p(method, "/agents/{agent_id}/memories/{memory_id}", 404, body, NOT_FOUND, path=path)
      for method, body in (("GET", None), ("PATCH", lambda ids: {"content": "x"}),
                           ("DELETE", None))
      for path in ("/agents/{agent_id}/memories/{memory_id}",
                   "/agents/{bob_agent_id}/memories/{memory_id}")),
    p("GET", "/agents/{agent_id}/context", 404, code=NOT_FOUND),
    p("POST", "/memory-facts", 201, lambda ids: {
        "scope": "global", "factType": "preference", "key": "tone", "value": "bob's",
        "sourceType": "manual"}),
    p("GET", "/memory-facts", 200),
    p("GET", "/memory-facts/{fact_id}", 404, code=NOT_FOUND),
    p("PATCH", "/memory-facts/{fact_id}", 404, lambda ids: {"pinned": True}, NOT_FOUND),
    p("DELETE", "/memory-facts/{fact_id}", 404, code=NOT_FOUND),
    # Tool calls: alice's conversation and calls are missing to bob, her images not his to name.
    p("GET", "/tools", 200),
    p("POST", "/conversations/{conversation_id}/tool-calls", 404, lambda ids: {
        "clientMessageId": "b-call", "toolName": "generate_image", "args": {"prompt": "x"}},
      NOT_FOUND),
    p("POST", "/conversations/{conversation_id}/tool-calls", 422, lambda ids: {
        "clientMessageId": "b-call", "toolName": "edit_image",
        "args": {"image": ids["image_id"], "prompt": "mine"}}, "validation_error",
      path="/conversations/{bob_conversation_id}/tool-calls"),
    *(p("POST", f"/conversations/{{conversation_id}}/tool-calls/{{message_id}}/{action}", 404,
        code=NOT_FOUND, path=path)
      for action in ("confirm", "cancel")
      for path in (f"/conversations/{{conversation_id}}/tool-calls/{{tool_message_id}}/{action}",
                   f"/conversations/{{bob_conversation_id}}/tool-calls/{{tool_message_id}}/"
                   f"{action}")),
    # A user's data (SPEC §17): the admin routes are no one else's (404, as an unknown route),
    # and bob's own export holds nothing of alice's.
    p("DELETE", "/admin/users/{user_id}", 404, code="route_not_found", path="/admin/users/alice"),
    p("GET", "/admin/users/{user_id}/export", 404, code="route_not_found",
      path="/admin/users/alice/export"),
    p("GET", "/me/export", 200),
]
# The admin API: no credential but an admin key finds anything there (SPEC §17).
ADMIN = "route_not_found"
PROBES += [
    p("POST", "/admin/keys", 404, lambda ids: {"userId": "bob", "kind": "user"}, ADMIN),
    p("GET", "/admin/keys", 404, code=ADMIN),
    p("GET", "/admin/keys/{key_id}", 404, code=ADMIN, path="/admin/keys/0123456789abcdef"),
    p("DELETE", "/admin/keys/{key_id}", 404, code=ADMIN, path="/admin/keys/0123456789abcdef"),
    p("GET", "/admin/users", 404, code=ADMIN),
    p("GET", "/admin/audit", 404, code=ADMIN),
]

# The EverOS SDKs' sign routes sign bob's own objects; alice's object key names nothing for
# him, and an upload form opens only with a token the gateway signed (no key needed).
PROBES += [
    *(p("POST", path, 200, lambda ids: {"objectList": [
        {"fileId": "b", "fileName": "b.png", "fileType": "image"}]})
      for path in ("/api/v2/object/sign", "/api/v1/object/sign")),
    p("POST", "/api/v2/memory/add", 422, lambda ids: {"session_id": "bob-object", "messages": [
        {"role": "user", "sender_id": "bob", "timestamp": 1764547200000, "content": [
            {"type": "image", "uri": ids["object_key"]}]}]}, "object_key_not_found"),
    p("POST", "/uploads/{token}", 404, code=NOT_FOUND, path="/uploads/{attachment_id}"),
]
# Engine paths the gateway does not own but checks (SPEC §3): refused, nothing forwarded.
PROXY_PROBES: list[Probe] = [
    p("POST", "/api/v2/memory/get", 403, get_as("alice"), FORBIDDEN),
    # Another user's session reads like no one's: 404, not 403 (no existence oracle).
    p("POST", "/api/v2/memory/flush", 404, lambda ids: {"session_id": "alice-session"},
      NOT_FOUND),
    p("POST", "/api/v2/memory/flush", 404, lambda ids: {"session_id": "no-ones-session"},
      NOT_FOUND),
    p("POST", "/api/v2/memory/get", 403, get_as("alice"), FORBIDDEN,
      path="/api/v2/memory/get?user_id=alice"),
    # The engine reads get's owner from the body only: one in the query scopes nothing.
    p("POST", "/api/v2/memory/get", 422, lambda ids: {"memory_type": "episode"},
      "validation_error", path="/api/v2/memory/get?user_id=bob"),
    p("GET", "/api/v2/memory/get", 404, code="route_not_found",
      path="/api/v2/memory/get?user_id=alice"),
]


async def alices_world(alice: httpx.AsyncClient) -> dict[str, str]:
    """One of everything, each carrying SECRET; returns the ids bob will try."""
    ids: dict[str, str] = {"chat_id": "alice-chat"}

    async def ok(response: httpx.Response) -> dict[str, Any]:
        assert response.status_code in (200, 201), response.text
        return dict(response.json()) if response.content else {}

    resource = await ok(await alice.post(
        "/resources", files={"file": (f"{SECRET}-photo.png", PNG + SECRET.encode(), "image/png")}))
    ids["resource_id"] = resource["id"]
    # An object alice signed and uploaded as the EverOS SDKs do (SPEC §18), never added.
    signed = await ok(await alice.post("/api/v2/object/sign", json={"objectList": [
        {"fileId": "a", "fileName": f"{SECRET}-object.png", "fileType": "image"}]}))
    [obj] = signed["result"]["data"]["objectList"]
    info = obj["objectSignedInfo"]
    assert (await alice.post(info["url"], data=info["fields"], files={
        "file": ("o.png", PNG, "image/png")})).status_code == 204
    ids["object_key"] = obj["objectKey"]
    await ok(await alice.post("/memories/add", json={"session_id": "alice-session", "messages": [{
        "role": "user", "sender_id": "alice", "content": [
            {"type": "text", "text": f"{SECRET} note"},
            {"type": "image", "name": f"{SECRET}-note.png",
             "base64": base64.b64encode(PNG).decode()}]}]}))
    agent = await ok(await alice.post("/agents", json={
        "name": f"{SECRET} agent", "profile": {"secret": SECRET}, "openingMessage": SECRET}))
    ids["agent_id"] = agent["id"]
    conversation = await ok(await alice.get(f"/agents/{agent['id']}/conversation"))
    ids["conversation_id"] = conversation["conversationId"]
    posted = await ok(await alice.post(f"/conversations/{ids['conversation_id']}/messages", json={
        "clientMessageId": "a1", "role": "user", "content": f"{SECRET} message",
        "attachments": [{"source": "resource", "referenceId": ids["resource_id"],
                         "label": SECRET}]}))
    ids["message_id"] = posted["message"]["id"]
    await ok(await alice.post(f"/agents/{agent['id']}/conversations",
                              json={"title": f"{SECRET} title"}))
    memory = await ok(await alice.post(f"/agents/{agent['id']}/memories", json={
        "type": "preference", "content": f"{SECRET} memory", "sourceMessageId": ids["message_id"]}))
    ids["memory_id"] = memory["id"]
    fact = await ok(await alice.post("/memory-facts", json={
        "scope": "global", "factType": "preference", "key": f"{SECRET}-key",
        "value": {"secret": SECRET}, "sourceType": "manual"}))
    ids["fact_id"] = fact["id"]
    asset = await ok(await alice.post("/assets", json={
        "chatId": "alice-chat", "mediaType": "image", "sourceType": "generated",
        "originalUrl": f"https://a.example/{SECRET}.png", "displayName": SECRET, "prompt": SECRET}))
    ids["asset_id"] = asset["id"]
    ids["image_id"] = "sha256:" + hashlib.sha256(
        f"https://a.example/{SECRET}.png".encode()).hexdigest()
    call = await ok(await alice.post(f"/conversations/{ids['conversation_id']}/tool-calls", json={
        "clientMessageId": "a-call", "toolName": "edit_image", "assistantText": SECRET,
        "args": {"image": ids["image_id"], "prompt": f"{SECRET} edit"}}))
    ids["tool_message_id"] = call["message"]["id"]
    await ok(await alice.post("/chats/alice-chat/results", json={"assetIds": [asset["id"]]}))
    await ok(await alice.post("/chats/alice-chat/resolve", json={"text": f"{SECRET} the latest"}))
    return ids


async def bobs_own(bob: httpx.AsyncClient) -> dict[str, str]:
    agent = (await bob.post("/agents", json={"name": "bob"})).json()
    conversation = (await bob.get(f"/agents/{agent['id']}/conversation")).json()
    asset = (await bob.post("/assets", json={
        "mediaType": "image", "sourceType": "upload", "originalUrl": "https://b.example/b.png"}
    )).json()
    return {"bob_agent_id": agent["id"], "bob_conversation_id": conversation["conversationId"],
            "bob_asset_id": asset["id"]}


async def alices_view(alice: httpx.AsyncClient, ids: dict[str, str]) -> list[Any]:
    """What alice sees of her data; it must read the same after bob's attempts."""
    reads = [
        f"/resources/{ids['resource_id']}", f"/agents/{ids['agent_id']}",
        f"/conversations/{ids['conversation_id']}/messages",
        f"/agents/{ids['agent_id']}/memories/{ids['memory_id']}", f"/memory-facts/{ids['fact_id']}",
        f"/assets/{ids['asset_id']}/lineage", "/chats/alice-chat/working-state",
        "/chats/alice-chat/resolutions", f"/agents/{ids['agent_id']}/conversations",
    ]
    seen = []
    for path in reads:
        response = await alice.get(path)
        assert response.status_code == 200, (path, response.text)
        seen.append(response.json())
    for path in (f"/resources/{ids['resource_id']}/content",
                 f"/attachments/{ids['attachment_id']}/content"):
        content = await alice.get(path)
        assert content.status_code == 200, (path, content.text)
        seen.append(content.content)
    return seen


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The suite's settings, trusting the JWTs `credential_headers` makes."""
    return settings.with_values(auth={"jwt": JWT_SETTINGS})


@pytest.fixture
def credential(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def bob(credential: str, app: Gateway,
              settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """bob by each credential that can act for him: his own key, or a service key naming him
    in X-Memory-Gateway-User, or a JWT for him. None finds any of alice's data."""
    headers = credential_headers(settings, "bob", credential)
    async with client_for(app) as client:
        client.headers.update(headers)
        yield client


def owned_endpoints(app: Gateway) -> set[tuple[str, str]]:
    return {(method, route.path) for route in app.routes if isinstance(route, Route)
            for method in (route.methods or ()) if method != "HEAD"}


@pytest.mark.both_databases
def test_every_endpoint_has_an_isolation_probe(settings: Settings) -> None:
    app = create_app(settings)
    assert {(probe.method, probe.route) for probe in PROBES} == owned_endpoints(app)


@pytest.mark.parametrize(("database_backend", "credential"), PAIRS, indirect=True)
async def test_bob_with_alices_ids_finds_nothing_and_changes_nothing(
    app: Gateway, alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter,
    settings: Settings,
) -> None:
    routes = engine_ok(engine)
    engine.get("/health").mock(return_value=httpx.Response(200, json={"status": "ok"}))
    alice_session = {"session_id": "alice-session", "episode": f"{SECRET} note {SECRET}-note.png",
                     "sender_ids": ["alice"]}
    searched = engine.post("/api/v2/memory/search").mock(
        return_value=httpx.Response(200, json=episodes(alice_session, unprocessed=[
            {**alice_session, "content": [{"type": "image", "name": f"{SECRET}-note.png"}]}])))
    ids = {**await alices_world(alice), **await bobs_own(bob)}
    [inline] = rows(settings, "SELECT id FROM memory_attachments WHERE source = ?",
                    "memory_add_base64")
    ids["attachment_id"] = inline["id"]
    before = await alices_view(alice, ids)
    storage = str(Path(settings.storage.root).resolve())
    forwarded_before = len(routes["add"].calls) + len(routes["flush"].calls)

    for probe in [*PROBES, *PROXY_PROBES]:
        path = probe.path(ids)
        kwargs: dict[str, Any] = {}
        if probe.body is not None:
            kwargs["json"] = probe.body(ids)
        if probe.files is not None:
            kwargs["files"] = probe.files
        response = await bob.request(probe.method, path, **kwargs)
        where = f"{probe.method} {path}"
        if probe.code is not None:
            assert_error_shape(response, probe.status, probe.code)
        assert response.status_code == probe.status, (where, response.text)
        text = response.text
        assert SECRET not in text, where
        assert storage not in text and "/alice/" not in text, where
        if probe.route == "/chats/{chat_id}/resolve" and response.status_code == 200:
            decision = response.json()
            assert ids["asset_id"] not in decision["targetAssetIds"] + decision[
                "candidateAssetIds"]
        if probe.method == "POST" and probe.route in ("/memories/search",) and probe.status == 200:
            assert response.json() == {"results": [], "total": 0}

    # bob's own upload is the only add that reached the engine (its ingestion and flush).
    assert len(routes["add"].calls) + len(routes["flush"].calls) - forwarded_before == 2
    assert searched.call_count == 3  # bob's three own searches; the refused ones never left
    assert await alices_view(alice, ids) == before
