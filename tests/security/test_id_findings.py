"""One test per id finding of the review of issue 51 (3, 4, 5, 6, 10), each failing on the old code.

bob holds a valid key and tries to reach alice's memories through the ids the engine reads in
its own way: mem0's `*` and padded ids, EverMemOS's sender groups, `__all__`, GET-body nulls and
`group_ids`, MemOS's own-name cubes, and routes that name no owner. The recording fake engine's
request list proves what reached it.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from gateway.app import Gateway
from gateway.config import Settings
from tests.security.support import RecordingEngine, body_of, gateway_with, keyed, settings_for

TEXT = [{"role": "user", "content": "my bank PIN is 4321"}]


def _owned_by_the_caller(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"user_id": request.headers.get("x-memory-user-id"),
                                     "results": [], "data": {}, "result": {}})


@pytest.fixture
def engine() -> RecordingEngine:
    return RecordingEngine(_owned_by_the_caller)


class Users:
    def __init__(self, app: Gateway, settings: Settings) -> None:
        self.app, self.settings = app, settings

    def __call__(self, user: str) -> httpx.AsyncClient:
        return keyed(self.app, self.settings, user)


async def _users(tmp_path: Path, engine: RecordingEngine, flavor: str
                 ) -> AsyncIterator[Users]:
    settings = settings_for(tmp_path, flavor=flavor)
    async with gateway_with(settings, engine) as app:
        yield Users(app, settings)


@pytest.fixture
async def mem0(tmp_path: Path, engine: RecordingEngine) -> AsyncIterator[Users]:
    async for users in _users(tmp_path, engine, "mem0"):
        yield users


@pytest.fixture
async def cloud(tmp_path: Path, engine: RecordingEngine) -> AsyncIterator[Users]:
    async for users in _users(tmp_path, engine, "everos-cloud"):
        yield users


@pytest.fixture
async def memos(tmp_path: Path, engine: RecordingEngine) -> AsyncIterator[Users]:
    async for users in _users(tmp_path, engine, "memos"):
        yield users


def _code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


# --- 3: mem0's `*` run id ----------------------------------------------------------------------

async def test_3_mem0_wildcard_run_is_never_claimed_listed_or_deleted(
    mem0: Users, engine: RecordingEngine
) -> None:
    """mem0's delete_all and get_all read `*` as "any run" (mem0/vector_stores/pgvector.py,
    qdrant.py): a run named `*` would be every user's memories."""
    async with mem0("bob") as bob:
        claimed = await bob.post("/memories", json={"messages": TEXT, "user_id": "bob",
                                                    "run_id": "*"})
        deleted = await bob.delete("/memories?run_id=*")
        listed = await bob.get("/memories?run_id=%2A")
        everyone = await bob.delete("/memories?user_id=*")
        platform = await bob.delete("/v1/memories/?user_id=bob&run_id=*")
    for response in (claimed, deleted, listed, everyone, platform):
        assert _code(response) == (422, "validation_error"), response.text
    assert engine.requests == []


# --- 4: padded ids -------------------------------------------------------------------------

@pytest.mark.parametrize("padded", ["r1 ", "\tr1", " r1", "r1\n", "r1\u00a0", "\u3000r1"])
async def test_4_mem0_padded_run_of_another_user_is_refused(
    mem0: Users, engine: RecordingEngine, padded: str
) -> None:
    """mem0 strips whitespace around `run_id` (mem0/memory/main.py
    `_validate_and_trim_entity_id`): `r1 ` is alice's `r1` to the engine."""
    async with mem0("alice") as alice, mem0("bob") as bob:
        assert (await alice.post("/memories", json={"messages": TEXT, "user_id": "alice",
                                                    "run_id": "r1"})).status_code == 200
        engine.requests.clear()
        added = await bob.post("/memories", json={"messages": TEXT, "user_id": "bob",
                                                  "run_id": padded})
        listed = await bob.get("/memories", params={"run_id": padded})
        deleted = await bob.delete("/memories", params={"run_id": padded})
        searched = await bob.post("/search", json={"query": "PIN", "user_id": "bob",
                                                   "run_id": padded})
    for response in (added, listed, deleted, searched):
        assert _code(response) == (422, "validation_error"), response.text
        assert response.json()["error"]["field"].endswith("run_id")
    assert engine.requests == []


