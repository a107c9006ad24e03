"""Agents (SPEC §10): CRUD, activity order, ownership, and the proxy's agent_id check (SPEC §3)."""

import asyncio
import json

import httpx
import pytest
import respx

pytestmark = pytest.mark.both_databases


async def make_agent(client: httpx.AsyncClient, name: str = "Painter", **fields: object) -> dict:
    response = await client.post("/agents", json={"name": name, **fields})
    assert response.status_code == 201, response.text
    return response.json()


async def say(client: httpx.AsyncClient, conversation_id: str, key: str, text: str) -> dict:
    response = await client.post(
        f"/conversations/{conversation_id}/messages",
        json={"clientMessageId": key, "role": "user", "content": text},
    )
    assert response.status_code == 201, response.text
    return response.json()


async def test_create_returns_the_agent_in_camel_case(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(
        alice, "Painter", profile={"style": "ink"}, openingMessage="你好，我是画师"
    )
    assert agent["id"].startswith("agt_")
    assert agent["name"] == "Painter"
    assert agent["profile"] == {"style": "ink"}
    assert agent["openingMessage"] == "你好，我是画师"
    assert agent["createdAtMs"] == agent["updatedAtMs"] > 0
    assert agent["lastMessageAtMs"] is None
    fetched = await alice.get(f"/agents/{agent['id']}")
    assert fetched.status_code == 200
    assert fetched.json() == agent


async def test_create_rejects_bad_input_naming_the_field(alice: httpx.AsyncClient) -> None:
    cases = [
        ({"name": "   "}, "name"),
        ({}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"name": "ok", "profile": ["not", "an", "object"]}, "profile"),
        ({"name": "ok", "profile": {"deep": json.loads("[" * 40 + "]" * 40)}}, "profile"),
        ({"name": 5}, "name"),
        ({"name": "ok", "openingMessage": 7}, "openingMessage"),
    ]
    for body, field in cases:
        response = await alice.post("/agents", json=body)
        assert response.status_code == 422, body
        assert response.json()["error"]["field"] == field, body
    bad_text = b'{"name": "a\\ud800b"}'
    response = await alice.post("/agents", content=bad_text)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "name"
    assert (await alice.get("/agents")).json()["agents"] == []


async def test_list_orders_by_latest_conversation_activity(alice: httpx.AsyncClient) -> None:
    first = await make_agent(alice, "first")
    await asyncio.sleep(0.002)
    second = await make_agent(alice, "second")
    await asyncio.sleep(0.002)
    third = await make_agent(alice, "third")
    names = [a["name"] for a in (await alice.get("/agents")).json()["agents"]]
    assert names == ["third", "second", "first"]

    conversation = (await alice.get(f"/agents/{first['id']}/conversation")).json()
    await asyncio.sleep(0.002)
    await say(alice, conversation["conversationId"], "k1", "hello")
    listed = (await alice.get("/agents")).json()["agents"]
    assert [a["name"] for a in listed] == ["first", "third", "second"]
    assert listed[0]["lastMessageAtMs"] is not None
    assert {second["id"], third["id"]} == {a["id"] for a in listed[1:]}


