"""Messages (SPEC §10): idempotent posting, validation, attachments, cursor history pages."""

import asyncio
import json

import httpx
import pytest

from gateway.app import Gateway
from gateway.config import Settings
from gateway.store import messages
from tests import databases
from tests.test_agents import make_agent, say

pytestmark = pytest.mark.both_databases


async def new_conversation(client: httpx.AsyncClient) -> str:
    agent = await make_agent(client)
    response = await client.get(f"/agents/{agent['id']}/conversation")
    return str(response.json()["conversationId"])


def insert_resource(
    settings: Settings, user: str, resource_id: str, name: str, deleted: bool = False
) -> None:
    databases.execute(
        settings.storage.database,
        "INSERT INTO resources (id, user_id, name, safe_name, content_type, size, sha256,"
        " session_id, internal_uri, created_at, deleted_at)"
        " VALUES (?, ?, ?, ?, 'image/png', 1, 'x', ?, ?, 1, ?)",
        resource_id, user, name, name, f"resource:{user}:{resource_id}",
        f"file:///tmp/{resource_id}", 2 if deleted else None,
    )


def insert_asset(settings: Settings, user: str, asset_id: str, display_name: str | None) -> None:
    databases.execute(
        settings.storage.database,
        "INSERT INTO media_assets (id, user_id, media_type, source_type, original_url,"
        " display_name, root_asset_id, created_at_ms, updated_at_ms)"
        " VALUES (?, ?, 'image', 'upload', 'https://cdn.test/a.png', ?, ?, 1, 1)",
        asset_id, user, display_name, asset_id,
    )


async def agent_of(client: httpx.AsyncClient, conversation_id: str) -> str:
    return str((await client.get(f"/conversations/{conversation_id}")).json()["agentId"])


def message_rows(settings: Settings, conversation_id: str) -> int:
    [(count,)] = databases.rows(
        settings.storage.database,
        "SELECT COUNT(*) FROM conversation_messages WHERE conversation_id = ?", conversation_id,
    )
    return int(count)


async def test_posted_message_has_the_specified_shape(alice: httpx.AsyncClient) -> None:
    conversation_id = await new_conversation(alice)
    response = await alice.post(
        f"/conversations/{conversation_id}/messages",
        json={"clientMessageId": "c-1", "role": "assistant", "content": "Done.",
              "status": "failed", "metadata": {"model": "m1", "tokens": 12}},
    )
    assert response.status_code == 201
    message = response.json()["message"]
    assert message == {
        "id": message["id"],
        "conversationId": conversation_id,
        "clientMessageId": "c-1",
        "role": "assistant",
        "content": "Done.",
        "status": "failed",
        "attachments": [],
        "metadata": {"model": "m1", "tokens": 12},
        "createdAtMs": message["createdAtMs"],
        "toolCall": None,  # set on role "tool" messages only (tests/test_tool_calls.py)
    }
    assert message["id"].startswith("msg_")


async def test_retry_with_same_content_returns_the_stored_message(
    alice: httpx.AsyncClient, settings: Settings
) -> None:
    conversation_id = await new_conversation(alice)
    body = {"clientMessageId": "retry-me", "role": "user", "content": "draw a cat"}
    first = await alice.post(f"/conversations/{conversation_id}/messages", json=body)
    again = await alice.post(f"/conversations/{conversation_id}/messages",
                             json={**body, "metadata": {"attempt": 2}})
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json()["message"] == first.json()["message"]
    assert again.json()["conversation"]["messageCount"] == 1
    assert message_rows(settings, conversation_id) == 1


async def test_same_key_with_different_content_is_an_idempotency_conflict(
    alice: httpx.AsyncClient, settings: Settings
) -> None:
    conversation_id = await new_conversation(alice)
    insert_resource(settings, "alice", "res_a", "a.png")
    body = {"clientMessageId": "k", "role": "user", "content": "draw a cat"}
    assert (await alice.post(f"/conversations/{conversation_id}/messages",
                             json=body)).status_code == 201
    for changed in ({**body, "content": "draw a dog"},
                    {**body, "attachments": [{"source": "resource", "referenceId": "res_a"}]}):
        response = await alice.post(f"/conversations/{conversation_id}/messages", json=changed)
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "idempotency_conflict"
        assert response.json()["error"]["field"] == "clientMessageId"
    assert message_rows(settings, conversation_id) == 1


