"""User memory facts (SPEC §11): the write rule, expiry, validation, ownership."""


import httpx
import pytest

from gateway.config import Settings
from gateway.store.facts import is_active, says_explicitly
from gateway.store.ids import now_ms
from tests import databases
from tests.test_agents import make_agent, say

pytestmark = pytest.mark.both_databases

STYLE = {"scope": "image", "factType": "style", "key": "palette", "value": "pastel"}


async def observe(client: httpx.AsyncClient, **fields: object) -> httpx.Response:
    return await client.post("/memory-facts", json={**STYLE, **fields})


async def test_inferred_fact_becomes_active_on_the_third_observation(
    alice: httpx.AsyncClient,
) -> None:
    first = await observe(alice)
    assert first.status_code == 201
    fact = first.json()
    assert (fact["active"], fact["observations"], fact["sourceType"]) == (False, 1, "inferred")
    assert fact["confidence"] == 50
    second = await observe(alice)
    assert second.status_code == 200
    assert (second.json()["active"], second.json()["observations"]) == (False, 2)
    assert (await alice.get("/memory-facts", params={"active": "true"})).json()["facts"] == []
    third = (await observe(alice, confidence=70)).json()
    assert (third["id"], third["active"], third["observations"]) == (fact["id"], True, 3)
    assert third["confidence"] == 70
    active = (await alice.get("/memory-facts", params={"active": "true"})).json()["facts"]
    assert [f["id"] for f in active] == [fact["id"]]


@pytest.mark.parametrize("fields", [
    {"text": "From now on, always use pastel colours"},
    {"text": "以后都用淡色调"},
    {"text": "从现在开始用淡色调"},
    {"explicit": True},
    {"sourceType": "manual"},
    {"sourceType": "imported"},
])
async def test_explicit_manual_and_imported_facts_are_active_at_once(
    alice: httpx.AsyncClient, fields: dict
) -> None:
    fact = (await observe(alice, **fields)).json()
    assert fact["active"] is True
    assert fact["observations"] == 1


async def test_a_passing_remark_is_not_explicit(alice: httpx.AsyncClient) -> None:
    fact = (await observe(alice, text="this time make it pastel")).json()
    assert fact["active"] is False and fact["explicit"] is False


def test_explicit_markers() -> None:
    assert says_explicitly("From now on, no watermarks")
    assert says_explicitly("I ALWAYS want square images")
    assert says_explicitly("以后每次都给我高清图")
    assert not says_explicitly("make this one square")
    assert not says_explicitly("hallways and alwaysness")
    assert not says_explicitly(None)


def test_activity_rule() -> None:
    now = 1_000
    assert not is_active("inferred", False, 2, None, now)
    assert is_active("inferred", False, 3, None, now)
    assert is_active("inferred", True, 1, None, now)
    assert is_active("manual", False, 1, None, now)
    assert not is_active("manual", False, 1, now, now)
    assert not is_active("inferred", True, 9, now - 1, now)
    assert is_active("inferred", True, 9, now + 1, now)


async def test_one_source_message_counts_once(alice: httpx.AsyncClient) -> None:
    agent = await make_agent(alice)
    conversation_id = (await alice.get(f"/agents/{agent['id']}/conversation")).json()[
        "conversationId"
    ]
    message = (await say(alice, conversation_id, "k", "pastel please"))["message"]
    source = {"sourceConversationId": conversation_id, "sourceMessageId": message["id"]}
    for _ in range(3):
        fact = (await observe(alice, **source)).json()
    assert fact["observations"] == 1 and fact["active"] is False
    assert fact["sourceMessageId"] == message["id"]
    assert fact["sourceConversationId"] == conversation_id


async def test_a_different_value_starts_the_count_again(alice: httpx.AsyncClient) -> None:
    await observe(alice)
    await observe(alice)
    changed = (await observe(alice, value="neon")).json()
    assert (changed["value"], changed["observations"], changed["active"]) == ("neon", 1, False)


async def test_inference_does_not_overwrite_a_manual_fact_unless_explicit(
    alice: httpx.AsyncClient,
) -> None:
    manual = (await observe(alice, sourceType="manual")).json()
    for _ in range(3):
        kept = (await observe(alice, value="neon")).json()
    assert (kept["id"], kept["value"], kept["sourceType"]) == (manual["id"], "pastel", "manual")
    assert kept["active"] is True
    overridden = (await observe(alice, value="neon", text="from now on use neon")).json()
    assert (overridden["value"], overridden["active"], overridden["explicit"]) == (
        "neon", True, True)


async def test_expired_facts_are_never_active(
    alice: httpx.AsyncClient, settings: Settings
) -> None:
    past = now_ms() - 1_000
    expired = (await observe(alice, sourceType="manual", expiresAt=past)).json()
    assert expired["active"] is False and expired["expiresAt"] == past
    future = (await alice.post("/memory-facts", json={
        "scope": "global", "factType": "constraint", "key": "no-faces", "value": True,
        "sourceType": "manual", "expiresAt": "2999-01-01T00:00:00Z"})).json()
    assert future["active"] is True and future["expiresAt"] == 32472144000000
    active = (await alice.get("/memory-facts", params={"active": "true"})).json()["facts"]
    assert [f["id"] for f in active] == [future["id"]]
    inactive = (await alice.get("/memory-facts", params={"active": "false"})).json()["facts"]
    assert [f["id"] for f in inactive] == [expired["id"]]
    agent = await make_agent(alice)
    context = (await alice.get(f"/agents/{agent['id']}/context")).json()
    assert [f["id"] for f in context["facts"]] == [future["id"]]
    # Observing an expired fact again starts it afresh, without the old expiry.
    renewed = (await observe(alice, explicit=True)).json()
    assert (renewed["id"], renewed["expiresAt"], renewed["active"]) == (
        expired["id"], None, True)


