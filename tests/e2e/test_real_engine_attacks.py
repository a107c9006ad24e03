"""The two attacks tests/e2e/test_real_engine.py shows the real engine falls for, tried through a
gateway process: the gateway must refuse them before the engine sees anything (SPEC §3, §5).

Both are expected to fail until the route models check assistant senders and fetchable URIs;
`strict` makes them fail loudly once they pass, so the marks come off with that work.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.real_engine_helpers import (
    agent_trajectory,
    loopback_page,
    message,
    new_session,
    now_ms,
)
from tests.everos_engine import EverosEngine
from tests.processes import gateway

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def clients(everos: EverosEngine, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    tmp: Path = tmp_path_factory.mktemp("gateway-real-engine-attacks")
    with gateway(tmp, everos.url, log=tmp / "gateway.log") as gw:
        alice = httpx.Client(base_url=gw.url, timeout=60,
                             headers={"Authorization": f"Bearer {gw.key('alice')}"})
        bob = httpx.Client(base_url=gw.url, timeout=60,
                           headers={"Authorization": f"Bearer {gw.key('bob')}"})
        with alice, bob:
            yield alice, bob


def _buffered(everos: EverosEngine, user_id: str, session: str) -> list[object]:
    answer = everos.post("/api/v2/memory/search", {
        "query": "anything", "user_id": user_id, "filters": {"session_id": session}})
    assert answer.status_code == 200, answer.text
    messages: list[object] = answer.json()["data"]["unprocessed_messages"]
    return messages


def test_an_assistant_sender_naming_another_users_agent_is_refused(
        clients: tuple[httpx.Client, httpx.Client], everos: EverosEngine) -> None:
    alice, bob = clients
    created = bob.post("/agents", json={"name": "bob's travel agent"})
    assert created.status_code == 201, created.text
    bobs_agent = created.json()["id"]
    session = new_session("planted")
    added = alice.post("/api/v2/memory/add", json={
        "session_id": session, "messages": agent_trajectory("alice", bobs_agent, now_ms())})
    assert added.status_code == 403, added.text
    assert _buffered(everos, "alice", session) == []


def test_an_item_naming_a_loopback_page_is_refused_and_never_fetched(
        clients: tuple[httpx.Client, httpx.Client], everos: EverosEngine) -> None:
    alice, _ = clients
    session = new_session("ssrf")
    with loopback_page("<html><body>internal admin token 4711</body></html>") as page:
        added = alice.post("/api/v2/memory/add", json={"session_id": session, "messages": [
            message("user", "alice", [{"type": "text", "text": "read this"},
                                      {"type": "html", "uri": page.url}], now_ms())]})
        assert added.status_code == 422, added.text
        assert added.json()["error"]["code"] == "uri_not_allowed"
        assert page.requests == []
    assert _buffered(everos, "alice", session) == []


@pytest.mark.parametrize(("path", "body"), [
    # the engine's parser keeps a repeated key's last value: so must the gateway's reader of
    # the bytes (each of these routes is validated from them by a lean model), on the engine's
    # own paths and on the gateway's `/memories/search`, whose bytes go to the engine unchanged
    ("/api/v2/memory/get",
     '{"user_id": "bob", "memory_type": "episode", "page_size": 5, "user_id": "alice"}'),
    ("/api/v2/memory/get",
     '{"user_id": "bob", "memory_type": "episode",'
     ' "filters": {"session_id": "s", "session_id": "{session}"}}'),
    ("/api/v2/memory/search",
     '{"query": "harbour", "user_id": "bob", "user_id": "alice"}'),
    ("/api/v2/memory/search",
     '{"query": "harbour", "user_id": "bob", "filters": {"session_id": "s"},'
     ' "filters": {"session_id": "{session}"}}'),
    ("/memories/search", '{"query": "harbour", "user_id": "bob", "user_id": "alice"}'),
    ("/memories/search",
     '{"query": "harbour", "user_id": "bob",'
     ' "filters": {"AND": [{"session_id": "s"}], "AND": [{"session_id": "{session}"}]}}'),
], ids=["get-top", "get-filter", "search-top", "search-filters", "own-search-top",
        "own-search-filters"])
def test_a_repeated_key_naming_another_user_last_is_refused(
        clients: tuple[httpx.Client, httpx.Client], everos: EverosEngine, path: str,
        body: str) -> None:
    alice, bob = clients
    session = new_session("repeated")
    planted = alice.post("/api/v2/memory/add", json={"session_id": session, "messages": [
        message("user", "alice", "my harbour locker code is 7319", now_ms())]})
    assert planted.status_code == 200, planted.text
    assert _buffered(everos, "alice", session) != []  # the engine holds it for alice
    answer = bob.post(path, content=body.replace("{session}", session),
                      headers={"Content-Type": "application/json"})
    # bob may not name alice, nor her session: a 403 or a 404 (no oracle), never a refusal of
    # the body itself, which would leave the attack untried
    assert answer.status_code in (403, 404), answer.text
    assert "7319" not in answer.text


@pytest.mark.parametrize(("path", "body"), [
    ("/api/v2/memory/get",
     '{"user_id": "alice", "memory_type": "episode", "page_size": 5, "user_id": "bob"}'),
    ("/api/v2/memory/search", '{"query": "harbour", "user_id": "alice", "user_id": "bob"}'),
    ("/memories/search", '{"query": "harbour", "user_id": "alice", "user_id": "bob"}'),
], ids=["get", "search", "own-search"])
def test_a_repeated_key_naming_the_caller_last_is_the_callers_request(
        clients: tuple[httpx.Client, httpx.Client], path: str, body: str) -> None:
    """The other half: the gateway reads the last value too, so the same bodies with the
    caller last are the caller's own reads, answered."""
    _, bob = clients
    answer = bob.post(path, content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 200, answer.text


def test_an_own_add_repeating_its_session_naming_another_users_last_is_refused(
        clients: tuple[httpx.Client, httpx.Client], everos: EverosEngine) -> None:
    # `/memories/add` is read from its bytes by a lean model and forwarded as sent: the engine
    # writes into the last `session_id`, so the gateway must check that one.
    alice, bob = clients
    session = new_session("own-add-repeated")
    planted = alice.post("/memories/add", json={"session_id": session, "messages": [
        message("user", "alice", "my harbour locker code is 7319", now_ms())]})
    assert planted.status_code == 200, planted.text
    before = _buffered(everos, "alice", session)
    body = json.dumps({"session_id": new_session("bobs"), "messages": [
        message("user", "bob", "bob was here", now_ms())]})
    body = body.replace('"messages"', f'"session_id": "{session}", "messages"', 1)
    answer = bob.post("/memories/add", content=body,
                      headers={"Content-Type": "application/json"})
    assert answer.status_code in (403, 404), answer.text
    assert _buffered(everos, "alice", session) == before


def test_an_own_add_repeating_an_items_uri_is_checked_by_its_last_one(
        clients: tuple[httpx.Client, httpx.Client], everos: EverosEngine) -> None:
    # The engine fetches the item's last `uri`: a public one first, a loopback page last.
    alice, _ = clients
    session = new_session("own-add-uri")
    with loopback_page("<html><body>internal admin token 4711</body></html>") as page:
        body = json.dumps({"session_id": session, "messages": [message("user", "alice", [
            {"type": "html", "uri": "https://example.com/page.html"}], now_ms())]})
        body = body.replace('"uri": "https://example.com/page.html"',
                            f'"uri": "https://example.com/page.html", "uri": "{page.url}"', 1)
        added = alice.post("/memories/add", content=body,
                           headers={"Content-Type": "application/json"})
        assert added.status_code == 422, added.text
        assert added.json()["error"]["code"] == "uri_not_allowed"
        assert page.requests == []
    assert _buffered(everos, "alice", session) == []