# --- 5: EverOS Cloud v0: the sender's own group, `__all__`, nulls, group_ids ---------------------

def _sender_group(user: str) -> str:
    """request_converter.py `generate_single_user_group_id`."""
    return hashlib.md5(user.encode()).hexdigest()[:16] + "_group"


V0_MESSAGE = {"message_id": "m1", "create_time": "2026-01-01T00:00:00+00:00",
              "content": "my diagnosis is ..."}


async def test_5_cloud_v0_sender_group_is_its_users_from_the_first_request(
    cloud: Users, engine: RecordingEngine
) -> None:
    theirs = _sender_group("alice")
    assert theirs == "6384e2b2184bcbf5_group"  # the example
    async with cloud("bob") as bob:  # before alice ever used the gateway
        created = await bob.post("/api/v1/groups", json={"group_id": theirs})
        added = await bob.post("/api/v0/memories", json={**V0_MESSAGE, "sender": "bob",
                                                         "group_id": theirs})
        deleted = await bob.request("DELETE", "/api/v0/memories", json={"group_id": theirs})
        fetched = await bob.get("/api/v0/memories", params={"user_id": "bob",
                                                            "group_id": theirs})
        solo = await bob.post("/api/v1/groups", json={
            "group_id": "gen_solo_" + hashlib.md5(b"alice").hexdigest()[:12]})
    assert _code(created) == _code(added) == _code(solo) == (
        403, "session_owned_by_another_user")
    assert _code(deleted) == _code(fetched) == (404, "not_found")
    assert engine.requests == []
    async with cloud("alice") as alice:  # hers, though she never claimed it
        mine = await alice.request("DELETE", "/api/v0/memories", json={"group_id": theirs})
        read = await alice.get("/api/v0/memories", params={"group_id": theirs})
    assert mine.status_code == 200 and read.status_code == 200
    assert [body_of(r) for r in engine.requests[:1]] == [{"group_id": theirs}]


async def test_5_cloud_v0_magic_group_and_null_body_never_widen(
    cloud: Users, engine: RecordingEngine
) -> None:
    async with cloud("alice") as alice, cloud("bob") as bob:
        assert (await alice.post("/api/v0/memories", json={
            **V0_MESSAGE, "sender": "alice", "group_id": "alices-group"})).status_code == 200
        engine.requests.clear()
        everyone = await bob.request("DELETE", "/api/v0/memories", json={
            "group_id": "__all__", "event_id": "alices-event"})
        unfiltered = await bob.request("DELETE", "/api/v0/memories", json={
            "user_id": "bob", "group_id": "__all__"})
        erased = await bob.request("GET", "/api/v0/memories?user_id=bob",
                                   json={"user_id": None})
        erased_search = await bob.request("GET", "/api/v0/memories/search?user_id=bob&query=x",
                                          json={"user_id": None, "group_id": "bobs-group"})
        listed = await bob.get("/api/v0/memories?user_id=bob&group_ids=alices-group")
        split = await bob.get("/api/v0/memories?user_id=bob&group_ids=bobs,alices-group")
        empty = await bob.request("GET", "/api/v0/memories?user_id=bob",
                                  json={"group_ids": []})
    for response in (everyone, unfiltered, erased, erased_search, empty):
        assert response.status_code == 422, response.text
    assert _code(listed) == _code(split) == (404, "not_found")
    assert engine.requests == []


# --- 6: MemOS default cubes --------------------------------------------------------------------

