"""Agent memories (SPEC §11): validation, provenance, status rules, ownership."""

import httpx
import pytest

from tests.test_agents import make_agent, say

pytestmark = pytest.mark.both_databases


async def agent_with_message(client: httpx.AsyncClient) -> tuple[str, dict]:
    agent = await make_agent(client)
    conversation_id = (await client.get(f"/agents/{agent['id']}/conversation")).json()[
        "conversationId"
    ]
    posted = await say(client, conversation_id, "k1", "I am vegetarian")
    return agent["id"], posted["message"]


async def test_create_embeds_the_source_message(alice: httpx.AsyncClient) -> None:
    agent_id, message = await agent_with_message(alice)
    response = await alice.post(
        f"/agents/{agent_id}/memories",
        json={"type": "diet", "content": "The user is vegetarian", "importance": 5,
              "sourceMessageId": message["id"]},
    )
    assert response.status_code == 201
    memory = response.json()
    assert memory == {
        "id": memory["id"],
        "agentId": agent_id,
        "type": "diet",
        "content": "The user is vegetarian",
        "importance": 5,
        "status": "active",
        "sourceMessageId": message["id"],
        "sourceMessage": {"id": message["id"], "role": "user", "content": "I am vegetarian",
                          "createdAtMs": message["createdAtMs"]},
        "createdAtMs": memory["createdAtMs"],
        "updatedAtMs": memory["createdAtMs"],
    }
    fetched = await alice.get(f"/agents/{agent_id}/memories/{memory['id']}")
    assert fetched.json() == memory
    plain = (await alice.post(f"/agents/{agent_id}/memories",
                              json={"type": "t", "content": "c"})).json()
    assert plain["importance"] == 3 and plain["sourceMessage"] is None


async def test_source_message_must_be_the_same_users_and_agents(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    agent_id, message = await agent_with_message(alice)
    other_agent, other_message = await agent_with_message(alice)
    _, bobs_message = await agent_with_message(bob)
    for source in (other_message["id"], bobs_message["id"], "msg_missing"):
        response = await alice.post(
            f"/agents/{agent_id}/memories",
            json={"type": "t", "content": "c", "sourceMessageId": source},
        )
        assert response.status_code == 422
        assert response.json()["error"]["field"] == "sourceMessageId"
    assert (await alice.get(f"/agents/{agent_id}/memories")).json()["memories"] == []


async def test_invalid_memories_are_422_naming_the_field(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(alice)
    base = {"type": "diet", "content": "vegetarian"}
    cases = [
        ({**base, "type": ""}, "type"),
        ({**base, "type": "x" * 81}, "type"),
        ({"content": "c"}, "type"),
        ({**base, "content": " "}, "content"),
        ({**base, "content": "x" * 2001}, "content"),
        ({**base, "importance": 0}, "importance"),
        ({**base, "importance": 6}, "importance"),
        ({**base, "importance": "3"}, "importance"),
        ({**base, "importance": 2.5}, "importance"),
        ({**base, "status": "deleted"}, "status"),
    ]
    for body, field in cases:
        response = await alice.post(f"/agents/{agent['id']}/memories", json=body)
        assert response.status_code == 422, body
        assert response.json()["error"]["field"] == field, body
    ok = await alice.post(f"/agents/{agent['id']}/memories",
                          json={"type": "x" * 80, "content": "y" * 2000, "importance": 1})
    assert ok.status_code == 201


async def test_patch_changes_only_allowed_fields(alice: httpx.AsyncClient) -> None:
    agent_id, message = await agent_with_message(alice)
    memory = (await alice.post(f"/agents/{agent_id}/memories",
                               json={"type": "diet", "content": "vegetarian"})).json()
    url = f"/agents/{agent_id}/memories/{memory['id']}"
    patched = await alice.patch(url, json={"content": "vegan", "importance": 4,
                                           "status": "disabled"})
    assert patched.status_code == 200
    body = patched.json()
    assert (body["content"], body["importance"], body["status"], body["type"]) == (
        "vegan", 4, "disabled", "diet")
    assert body["updatedAtMs"] >= memory["updatedAtMs"]
    for bad, field in (({"status": "deleted"}, "status"),
                       ({"sourceMessageId": message["id"]}, "sourceMessageId"),
                       ({"agentId": "agt_other"}, "agentId"),
                       ({"content": None}, "content"),
                       ({"importance": 9}, "importance")):
        response = await alice.patch(url, json=bad)
        assert response.status_code == 422, bad
        assert response.json()["error"]["field"] == field
    assert (await alice.get(url)).json() == body


async def test_disabled_memories_are_listed_and_deleted_ones_are_gone(
    alice: httpx.AsyncClient,
) -> None:
    agent = await make_agent(alice)
    url = f"/agents/{agent['id']}/memories"
    kept = (await alice.post(url, json={"type": "t", "content": "kept"})).json()
    disabled = (await alice.post(url, json={"type": "t", "content": "off",
                                            "status": "disabled"})).json()
    deleted = (await alice.post(url, json={"type": "t", "content": "gone"})).json()
    assert (await alice.delete(f"{url}/{deleted['id']}")).status_code == 204
    assert (await alice.delete(f"{url}/{deleted['id']}")).status_code == 404
    assert (await alice.get(f"{url}/{deleted['id']}")).status_code == 404
    assert (await alice.patch(f"{url}/{deleted['id']}", json={"status": "active"})).status_code \
        == 404
    listed = (await alice.get(url)).json()
    assert {m["id"] for m in listed["memories"]} == {disabled["id"], kept["id"]}
    assert {m["status"] for m in listed["memories"]} == {"active", "disabled"}
    only_active = (await alice.get(url, params={"status": "active"})).json()["memories"]
    assert [m["id"] for m in only_active] == [kept["id"]]
    response = await alice.get(url, params={"status": "deleted"})
    assert response.status_code == 422 and response.json()["error"]["field"] == "status"


async def test_memory_lists_page_with_a_cursor(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(alice)
    url = f"/agents/{agent['id']}/memories"
    created = [(await alice.post(url, json={"type": "t", "content": f"m{i}"})).json()["id"]
               for i in range(5)]
    first = (await alice.get(url, params={"limit": "2"})).json()
    second = (await alice.get(url, params={"limit": "2", "cursor": first["nextCursor"]})).json()
    third = (await alice.get(url, params={"limit": "2", "cursor": second["nextCursor"]})).json()
    ids = [m["id"] for page in (first, second, third) for m in page["memories"]]
    assert sorted(ids) == sorted(created) and len(ids) == 5
    assert third["nextCursor"] is None


async def test_another_users_memory_is_not_found(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    agent = await make_agent(alice)
    url = f"/agents/{agent['id']}/memories"
    memory = (await alice.post(url, json={"type": "t", "content": "secret"})).json()
    bobs_agent = await make_agent(bob)
    for method, path, body in [
        ("GET", f"{url}/{memory['id']}", None),
        ("PATCH", f"{url}/{memory['id']}", {"content": "mine"}),
        ("DELETE", f"{url}/{memory['id']}", None),
        # Bob's own agent id with Alice's memory id: still not found.
        ("GET", f"/agents/{bobs_agent['id']}/memories/{memory['id']}", None),
        ("DELETE", f"/agents/{bobs_agent['id']}/memories/{memory['id']}", None),
    ]:
        response = await bob.request(method, path, json=body)
        assert response.status_code == 404, (method, path)
    assert (await alice.get(f"{url}/{memory['id']}")).json()["content"] == "secret"