async def test_concurrent_retries_of_one_key_append_once(
    alice: httpx.AsyncClient, settings: Settings
) -> None:
    conversation_id = await new_conversation(alice)
    body = {"clientMessageId": "burst", "role": "user", "content": "only once please"}
    responses = await asyncio.gather(
        *(alice.post(f"/conversations/{conversation_id}/messages", json=body) for _ in range(25))
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 24 + [201]
    assert len({r.json()["message"]["id"] for r in responses}) == 1
    assert message_rows(settings, conversation_id) == 1
    conversation = (await alice.get(f"/conversations/{conversation_id}")).json()
    assert conversation["messageCount"] == 1


async def test_one_key_may_be_reused_in_another_conversation(alice: httpx.AsyncClient) -> None:
    first, second = await new_conversation(alice), await new_conversation(alice)
    a = await say(alice, first, "same-key", "hi")
    b = await say(alice, second, "same-key", "hi")
    assert a["message"]["id"] != b["message"]["id"]


async def test_bad_messages_are_422_naming_the_field(alice: httpx.AsyncClient) -> None:
    conversation_id = await new_conversation(alice)
    base = {"clientMessageId": "k", "role": "user", "content": "hello"}
    attachment = {"source": "resource", "referenceId": "res_x"}
    cases = [
        ({**base, "clientMessageId": ""}, "clientMessageId"),
        ({**base, "clientMessageId": "x" * 129}, "clientMessageId"),
        ({"role": "user", "content": "hello"}, "clientMessageId"),
        ({**base, "role": "bot"}, "role"),
        ({**base, "status": "pending"}, "status"),
        ({**base, "content": "   \n "}, "content"),
        ({**base, "content": 42}, "content"),
        ({**base, "metadata": ["x"]}, "metadata"),
        ({**base, "metadata": {"n": float("inf")}}, "metadata"),
        ({**base, "attachments": [attachment] * 10}, "attachments"),
        ({**base, "role": "assistant", "content": " ", "attachments": [attachment]},
         "attachments"),
        ({**base, "attachments": [{"source": "url", "referenceId": "x"}]},
         "attachments.0.source"),
        ({**base, "attachments": [{"source": "resource", "referenceId": "a b"}]},
         "attachments.0.referenceId"),
    ]
    for body, field in cases:
        response = await alice.post(f"/conversations/{conversation_id}/messages",
                                    content=json.dumps(body).encode())
        assert response.status_code == 422, body
        assert response.json()["error"]["field"] == field, body
    lone_surrogate = b'{"clientMessageId": "k", "role": "user", "content": "a\\udc00"}'
    response = await alice.post(f"/conversations/{conversation_id}/messages",
                                content=lone_surrogate)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "content"
    assert (await alice.get(f"/conversations/{conversation_id}")).json()["messageCount"] == 0


async def test_assistant_and_system_messages_may_be_blank(alice: httpx.AsyncClient) -> None:
    conversation_id = await new_conversation(alice)
    for role in ("assistant", "system"):
        response = await alice.post(
            f"/conversations/{conversation_id}/messages",
            json={"clientMessageId": role, "role": role, "content": "", "status": "failed"},
        )
        assert response.status_code == 201


async def test_attachments_must_be_the_callers_and_get_normalised_labels(
    alice: httpx.AsyncClient, settings: Settings
) -> None:
    conversation_id = await new_conversation(alice)
    insert_resource(settings, "alice", "res_mine", "holiday photo (final)!.png")
    insert_resource(settings, "alice", "res_gone", "gone.png", deleted=True)
    insert_resource(settings, "bob", "res_bobs", "bob.png")
    insert_asset(settings, "alice", "ast_mine", "Sunset\tversion #2")
    insert_asset(settings, "alice", "ast_nameless", None)
    insert_asset(settings, "bob", "ast_bobs", "bob")
    response = await alice.post(
        f"/conversations/{conversation_id}/messages",
        json={"clientMessageId": "k", "role": "user", "content": "compare these",
              "attachments": [
                  {"source": "resource", "referenceId": "res_mine"},
                  {"source": "resource", "referenceId": "res_mine",
                   "label": "  my  <favourite>\n one, really the very best  "},
                  {"source": "asset", "referenceId": "ast_mine", "label": "!!!"},
                  {"source": "asset", "referenceId": "ast_nameless"},
              ]},
    )
    assert response.status_code == 201, response.text
    assert response.json()["message"]["attachments"] == [
        {"source": "resource", "referenceId": "res_mine", "label": "holiday photo final.png"},
        {"source": "resource", "referenceId": "res_mine", "label": "my favourite one really"},
        {"source": "asset", "referenceId": "ast_mine", "label": "Sunsetversion 2"},
        {"source": "asset", "referenceId": "ast_nameless", "label": "ast_nameless"},
    ]
    for index, ref in enumerate([("resource", "res_gone"), ("resource", "res_bobs"),
                                 ("asset", "ast_bobs"), ("asset", "res_mine")]):
        attachments = [{"source": "resource", "referenceId": "res_mine"}] * index
        attachments.append({"source": ref[0], "referenceId": ref[1]})
        response = await alice.post(
            f"/conversations/{conversation_id}/messages",
            json={"clientMessageId": f"bad-{index}", "role": "user", "content": "x",
                  "attachments": attachments},
        )
        assert response.status_code == 422, ref
        assert response.json()["error"]["field"] == f"attachments.{index}.referenceId"
    assert message_rows(settings, conversation_id) == 1


async def test_quick_appends_keep_their_order(alice: httpx.AsyncClient) -> None:
    conversation_id = await new_conversation(alice)
    for i in range(40):
        await say(alice, conversation_id, f"k{i}", f"message {i}")
    page = (await alice.get(f"/conversations/{conversation_id}/messages",
                            params={"limit": "200"})).json()
    assert [m["content"] for m in page["messages"]] == [f"message {i}" for i in range(40)]
    times = [m["createdAtMs"] for m in page["messages"]]
    assert times == sorted(times) and len(set(times)) == 40


async def test_history_pages_never_skip_or_repeat_when_timestamps_are_shared(
    app: Gateway, alice: httpx.AsyncClient
) -> None:
    conversation_id = await new_conversation(alice)
    # 600 messages over only 4 distinct milliseconds: 150 share each one.
    stamped = [(1_700_000_000_000 + i % 4, "user", f"m{i}") for i in range(600)]
    await messages.bulk_append(app.services.db, "alice", conversation_id, stamped)

    agent_id = await agent_of(alice, conversation_id)
    default = (await alice.get(f"/agents/{agent_id}/conversation",
                               params={"limit": "37"})).json()
    assert default["messageCount"] == 600
    collected = list(reversed(default["messages"]))
    cursor = default["nextCursor"]
    pages = 1
    while cursor is not None:
        page = (await alice.get(f"/conversations/{conversation_id}/messages",
                                params={"before": cursor, "limit": "37"})).json()
        assert 0 < len(page["messages"]) <= 37
        collected += list(reversed(page["messages"]))
        cursor = page["nextCursor"]
        pages += 1
    assert pages == 17  # ceil(600 / 37)
    ids = [m["id"] for m in collected]
    assert len(ids) == len(set(ids)) == 600
    keys = [(m["createdAtMs"], m["id"]) for m in collected]
    assert keys == sorted(keys, reverse=True)
    assert {m["content"] for m in collected} == {f"m{i}" for i in range(600)}


async def test_pages_are_oldest_first_and_the_last_has_no_cursor(
    alice: httpx.AsyncClient,
) -> None:
    conversation_id = await new_conversation(alice)
    for i in range(5):
        await say(alice, conversation_id, f"k{i}", f"m{i}")
    newest = (await alice.get(f"/conversations/{conversation_id}/messages",
                              params={"limit": "3"})).json()
    assert [m["content"] for m in newest["messages"]] == ["m2", "m3", "m4"]
    older = (await alice.get(f"/conversations/{conversation_id}/messages",
                             params={"limit": "3", "before": newest["nextCursor"]})).json()
    assert [m["content"] for m in older["messages"]] == ["m0", "m1"]
    assert older["nextCursor"] is None
    exact = (await alice.get(f"/conversations/{conversation_id}/messages",
                             params={"limit": "5"})).json()
    assert len(exact["messages"]) == 5 and exact["nextCursor"] is None


async def test_history_rejects_bad_cursor_and_limit(alice: httpx.AsyncClient) -> None:
    conversation_id = await new_conversation(alice)
    agent_id = await agent_of(alice, conversation_id)
    for url in (f"/conversations/{conversation_id}/messages",
                f"/agents/{agent_id}/conversation"):
        for params, field in (({"before": "%%%"}, "before"), ({"before": "bm90IGpzb24"}, "before"),
                              ({"before": "WzEuNSwieCJd"}, "before"), ({"limit": "0"}, "limit"),
                              ({"limit": "201"}, "limit")):
            response = await alice.get(url, params=params)
            assert response.status_code == 422, (url, params)
            assert response.json()["error"]["field"] == field


async def test_a_nul_character_is_never_a_500(
    alice: httpx.AsyncClient, settings: Settings, database_backend: str
) -> None:
    """PostgreSQL text cannot hold NUL: there it is a 422 naming the problem, with nothing
    written; SQLite stores it."""
    conversation_id = await new_conversation(alice)
    response = await alice.post(f"/conversations/{conversation_id}/messages",
                                json={"clientMessageId": "nul", "role": "user",
                                      "content": "before\u0000after"})
    if database_backend == "postgresql":
        assert response.status_code == 422, response.text
        assert "NUL" in response.json()["error"]["message"]
        assert message_rows(settings, conversation_id) == 0
    else:
        assert response.status_code == 201, response.text
        assert response.json()["message"]["content"] == "before\u0000after"