async def test_one_off_instructions_are_not_facts(
    alice: httpx.AsyncClient, settings: Settings
) -> None:
    response = await observe(alice, oneOff=True, text="just this once, pastel")
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "oneOff"
    [(count,)] = databases.rows(settings.storage.database, "SELECT COUNT(*) FROM memory_facts")
    assert count == 0


async def test_invalid_facts_are_422_naming_the_field(alice: httpx.AsyncClient) -> None:
    cases = [
        ({"scope": "audio"}, "scope"),
        ({"factType": "mood"}, "factType"),
        ({"key": " "}, "key"),
        ({"key": "k" * 129}, "key"),
        ({"value": None}, "value"),
        ({"confidence": 101}, "confidence"),
        ({"confidence": -1}, "confidence"),
        ({"sourceType": "guessed"}, "sourceType"),
        ({"expiresAt": "next tuesday"}, "expiresAt"),
        ({"expiresAt": 10**20}, "expiresAt"),
        ({"pinned": "yes"}, "pinned"),
        ({"sourceConversationId": "cnv_missing"}, "sourceConversationId"),
        ({"sourceMessageId": "msg_missing"}, "sourceMessageId"),
    ]
    for fields, field in cases:
        response = await observe(alice, **fields)
        assert response.status_code == 422, fields
        assert response.json()["error"]["field"] == field, fields
    response = await alice.post("/memory-facts", json={k: v for k, v in STYLE.items()
                                                        if k != "value"})
    assert response.json()["error"]["field"] == "value"
    assert (await alice.get("/memory-facts")).json()["facts"] == []


async def test_sources_must_be_the_callers(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    agent = await make_agent(alice)
    conversation_id = (await alice.get(f"/agents/{agent['id']}/conversation")).json()[
        "conversationId"
    ]
    message = (await say(alice, conversation_id, "k", "pastel"))["message"]
    for fields, field in (({"sourceConversationId": conversation_id}, "sourceConversationId"),
                          ({"sourceMessageId": message["id"]}, "sourceMessageId")):
        response = await observe(bob, **fields)
        assert response.status_code == 422
        assert response.json()["error"]["field"] == field


async def test_patch_value_makes_the_fact_manual_and_delete_removes_it(
    alice: httpx.AsyncClient,
) -> None:
    fact = (await observe(alice)).json()
    url = f"/memory-facts/{fact['id']}"
    patched = (await alice.patch(url, json={"value": {"base": "pastel", "accent": "gold"},
                                            "pinned": True})).json()
    assert patched["value"] == {"base": "pastel", "accent": "gold"}
    assert (patched["sourceType"], patched["active"], patched["pinned"]) == (
        "manual", True, True)
    assert patched["lastConfirmedAt"] >= fact["lastConfirmedAt"]
    unexpired = (await alice.patch(url, json={"expiresAt": now_ms() - 1})).json()
    assert unexpired["active"] is False
    assert (await alice.patch(url, json={"expiresAt": None})).json()["active"] is True
    for bad, field in (({"pinned": None}, "pinned"), ({"key": "other"}, "key"),
                       ({"confidence": 200}, "confidence")):
        response = await alice.patch(url, json=bad)
        assert response.status_code == 422 and response.json()["error"]["field"] == field
    assert (await alice.delete(url)).status_code == 204
    assert (await alice.get(url)).status_code == 404
    assert (await alice.get("/memory-facts")).json()["facts"] == []
    again = await observe(alice)
    assert again.status_code == 201 and again.json()["id"] != fact["id"]


async def test_list_filters_and_pages(alice: httpx.AsyncClient) -> None:
    for i in range(5):
        await alice.post("/memory-facts", json={"scope": "global", "factType": "preference",
                                                "key": f"k{i}", "value": i})
    await observe(alice)
    image = (await alice.get("/memory-facts", params={"scope": "image"})).json()["facts"]
    assert [f["key"] for f in image] == ["palette"]
    prefs = (await alice.get("/memory-facts", params={"factType": "preference"})).json()
    assert len(prefs["facts"]) == 5
    first = (await alice.get("/memory-facts", params={"limit": "4"})).json()
    rest = (await alice.get("/memory-facts",
                            params={"limit": "4", "cursor": first["nextCursor"]})).json()
    keys = [f["key"] for f in first["facts"] + rest["facts"]]
    assert sorted(keys) == ["k0", "k1", "k2", "k3", "k4", "palette"]
    assert rest["nextCursor"] is None
    bad = await alice.get("/memory-facts", params={"scope": "audio"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "scope"


async def test_another_users_fact_is_not_found(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    fact = (await observe(alice, sourceType="manual")).json()
    url = f"/memory-facts/{fact['id']}"
    for method, body in (("GET", None), ("PATCH", {"pinned": True}), ("DELETE", None)):
        assert (await bob.request(method, url, json=body)).status_code == 404
    assert (await bob.get("/memory-facts")).json()["facts"] == []
    # Bob observing the same key makes his own fact, not a fourth observation of Alice's.
    bobs = (await observe(bob)).json()
    assert bobs["id"] != fact["id"] and bobs["observations"] == 1
    assert (await alice.get(url)).json()["pinned"] is False