async def test_6_memos_default_cube_is_its_users_before_their_first_add(
    memos: Users, engine: RecordingEngine
) -> None:
    async with memos("bob") as bob, memos("zed") as zed:
        stolen = await bob.post("/product/add", json={
            "user_id": "bob", "writable_cube_ids": ["zed"], "messages": "hi"})
        assert _code(stolen) == (403, "session_owned_by_another_user")
        first = await zed.post("/product/add", json={"user_id": "zed", "messages": "hi"})
        assert first.status_code == 200, first.text
        own = await bob.post("/product/add", json={
            "user_id": "bob", "writable_cube_ids": ["bob", "bob:notes"], "messages": "hi"})
        assert own.status_code == 200, own.text
    assert [body_of(r)["user_id"] for r in engine.requests] == ["zed", "bob"]


async def test_6_memos_claims_tell_nothing_of_whether_a_user_exists(
    memos: Users, engine: RecordingEngine
) -> None:
    """dave is a user (he has added); carol is no one: every route answers the same for both."""
    async with memos("dave") as dave, memos("bob") as bob:
        assert (await dave.post("/product/add", json={"user_id": "dave", "messages": "hi"})
                ).status_code == 200
        answers = {}
        for name in ("dave", "carol", "dave:notes", "carol:notes"):
            added = await bob.post("/product/add", json={
                "user_id": "bob", "writable_cube_ids": [name], "messages": "hi"})
            read = await bob.post("/product/search", json={
                "user_id": "bob", "query": "x", "readable_cube_ids": [name]})
            answers[name] = (added.status_code, added.json(), read.status_code)
    shapes = {name: (a, {k: v for k, v in body["error"].items() if k != "request_id"}, r)
              for name, (a, body, r) in answers.items()}
    assert shapes["dave"] == shapes["carol"] == shapes["dave:notes"] == shapes["carol:notes"]
    assert shapes["carol"][0] == 403 and shapes["carol"][2] == 404
    assert len(engine.requests) == 1


# --- 10: routes that name no owner -------------------------------------------------------------

async def test_10_mem0_platform_add_naming_only_an_app_is_refused(
    mem0: Users, engine: RecordingEngine
) -> None:
    async with mem0("bob") as bob:
        response = await bob.post("/v3/memories/add/", json={"messages": TEXT,
                                                              "app_id": "photos"})
    assert response.status_code == 422, response.text
    assert engine.requests == []


async def test_10_cloud_v2_edit_by_item_id_is_refused(
    cloud: Users, engine: RecordingEngine
) -> None:
    async with cloud("bob") as bob:
        for action in ("update", "delete"):
            response = await bob.post("/api/v2/memory/edit", json={
                "user_id": "bob", "operations": [
                    {"action": action, "type": "explicit_info", "item_id": "alices-item",
                     "data": {"pin": "0000"}}]})
            assert response.status_code == 403, response.text
            assert response.json()["error"]["field"] == "operations[0].item_id"
    assert engine.requests == []


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/api/v2/memory/update"), ("POST", "/api/v2/memory/delete_by_ids"),
    ("POST", "/api/v2/memory/feedback"), ("POST", "/api/v2/memory/tag/bind"),
    ("POST", "/api/v2/memory/tag/replace"), ("POST", "/api/v2/memory/tag/unbind"),
    ("POST", "/api/v2/memory/tags"), ("GET", "/api/v2/tasks"), ("GET", "/api/v2/tasks/stats"),
    ("GET", "/api/v2/tasks/t-1"), ("GET", "/api/v2/knowledge_bases"),
])
async def test_10_newer_cloud_routes_stay_closed(
    cloud: Users, engine: RecordingEngine, method: str, path: str
) -> None:
    async with cloud("bob") as bob:
        response = await bob.request(method, path, json={"user_id": "bob"}
                                     if method == "POST" else None)
    assert _code(response) == (404, "route_not_found")
    assert engine.requests == []
