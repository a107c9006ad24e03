"""The EverOS 1.5.1 routes modelled as the engine parses them (issue 20, findings 1, 2, 3, 7).

Two users, alice and bob; bob holds a valid key and tries to reach alice's memories, sessions and
agents. The recording fake engine's request list proves that nothing was forwarded; each test
here failed on the gateway that checked one generic list of field names on every route.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.security.support import (  # noqa: F401 (fixtures, found by name)
    RecordingEngine,
    alice_fixture,
    app_fixture,
    bob_fixture,
    engine_fixture,
    settings_fixture,
)

NOW = 1_760_000_000_000


def message(sender: str, role: str = "user", text: str = "hi") -> dict[str, Any]:
    out: dict[str, Any] = {"role": role, "sender_id": sender, "timestamp": NOW, "content": text}
    if role == "tool":
        out["tool_call_id"] = "call_1"
    return out


async def add(client: httpx.AsyncClient, session: str, *messages: dict[str, Any]) -> None:
    response = await client.post("/api/v2/memory/add",
                                 json={"session_id": session, "messages": list(messages)})
    assert response.status_code == 200, response.text


async def new_agent(client: httpx.AsyncClient) -> str:
    response = await client.post("/agents", json={"name": "helper"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


# --- 1: get without the owner the engine filters by -----------------------------------------

GET_WITHOUT_OWNER = [
    ("empty body, own id as cube in the query", "?cube_id=bob", {}),
    ("own session in the query", "?session_id=bob-trip", {"memory_type": "episode"}),
    ("own session at the top of the body", "", {"session_id": "bob-trip",
                                                "memory_type": "episode"}),
    ("own session as a filter", "", {"memory_type": "episode",
                                     "filters": {"session_id": "bob-trip"}}),
    ("own user id as cube in the body", "", {"cube_id": "bob", "memory_type": "episode"}),
]


@pytest.mark.parametrize(("case", "query", "body"), GET_WITHOUT_OWNER,
                         ids=[case[0] for case in GET_WITHOUT_OWNER])
async def test_get_is_never_forwarded_without_the_owner_the_engine_filters_by(
    bob: httpx.AsyncClient, engine: RecordingEngine, case: str, query: str, body: Any
) -> None:
    await add(bob, "bob-trip", message("bob"))
    engine.requests.clear()
    for version in ("v1", "v2"):
        response = await bob.post(f"/api/{version}/memory/get{query}", json=body)
        assert response.status_code == 422, (case, response.text)
        assert response.json()["error"]["status"] == 422
    assert engine.requests == []


async def test_get_with_the_callers_user_id_is_forwarded_unchanged(
    bob: httpx.AsyncClient, engine: RecordingEngine
) -> None:
    body = {"user_id": "bob", "memory_type": "episode", "page_size": 5}
    response = await bob.post("/api/v2/memory/get", json=body)
    assert response.status_code == 200, response.text
    assert json.loads(engine.requests[-1].content) == body


@pytest.mark.parametrize("body", [
    {"user_id": "alice", "memory_type": "episode"},
    {"user_id": "bob", "agent_id": "agt_x", "memory_type": "episode"},  # engine: exactly one
    {"user_id": "bob", "memory_type": "agent_case"},  # engine: owner/kind pairing
    {"user_id": "bob"},  # engine: memory_type required
    {"user_id": "bob", "memory_type": "episode", "filters": {"user_id": "alice"}},
    {"user_id": "bob", "memory_type": "episode", "filters": {"owner_id": "alice"}},
    {"user_id": "bob", "memory_type": "episode", "extra": 1},  # engine: extra=forbid
], ids=["another-user", "both-owners", "kind-mismatch", "no-kind", "filter-user",
        "filter-owner", "unknown-key"])
async def test_get_refusals_are_the_engines_and_nothing_is_forwarded(
    bob: httpx.AsyncClient, engine: RecordingEngine, body: dict[str, Any]
) -> None:
    response = await bob.post("/api/v2/memory/get", json=body)
    assert response.status_code in (403, 422), response.text
    assert engine.requests == []


async def test_get_by_another_users_agent_is_403(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: RecordingEngine
) -> None:
    agent = await new_agent(alice)
    response = await bob.post("/api/v2/memory/get",
                              json={"agent_id": agent, "memory_type": "agent_case"})
    assert response.status_code == 403
    assert engine.requests == []
    mine = await alice.post("/api/v2/memory/get",
                            json={"agent_id": agent, "memory_type": "agent_case"})
    assert mine.status_code == 200


async def test_search_refuses_what_the_engine_refuses(
    bob: httpx.AsyncClient, engine: RecordingEngine
) -> None:
    for body in ({"query": "x"}, {"query": "x", "session_id": "s"},
                 {"query": "x", "user_id": "bob", "filters": {"user_id": "bob"}},
                 {"query": "", "user_id": "bob"}):
        response = await bob.post("/api/v2/memory/search", json=body)
        assert response.status_code == 422, (body, response.text)
    assert engine.requests == []


# --- 2: the scope the engine reads, not the query string ------------------------------------

async def test_flush_of_another_users_session_is_refused_whatever_the_query_says(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: RecordingEngine
) -> None:
    await add(alice, "alice-trip", message("alice"))
    engine.requests.clear()
    for query in ("?app_id=zzz", "?project_id=zzz", "?app_id=zzz&project_id=zzz", ""):
        response = await bob.post(f"/api/v2/memory/flush{query}",
                                  json={"session_id": "alice-trip"})
        assert response.status_code == 404, (query, response.text)
    assert engine.requests == []
    mine = await alice.post("/api/v2/memory/flush?app_id=zzz", json={"session_id": "alice-trip"})
    assert mine.status_code == 200


async def test_search_of_another_users_session_buffer_is_refused(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: RecordingEngine
) -> None:
    await add(alice, "alice-trip", message("alice"))
    engine.requests.clear()
    response = await bob.post("/api/v2/memory/search", json={
        "query": "x", "user_id": "bob", "filters": {"session_id": "alice-trip"}})
    assert response.status_code == 404
    assert engine.requests == []


# --- 3: every sender the engine makes an owner ----------------------------------------------

@pytest.mark.parametrize("role", ["assistant", "tool"])
async def test_an_assistant_or_tool_sender_must_be_one_of_the_callers_agents(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: RecordingEngine, role: str
) -> None:
    alices_agent = await new_agent(alice)
    bobs_agent = await new_agent(bob)
    for sender in (alices_agent, "alice", "assistant"):
        response = await bob.post("/api/v2/memory/add", json={
            "session_id": "bob-chat", "messages": [message("bob"), message(sender, role)]})
        assert response.status_code == 403, (sender, response.text)
        assert response.json()["error"]["field"] == "messages[1].sender_id"
    assert engine.requests == []
    await add(bob, "bob-chat", message("bob"), message(bobs_agent, role))
    assert len(engine.requests) == 1


# --- 7: no existence oracle -----------------------------------------------------------------

async def test_a_session_of_another_user_reads_like_one_of_no_one(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: RecordingEngine
) -> None:
    await add(alice, "alice-trip", message("alice"))
    answers = []
    for session in ("alice-trip", "nobodys-trip"):
        response = await bob.post("/api/v2/memory/flush", json={"session_id": session})
        answers.append((response.status_code, response.json()["error"]["code"]))
    assert answers[0] == answers[1] == (404, "not_found")


async def test_message_validation_is_the_engines(
    bob: httpx.AsyncClient, engine: RecordingEngine
) -> None:
    bad = [
        {"session_id": "s", "messages": [{"role": "user", "sender_id": "bob", "content": "x"}]},
        {"session_id": "s", "messages": [{"role": "user", "timestamp": NOW, "content": "x"}]},
        {"session_id": "s", "messages": []},
        {"messages": [message("bob")]},
        {"session_id": "s", "messages": [{**message("bob"), "content": [
            {"type": "video", "uri": "https://example.com/v.mp4"}]}]},
        {"session_id": "s", "messages": [{**message("bob"), "content": [
            {"type": "text", "text": "x", "owner": "alice"}]}]},
        {"session_id": "s", "app_id": "default_app", "messages": [message("bob")]},
        {"session_id": "s", "messages": [message("../alice")]},
    ]
    for body in bad:
        response = await bob.post("/api/v2/memory/add", json=body)
        assert response.status_code == 422, (body, response.text)
    assert engine.requests == []


async def test_only_the_query_names_the_engine_reads_are_forwarded(
    bob: httpx.AsyncClient, engine: RecordingEngine
) -> None:
    await add(bob, "bob-trip", message("bob"))
    engine.requests.clear()
    response = await bob.get("/api/v2/tasks?session_id=bob-trip&user_id=alice&agent%5Fid=x"
                             "&page=2")
    assert response.status_code == 200, response.text
    [sent] = engine.requests
    assert sorted(sent.url.params.multi_items()) == [("page", "2"), ("session_id", "bob-trip")]
    response = await bob.post("/api/v2/memory/flush?session_id=alice-trip&app_id=zzz",
                              json={"session_id": "bob-trip"})
    assert response.status_code == 200
    assert engine.requests[-1].url.query == b""
