"""Conversations (SPEC §10): the default one, more per agent, titles, bookkeeping, soft delete."""

import asyncio

import httpx
import pytest

from gateway.config import Settings
from tests import databases
from tests.test_agents import make_agent, say

pytestmark = pytest.mark.both_databases


async def test_default_conversation_is_created_once_and_stable(
    alice: httpx.AsyncClient, settings: Settings
) -> None:
    agent = await make_agent(alice, openingMessage="Hi! What shall we draw?")
    first = await alice.get(f"/agents/{agent['id']}/conversation")
    assert first.status_code == 200
    body = first.json()
    assert body == {
        "conversationId": body["conversationId"],
        "agentId": agent["id"],
        "title": "新对话",
        "summary": None,
        "messageCount": 0,
        "openingMessage": "Hi! What shall we draw?",
        "messages": [],
        "nextCursor": None,
    }
    again = (await alice.get(f"/agents/{agent['id']}/conversation")).json()
    assert again["conversationId"] == body["conversationId"]


async def test_concurrent_first_reads_create_one_default_conversation(
    alice: httpx.AsyncClient, settings: Settings
) -> None:
    agent = await make_agent(alice)
    responses = await asyncio.gather(
        *(alice.get(f"/agents/{agent['id']}/conversation") for _ in range(12))
    )
    assert {r.json()["conversationId"] for r in responses} == {
        responses[0].json()["conversationId"]
    }
    [(count,)] = databases.rows(
        settings.storage.database, "SELECT COUNT(*) FROM conversations WHERE agent_id = ?",
        agent["id"],
    )
    assert count == 1


async def test_title_comes_from_the_first_user_message_with_text(
    alice: httpx.AsyncClient,
) -> None:
    agent = await make_agent(alice)
    conversation_id = (await alice.get(f"/agents/{agent['id']}/conversation")).json()[
        "conversationId"
    ]
    posted = await alice.post(
        f"/conversations/{conversation_id}/messages",
        json={"clientMessageId": "a1", "role": "assistant", "content": "Welcome back!"},
    )
    assert posted.json()["conversation"]["title"] == "新对话"
    text = "  帮我把这张照片改成水彩风格，背景换成黄昏的海边，再加一只猫  "
    conversation = (await say(alice, conversation_id, "u1", text))["conversation"]
    assert conversation["title"] == text.strip()[:24]
    assert len(conversation["title"]) == 24
    later = (await say(alice, conversation_id, "u2", "another request"))["conversation"]
    assert later["title"] == text.strip()[:24]


