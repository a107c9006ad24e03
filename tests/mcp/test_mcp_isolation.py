"""The attacker's view of `/mcp` (SPEC §19, §3): bob names alice's ids in every argument of
every tool and resource; he gets nothing of hers, and a made-up id answers as hers does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from mcp import Client

from gateway.app import Gateway
from gateway.config import Settings
from tests.conftest import create_key
from tests.mcp.conftest import MAP, PNG, connect, http, remember, running
from tests.mcp_helpers import b64, rpc_error, structured, tool_error


@dataclass
class Alices:
    session: str
    attachment_uri: str
    resource_uri: str
    deleted_uri: str
    agent_id: str
    conversation: str


@dataclass
class Scene:
    app: Gateway
    alice_token: str
    bob: Client
    alices: Alices


@pytest.fixture
async def scene(settings: Settings) -> AsyncIterator[Scene]:
    settings = settings.with_values(server={"public_url": "http://gateway.test"})
    async with running(settings) as app:
        alice_token = create_key(settings, "alice")
        async with connect(app, alice_token) as alice:
            added = await remember(alice, "alice-trip")
            up = structured(await alice.call_tool("upload_file", {"name": "map.png",
                                                                  "base64": b64(MAP)}))
            gone = structured(await alice.call_tool("upload_file", {"name": "old.png",
                                                                    "base64": b64(PNG)}))
            await alice.call_tool("resolve_image_reference",
                                  {"conversation_id": "alice-chat", "text": "the first one"})
        async with http(app, alice_token) as rest:
            assert (await rest.delete(f"/resources/{gone['id']}")).status_code == 204
            agent = (await rest.post("/agents", json={"name": "guide"})).json()["id"]
        alices = Alices("alice-trip", added["attachments"][0]["uri"], up["uri"], gone["uri"],
                        agent, "alice-chat")
        async with connect(app, create_key(settings, "bob")) as bob:
            yield Scene(app, alice_token, bob, alices)


def _without_uri(error: dict[str, Any]) -> dict[str, Any]:
    return {**error, "data": {k: v for k, v in error["data"].items() if k != "uri"}}


async def test_resources_read_answers_the_same_for_foreign_unknown_and_deleted(
        scene: Scene) -> None:
    bob, a = scene.bob, scene.alices
    answers = []
    for uri in (a.resource_uri, a.attachment_uri, a.deleted_uri, "resource://res_madeup",
                "attachment://att_madeup", "resource://../alice", "file:///etc/passwd",
                "attachment://" + a.resource_uri[11:]):
        error = await rpc_error(bob, bob.read_resource(uri))
        assert error["data"] == {"uri": uri}
        answers.append(_without_uri(error))
    assert all(answer == {"code": -32002, "message": "Resource not found", "data": {}}
               for answer in answers)
    # alice herself: her live files are hers, the deleted one is gone for her too.
    async with connect(scene.app, scene.alice_token) as alice:
        await alice.read_resource(a.resource_uri)
        await alice.read_resource(a.attachment_uri)
        assert (await rpc_error(alice, alice.read_resource(a.deleted_uri)))["code"] == -32002


async def test_resources_list_and_list_sessions_show_only_the_callers(scene: Scene) -> None:
    bob = scene.bob
    assert (await bob.list_resources()).resources == []
    assert structured(await bob.call_tool("list_sessions", {}))["items"] == []
    await remember(bob, "bob-notes")
    assert [s["session_id"] for s in
            structured(await bob.call_tool("list_sessions", {}))["items"]] == ["bob-notes"]


async def test_search_and_get_never_reach_alices_memories(scene: Scene) -> None:
    bob, a = scene.bob, scene.alices
    for arguments in ({"query": "lighthouse"}, {"query": "map.png"}):
        found = await bob.call_tool("search_memory", arguments)
        assert not found.is_error
        assert structured(found)["results"] == []
        assert "lighthouse" not in str(found.content)
    in_hers = await tool_error(bob, "search_memory", {"query": "lighthouse",
                                                      "session_id": a.session})
    made_up = await tool_error(bob, "search_memory", {"query": "lighthouse",
                                                      "session_id": "madeup"})
    assert in_hers == made_up and in_hers["status"] == 404
    got = await bob.call_tool("get_memories", {"memory_type": "episode"})
    assert structured(got)["data"]["episodes"] == []
    # An argument naming the user is not an argument of the tool.
    error = await rpc_error(bob, bob.call_tool("search_memory",
                                               {"query": "lighthouse", "user_id": "alice"}))
    assert error["code"] == -32602 and error["data"]["field"] == "user_id"
    error = await rpc_error(bob, bob.call_tool("get_memories",
                                               {"memory_type": "episode", "user_id": "alice"}))
    assert error["code"] == -32602


async def test_add_memory_with_alices_files_answers_as_for_made_up_ones(scene: Scene) -> None:
    bob, a = scene.bob, scene.alices
    refusals = []
    for uri in (a.resource_uri, a.attachment_uri, a.deleted_uri, "resource://res_madeup",
                "attachment://att_madeup"):
        refusals.append(await tool_error(bob, "add_memory", {
            "session_id": "bob-notes", "text": "mine now", "files": [{"resource_uri": uri}]}))
    assert all(r == refusals[0] for r in refusals), refusals
    assert refusals[0]["status"] == 404 and refusals[0]["code"] == "not_found"
    # nothing was added: bob's session does not exist
    assert structured(await bob.call_tool("list_sessions", {}))["items"] == []


async def test_get_memories_of_alices_agent_answers_as_for_a_made_up_one(
        scene: Scene) -> None:
    bob, a = scene.bob, scene.alices
    for memory_type in ("agent_case", "agent_skill"):
        hers = await tool_error(bob, "get_memories", {"memory_type": memory_type,
                                                      "agent_id": a.agent_id})
        made_up = await tool_error(bob, "get_memories", {"memory_type": memory_type,
                                                         "agent_id": "agt_madeup"})
        assert hers == made_up
        assert (hers["status"], hers["code"], hers["field"]) == (403, "forbidden", "agent_id")
    # alice reaches her agent's memories the same way
    async with connect(scene.app, scene.alice_token) as alice:
        got = await alice.call_tool("get_memories", {"memory_type": "agent_case",
                                                     "agent_id": a.agent_id})
        assert not got.is_error and structured(got)["data"]["agent_cases"] == []


async def test_alices_session_and_agent_are_refused(scene: Scene) -> None:
    bob, a = scene.bob, scene.alices
    into = await tool_error(bob, "add_memory", {"session_id": a.session, "text": "hi"})
    assert into["status"] == 403 and into["code"] == "session_owned_by_another_user"
    flushed = await tool_error(bob, "flush_session", {"session_id": a.session})
    assert flushed == await tool_error(bob, "flush_session", {"session_id": "madeup"})
    assert flushed["status"] == 404
    as_agent = await tool_error(bob, "add_memory", {
        "session_id": "bob-notes", "role": "assistant", "agent_id": a.agent_id, "text": "hi"})
    made_up = await tool_error(bob, "add_memory", {
        "session_id": "bob-notes", "role": "assistant", "agent_id": "agt_madeup", "text": "hi"})
    assert as_agent["status"] == 403 and {**as_agent, "message": ""} == {**made_up,
                                                                          "message": ""}
    async with connect(scene.app, scene.alice_token) as alice:
        found = structured(await alice.call_tool("search_memory",
                                                 {"query": "hi", "session_id": a.session}))
        assert all("hi" != r["content"] for r in found["results"])


async def test_resolve_in_alices_conversation_sees_only_bobs_state(scene: Scene) -> None:
    bob, a = scene.bob, scene.alices
    foreign = structured(await bob.call_tool("resolve_image_reference",
                                             {"conversation_id": a.conversation,
                                              "text": "the first one"}))
    made_up = structured(await bob.call_tool("resolve_image_reference",
                                             {"conversation_id": "chat-madeup",
                                              "text": "the first one"}))
    assert {**foreign, "resolutionId": ""} == {**made_up, "resolutionId": ""}
    assert foreign["targetAssetIds"] == []
    async with http(scene.app, scene.alice_token) as rest:
        audit = (await rest.get(f"/chats/{a.conversation}/resolutions")).json()
    assert len(audit["resolutions"]) == 1  # bob's call wrote only his own row