async def test_list_pages_with_an_opaque_cursor(alice: httpx.AsyncClient) -> None:
    created = [(await make_agent(alice, f"agent {i}"))["id"] for i in range(7)]
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        page = (await alice.get("/agents", params=params)).json()
        seen += [a["id"] for a in page["agents"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(created)
    assert len(seen) == 7


async def test_list_rejects_bad_limit_and_cursor(alice: httpx.AsyncClient) -> None:
    for params, field in (({"limit": "0"}, "limit"), ({"limit": "201"}, "limit"),
                          ({"limit": "many"}, "limit"), ({"cursor": "not-a-cursor"}, "cursor"),
                          ({"cursor": "WzEsMl0"}, "cursor")):
        response = await alice.get("/agents", params=params)
        assert response.status_code == 422, params
        assert response.json()["error"]["field"] == field, params


async def test_patch_changes_only_the_fields_sent(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(alice, "Painter", profile={"a": 1}, openingMessage="hi")
    await asyncio.sleep(0.002)
    response = await alice.patch(f"/agents/{agent['id']}", json={"name": "  Sculptor "})
    assert response.status_code == 200
    patched = response.json()
    assert patched["name"] == "Sculptor"
    assert patched["profile"] == {"a": 1}
    assert patched["openingMessage"] == "hi"
    assert patched["updatedAtMs"] > agent["updatedAtMs"]
    cleared = (await alice.patch(f"/agents/{agent['id']}", json={"openingMessage": None})).json()
    assert cleared["openingMessage"] is None
    assert cleared["name"] == "Sculptor"


async def test_patch_refuses_null_name_and_unknown_fields(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(alice)
    for body, field in (({"name": None}, "name"), ({"id": "agt_x"}, "id"),
                        ({"profile": None}, "profile")):
        response = await alice.patch(f"/agents/{agent['id']}", json=body)
        assert response.status_code == 422, body
        assert response.json()["error"]["field"] == field
    assert (await alice.get(f"/agents/{agent['id']}")).json()["name"] == "Painter"


async def test_another_users_agent_is_not_found_everywhere(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    agent = await make_agent(alice)
    path = f"/agents/{agent['id']}"
    for method, url, body in [
        ("GET", path, None),
        ("PATCH", path, {"name": "mine now"}),
        ("DELETE", path, None),
        ("GET", f"{path}/conversation", None),
        ("GET", f"{path}/conversations", None),
        ("POST", f"{path}/conversations", {}),
        ("GET", f"{path}/memories", None),
        ("POST", f"{path}/memories", {"type": "t", "content": "c"}),
        ("GET", f"{path}/context", None),
    ]:
        response = await bob.request(method, url, json=body)
        assert response.status_code == 404, (method, url)
        assert response.json()["error"]["code"] == "not_found"
    assert (await bob.get("/agents")).json()["agents"] == []
    assert (await alice.get(path)).json()["name"] == "Painter"
    listed = (await alice.get(f"{path}/conversations")).json()["conversations"]
    assert listed == []


async def test_delete_hides_the_agent_and_its_conversations(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(alice)
    conversation_id = (await alice.get(f"/agents/{agent['id']}/conversation")).json()[
        "conversationId"
    ]
    assert (await alice.delete(f"/agents/{agent['id']}")).status_code == 204
    assert (await alice.get(f"/agents/{agent['id']}")).status_code == 404
    assert (await alice.delete(f"/agents/{agent['id']}")).status_code == 404
    assert (await alice.get("/agents")).json()["agents"] == []
    assert (await alice.get(f"/conversations/{conversation_id}")).status_code == 404
    response = await alice.post(
        f"/conversations/{conversation_id}/messages",
        json={"clientMessageId": "k", "role": "user", "content": "still there?"},
    )
    assert response.status_code == 404


async def test_proxy_forwards_own_agent_and_refuses_another_users(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = engine.post("/api/v2/memory/search").mock(
        return_value=httpx.Response(200, json={"data": {"episodes": []}})
    )
    agent = await make_agent(alice)
    body = {"query": "x", "agent_id": agent["id"]}
    response = await alice.post("/api/v2/memory/search", json=body)
    assert response.status_code == 200
    assert json.loads(route.calls.last.request.content) == body
    assert route.call_count == 1

    refused = await bob.post("/api/v2/memory/search", json=body)
    assert refused.status_code == 403
    assert refused.json()["error"]["field"] == "agent_id"
    assert route.call_count == 1

    await alice.delete(f"/agents/{agent['id']}")
    assert (await alice.post("/api/v2/memory/search", json=body)).status_code == 403
    assert route.call_count == 1