async def test_bookkeeping_changes_with_each_append(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(alice)
    conversation = (await alice.get(f"/agents/{agent['id']}/conversation")).json()
    conversation_id = conversation["conversationId"]
    before = (await alice.get(f"/conversations/{conversation_id}")).json()
    assert before["messageCount"] == 0 and before["lastMessageAtMs"] is None
    posted = await say(alice, conversation_id, "k1", "first")
    second = await say(alice, conversation_id, "k2", "second")
    after = (await alice.get(f"/conversations/{conversation_id}")).json()
    assert after["messageCount"] == 2
    assert after["lastMessageAtMs"] == second["message"]["createdAtMs"]
    assert after["updatedAtMs"] >= after["lastMessageAtMs"] >= posted["message"]["createdAtMs"]
    assert second["conversation"] == after
    default = (await alice.get(f"/agents/{agent['id']}/conversation")).json()
    assert default["messageCount"] == 2
    assert [m["content"] for m in default["messages"]] == ["first", "second"]


async def test_more_conversations_are_listed_by_latest_update(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(alice)
    default_id = (await alice.get(f"/agents/{agent['id']}/conversation")).json()[
        "conversationId"
    ]
    created = await alice.post(f"/agents/{agent['id']}/conversations")
    assert created.status_code == 201
    extra = created.json()
    assert extra["title"] == "新对话"
    assert extra["isDefault"] is False and extra["messageCount"] == 0
    titled = (await alice.post(f"/agents/{agent['id']}/conversations",
                               json={"title": "Storyboard"})).json()
    assert titled["title"] == "Storyboard"
    await asyncio.sleep(0.002)
    await say(alice, default_id, "k1", "bump the default one")
    listed = (await alice.get(f"/agents/{agent['id']}/conversations")).json()
    ids = [c["id"] for c in listed["conversations"]]
    assert ids[0] == default_id
    assert set(ids) == {default_id, extra["id"], titled["id"]}
    assert listed["nextCursor"] is None
    await asyncio.sleep(0.002)
    assert (await say(alice, titled["id"], "k1", "x"))["conversation"]["title"] == "Storyboard"
    page = (await alice.get(f"/agents/{agent['id']}/conversations",
                            params={"limit": "2"})).json()
    assert len(page["conversations"]) == 2 and page["nextCursor"]
    rest = (await alice.get(f"/agents/{agent['id']}/conversations",
                            params={"limit": "2", "cursor": page["nextCursor"]})).json()
    assert [c["id"] for c in page["conversations"] + rest["conversations"]] == [
        titled["id"], default_id, extra["id"]
    ]


async def test_create_conversation_rejects_bad_titles(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(alice)
    for body in ({"title": "  "}, {"title": 3}, {"title": "x" * 101}):
        response = await alice.post(f"/agents/{agent['id']}/conversations", json=body)
        assert response.status_code == 422
        assert response.json()["error"]["field"] == "title"
    response = await alice.post(f"/agents/{agent['id']}/conversations", content=b"{nope")
    assert response.status_code == 422


async def test_deleted_conversation_vanishes_from_lists_and_reads(
    alice: httpx.AsyncClient,
) -> None:
    agent = await make_agent(alice)
    extra = (await alice.post(f"/agents/{agent['id']}/conversations")).json()
    await say(alice, extra["id"], "k1", "hello")
    assert (await alice.delete(f"/conversations/{extra['id']}")).status_code == 204
    assert (await alice.get(f"/conversations/{extra['id']}")).status_code == 404
    assert (await alice.get(f"/conversations/{extra['id']}/messages")).status_code == 404
    assert (await alice.delete(f"/conversations/{extra['id']}")).status_code == 404
    response = await alice.post(
        f"/conversations/{extra['id']}/messages",
        json={"clientMessageId": "k1", "role": "user", "content": "hello"},
    )
    assert response.status_code == 404
    listed = (await alice.get(f"/agents/{agent['id']}/conversations")).json()["conversations"]
    assert extra["id"] not in [c["id"] for c in listed]


async def test_deleting_the_default_conversation_starts_a_new_one(
    alice: httpx.AsyncClient,
) -> None:
    agent = await make_agent(alice)
    old = (await alice.get(f"/agents/{agent['id']}/conversation")).json()["conversationId"]
    await say(alice, old, "k1", "old history")
    assert (await alice.delete(f"/conversations/{old}")).status_code == 204
    fresh = (await alice.get(f"/agents/{agent['id']}/conversation")).json()
    assert fresh["conversationId"] != old
    assert fresh["messages"] == [] and fresh["messageCount"] == 0


async def test_another_users_conversation_is_not_found(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    agent = await make_agent(alice)
    conversation_id = (await alice.get(f"/agents/{agent['id']}/conversation")).json()[
        "conversationId"
    ]
    await say(alice, conversation_id, "k1", "private")
    for method, url, body in [
        ("GET", f"/conversations/{conversation_id}", None),
        ("DELETE", f"/conversations/{conversation_id}", None),
        ("GET", f"/conversations/{conversation_id}/messages", None),
        ("POST", f"/conversations/{conversation_id}/messages",
         {"clientMessageId": "k1", "role": "user", "content": "private"}),
    ]:
        response = await bob.request(method, url, json=body)
        assert response.status_code == 404, (method, url)
    mine = (await alice.get(f"/conversations/{conversation_id}")).json()
    assert mine["messageCount"] == 1


async def test_unknown_conversation_paths_are_404_not_proxied(alice: httpx.AsyncClient) -> None:
    response = await alice.get("/conversations/cnv_missing/other")
    assert response.status_code == 404
    response = await alice.put("/conversations/cnv_missing")
    assert response.status_code == 405
