"""`GET /agents/{agent_id}/context` (SPEC §11): what a prompt needs, with limits."""

import asyncio

import httpx
import pytest

from tests.test_agents import make_agent, say

pytestmark = pytest.mark.both_databases


async def remember(
    client: httpx.AsyncClient, agent_id: str, content: str, **fields: object
) -> dict:
    response = await client.post(f"/agents/{agent_id}/memories",
                                 json={"type": "note", "content": content, **fields})
    assert response.status_code == 201
    return response.json()


async def test_context_assembles_memories_messages_and_facts(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(alice)
    agent_id = agent["id"]
    conversation_id = (await alice.get(f"/agents/{agent_id}/conversation")).json()[
        "conversationId"
    ]
    for i in range(6):
        await say(alice, conversation_id, f"k{i}", f"m{i}")
    low = await remember(alice, agent_id, "low", importance=1)
    older_high = await remember(alice, agent_id, "older high", importance=5)
    await asyncio.sleep(0.002)
    newer_high = await remember(alice, agent_id, "newer high", importance=5)
    disabled = await remember(alice, agent_id, "disabled", importance=5, status="disabled")
    deleted = await remember(alice, agent_id, "deleted", importance=5)
    await alice.delete(f"/agents/{agent_id}/memories/{deleted['id']}")
    facts = {}
    for key, extra in (("plain", {}), ("pinned", {"pinned": True}), ("inactive", None)):
        body = {"scope": "global", "factType": "preference", "key": key, "value": key,
                "sourceType": "manual" if extra is not None else "inferred", **(extra or {})}
        facts[key] = (await alice.post("/memory-facts", json=body)).json()

    response = await alice.get(f"/agents/{agent_id}/context",
                               params={"memoryLimit": "3", "messageLimit": "4"})
    assert response.status_code == 200
    context = response.json()
    assert context["agentId"] == agent_id
    assert context["conversationId"] == conversation_id
    assert context["summary"] is None
    assert [m["id"] for m in context["memories"]] == [newer_high["id"], older_high["id"],
                                                      low["id"]]
    assert [m["content"] for m in context["recentMessages"]] == ["m2", "m3", "m4", "m5"]
    assert [f["key"] for f in context["facts"]] == ["pinned", "plain"]
    assert all(f["active"] for f in context["facts"])

    # Re-enabling a memory makes it the most recently updated of its importance.
    await asyncio.sleep(0.002)
    await alice.patch(f"/agents/{agent_id}/memories/{disabled['id']}", json={"status": "active"})
    context = (await alice.get(f"/agents/{agent_id}/context", params={"memoryLimit": "2"})).json()
    assert [m["id"] for m in context["memories"]] == [disabled["id"], newer_high["id"]]


async def test_context_limits_default_and_bounds(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(alice)
    conversation_id = (await alice.get(f"/agents/{agent['id']}/conversation")).json()[
        "conversationId"
    ]
    for i in range(25):
        await say(alice, conversation_id, f"k{i}", f"m{i}")
    for i in range(12):
        await remember(alice, agent["id"], f"memory {i}")
    context = (await alice.get(f"/agents/{agent['id']}/context")).json()
    assert len(context["recentMessages"]) == 20
    assert context["recentMessages"][-1]["content"] == "m24"
    assert len(context["memories"]) == 10
    none = (await alice.get(f"/agents/{agent['id']}/context",
                            params={"messageLimit": "0", "memoryLimit": "0"})).json()
    assert none["recentMessages"] == [] and none["memories"] == []
    for params, field in (({"messageLimit": "201"}, "messageLimit"),
                          ({"memoryLimit": "51"}, "memoryLimit"),
                          ({"factLimit": "-1"}, "factLimit"),
                          ({"memoryLimit": "ten"}, "memoryLimit")):
        response = await alice.get(f"/agents/{agent['id']}/context", params=params)
        assert response.status_code == 422, params
        assert response.json()["error"]["field"] == field


async def test_context_does_not_create_the_default_conversation(
    alice: httpx.AsyncClient,
) -> None:
    agent = await make_agent(alice)
    context = (await alice.get(f"/agents/{agent['id']}/context")).json()
    assert context["conversationId"] is None
    assert context["recentMessages"] == [] and context["summary"] is None
    listed = (await alice.get(f"/agents/{agent['id']}/conversations")).json()["conversations"]
    assert listed == []


async def test_context_for_a_named_conversation_of_that_agent_only(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    agent = await make_agent(alice)
    other = await make_agent(alice)
    extra = (await alice.post(f"/agents/{agent['id']}/conversations")).json()
    await say(alice, extra["id"], "k", "in the extra conversation")
    context = (await alice.get(f"/agents/{agent['id']}/context",
                               params={"conversationId": extra["id"]})).json()
    assert [m["content"] for m in context["recentMessages"]] == ["in the extra conversation"]
    wrong_agent = await alice.get(f"/agents/{other['id']}/context",
                                  params={"conversationId": extra["id"]})
    assert wrong_agent.status_code == 404
    bobs_agent = await make_agent(bob)
    foreign = await bob.get(f"/agents/{bobs_agent['id']}/context",
                            params={"conversationId": extra["id"]})
    assert foreign.status_code == 404
