"""End to end against the real EverOS engine (1.5.1, with the deterministic stand-in model):
uploads, adds with images, flush and search through a gateway process, and the engine's own
behaviour that the gateway's identity and fetch checks exist to prevent."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import pytest

from tests.e2e.real_engine_helpers import (
    agent_trajectory,
    loopback_page,
    message,
    new_session,
    now_ms,
    png,
)
from tests.everos_engine import VENV, EverosEngine, eventually
from tests.processes import GatewayProcess, gateway

pytestmark = pytest.mark.e2e

SUMMIT = png(3, 2, shade=10)
MAP = png(2, 2, shade=200)
LIGHTHOUSE = png(4, 1, shade=90)
CRANE = png(5, 5, shade=33)


@dataclass
class Front:
    gateway: GatewayProcess
    storage: Path
    alice: httpx.Client
    bob: httpx.Client


@pytest.fixture(scope="module")
def front(everos: EverosEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Front]:
    """A gateway process (flavour `everos`, the default) in front of the real engine."""
    tmp = tmp_path_factory.mktemp("gateway-real-engine")
    with gateway(tmp, everos.url, log=tmp / "gateway.log") as gw:
        alice = httpx.Client(base_url=gw.url, timeout=60,
                             headers={"Authorization": f"Bearer {gw.key('alice')}"})
        bob = httpx.Client(base_url=gw.url, timeout=60,
                           headers={"Authorization": f"Bearer {gw.key('bob')}"})
        with alice, bob:
            yield Front(gw, tmp / "storage", alice, bob)


def path_of(uri: str) -> Path:
    return Path(unquote(urlsplit(uri).path))


def kinds_since(engine: EverosEngine, start: int) -> list[str]:
    calls = engine.model_calls()[start:]
    assert [c for c in calls if c.get("error") or c["kind"] == "unknown"] == [], engine.log_tail()
    return [c["kind"] for c in calls]


def episodes_of(answer: dict[str, Any], session_id: str) -> list[dict[str, Any]]:
    return [e for e in answer["data"]["episodes"] if e["session_id"] == session_id]


def search_until(client: httpx.Client | EverosEngine, path: str, body: dict[str, Any],
                 found: Any) -> dict[str, Any]:
    """The first search answer for which `found(answer)` is truthy."""
    last: list[Any] = []

    def probe() -> dict[str, Any] | None:
        response = client.post(path, json=body) if isinstance(client, httpx.Client) \
            else client.post(path, body)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        last[:] = [answer]
        return answer if found(answer) else None
    try:
        return eventually(probe, what=f"search {body}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the last answer: {str(last)[:3000]}") from None


def test_an_upload_is_ingested_and_found_with_its_file(front: Front, everos: EverosEngine
                                                       ) -> None:
    start = len(everos.model_calls())
    uploaded = front.alice.post("/resources", files={"file": ("lighthouse-at-dusk.png",
                                                              LIGHTHOUSE, "image/png")})
    assert uploaded.status_code == 201, uploaded.text
    session = uploaded.json()["session_id"]
    assert session == f"resource:alice:{uploaded.json()['id']}"
    # The engine read the file from the gateway's disk, described it and made an episode of it.
    assert {"image", "boundary", "episode"} <= set(kinds_since(everos, start))

    answer = search_until(front.alice, "/api/v2/memory/search",
                          {"query": "lighthouse dusk", "user_id": "alice"},
                          lambda a: episodes_of(a, session))
    [episode] = episodes_of(answer, session)
    assert "lighthouse-at-dusk.png" in episode["episode"]
    assert "4x1 image/png" in episode["episode"]  # the stand-in's description of these bytes
    [attachment] = episode["attachments"]
    assert attachment["name"] == "lighthouse-at-dusk.png"
    assert path_of(attachment["internal_uri"]).read_bytes() == LIGHTHOUSE


def test_add_with_images_then_flush_then_search_attaches_the_files(
        front: Front, everos: EverosEngine) -> None:
    session = new_session("hike")
    uploaded = front.alice.post("/resources", files={"file": ("map.png", MAP, "image/png")})
    assert uploaded.status_code == 201, uploaded.text
    # Where SPEC §7 keeps an upload: the caller's own storage, which an add may name.
    map_uri = (front.storage / "alice" / "resources" / uploaded.json()["id"] / "map.png").as_uri()
    at = now_ms()
    guide = front.alice.post("/agents", json={"name": "guide"}).json()["id"]
    added = front.alice.post("/api/v2/memory/add", json={"session_id": session, "messages": [
        message("user", "alice", [
            {"type": "text", "text": "our hike to the summit, and the trail map"},
            {"type": "image", "base64": base64.b64encode(SUMMIT).decode(), "name": "summit.png",
             "ext": "png"},
            {"type": "image", "uri": map_uri, "name": "map.png", "ext": "png"}], at),
        message("assistant", guide, "What a view from the summit!", at + 1000)]})
    assert added.status_code == 200, added.text
    assert added.json()["data"] == {"message_count": 2, "status": "accumulated"}

    flushed = front.alice.post("/api/v2/memory/flush", json={"session_id": session})
    assert flushed.status_code == 200, flushed.text
    assert flushed.json()["data"] == {"status": "extracted"}

    # The engine derives atomic facts from an episode once it is extracted (a strategy run on
    # its `EpisodeExtracted` event), so an episode may be found before its facts are.
    answer = search_until(front.alice, "/api/v2/memory/search",
                          {"query": "summit hike", "user_id": "alice"},
                          lambda a: any(e.get("atomic_facts") for e in episodes_of(a, session)))
    [episode] = episodes_of(answer, session)
    assert episode["sender_ids"] == ["alice", guide]
    assert "[IMAGE: summit.png]" in episode["episode"]
    assert "[IMAGE: map.png]" in episode["episode"]
    by_name = {a["name"]: a for a in episode["attachments"]}
    assert sorted(by_name) == ["map.png", "summit.png"]
    assert path_of(by_name["summit.png"]["internal_uri"]).read_bytes() == SUMMIT
    assert path_of(by_name["map.png"]["internal_uri"]).read_bytes() == MAP
    # The engine's own atomic facts ride inside the episode; the files attach to the episode.
    assert any("summit.png" in fact["content"] for fact in episode["atomic_facts"])

    # Another user finds nothing of it, and no file of alice's.
    others = front.bob.post("/api/v2/memory/search", json={"query": "summit", "user_id": "bob"})
    assert others.status_code == 200, others.text
    assert "summit.png" not in others.text


def test_memories_search_normalises_the_real_answer(front: Front, everos: EverosEngine) -> None:
    session = new_session("harbour")
    at = now_ms()
    added = front.alice.post("/memories/add", json={"session_id": session, "messages": [
        message("user", "alice", [
            {"type": "text", "text": "the harbour crane at night"},
            {"type": "image", "base64": base64.b64encode(CRANE).decode(), "name": "crane.png",
             "ext": "png"}], at)]})
    assert added.status_code == 200, added.text
    assert front.alice.post("/api/v2/memory/flush",
                            json={"session_id": session}).status_code == 200

    def results(*, want: Any) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            response = front.alice.post("/memories/search", json={
                "query": "harbour crane", "user_id": "alice", "include_profile": True})
            assert response.status_code == 200, response.text
            answer: dict[str, Any] = response.json()
            return answer if want(answer["results"]) else None
        return eventually(probe, what="/memories/search")

    answer = results(want=lambda rs: any(r["session_id"] == session for r in rs))
    assert answer["total"] == len(answer["results"])
    [result] = [r for r in answer["results"] if r["session_id"] == session]
    assert result["type"] == "episode"
    assert result["content"] == result["raw"]["episode"]
    assert result["id"] == result["raw"]["id"]
    assert result["score"] == result["raw"]["score"]
    assert result["created_at"] == result["raw"]["timestamp"]
    [attachment] = result["attachments"]
    assert attachment["name"] == "crane.png" and attachment["type"] == "image"
    assert path_of(attachment["internal_uri"]).read_bytes() == CRANE

    # The engine builds a profile from episodes it has indexed: a second conversation, now
    # that the first is searchable, gives one.
    later = new_session("harbour")
    assert front.alice.post("/memories/add", json={"session_id": later, "messages": [
        message("user", "alice", "the harbour crane lifted a red container", at + 1)]}
        ).status_code == 200
    assert front.alice.post("/api/v2/memory/flush",
                            json={"session_id": later}).status_code == 200
    answer = results(want=lambda rs: any(r["type"] == "profile" for r in rs))
    [profile] = [r for r in answer["results"] if r["type"] == "profile"]
    assert profile["raw"]["user_id"] == "alice" and profile["raw"]["profile_data"]["explicit_info"]
    # No session, so no attachments; its text is the profile's summary.
    assert (profile["session_id"], profile["attachments"]) == (None, [])
    assert profile["content"] == profile["raw"]["profile_data"].get("summary", profile["content"])
    assert profile["content"]


def test_the_engine_makes_an_assistant_sender_the_owner_of_agent_memory(
        everos: EverosEngine) -> None:
    """Why the gateway must check assistant senders (SPEC §3): the engine trusts them."""
    session = new_session("flights")
    agent = "someone-elses-agent"
    added = everos.post("/api/v2/memory/add", {
        "session_id": session, "messages": agent_trajectory("mallory", agent, now_ms())})
    assert added.status_code == 200, added.text
    assert everos.post("/api/v2/memory/flush", {"session_id": session}).status_code == 200

    answer = search_until(everos, "/api/v2/memory/search",
                          {"query": "flight Oslo", "agent_id": agent},
                          lambda a: [c for c in a["data"]["agent_cases"]
                                     if c["session_id"] == session])
    [case] = [c for c in answer["data"]["agent_cases"] if c["session_id"] == session]
    assert case["agent_id"] == agent
    assert case["task_intent"] == "Find the cheapest flight from Paris to Oslo on Friday"
    assert "book_flight" in case["approach"]


def test_the_engine_fetches_a_loopback_page_named_by_an_item(everos: EverosEngine) -> None:
    """Why the gateway must refuse `http(s)` URIs to private addresses (SPEC §5): the engine
    fetches whatever an item names, and hands back what it read."""
    session = new_session("web")
    with loopback_page("<html><body><h1>internal admin token 4711</h1></body></html>") as page:
        added = everos.post("/api/v2/memory/add", {"session_id": session, "messages": [
            message("user", "mallory", [{"type": "text", "text": "read this"},
                                        {"type": "html", "uri": page.url}], now_ms())]})
        assert added.status_code == 200, added.text
        assert page.requests == ["/page.html"]
    buffered = everos.post("/api/v2/memory/search", {
        "query": "token", "user_id": "mallory", "filters": {"session_id": session}})
    [pending] = buffered.json()["data"]["unprocessed_messages"]
    assert pending["content"][1]["parsed_content"] == "internal admin token 4711"


def test_the_engines_keyword_index_misses_rows_written_since_its_last_merge() -> None:
    """Why a fresh episode can be missing from a search for up to a minute (docs/engines.md):
    rows the engine wrote after its last `optimize()` are found by some words only. The rows
    are the tokens of the episodes in the full suite's run that showed it, shortened."""
    rows = {
        "mcp-agent": "mcp agent said lighthouse dusk lighthouse png image lighthouse png "
                     "conversation mcp agent lighthouse dusk lighthouse png",
        "mcp-agent-upload": "mcp agent said uploaded file trail map png image trail map png "
                            "conversation mcp agent uploaded file trail map png",
        "alice": "alice said uploaded file lighthouse dusk png image lighthouse dusk png "
                 "picture conversation alice uploaded file lighthouse dusk png",
    }
    words = ["lighthouse", "dusk", "alice", "picture"]
    probe = subprocess.run([str(VENV / "bin" / "python"), "-m", "tests.everos_index_probe",
                            json.dumps(rows), *words],
                           capture_output=True, text=True, timeout=120, check=True,
                           cwd=Path(__file__).resolve().parents[2])
    found = json.loads(probe.stdout)
    # alice's episode, written after the merge, is missing for the words she searched for.
    assert found["before"] == {"lighthouse": ["mcp-agent"], "dusk": ["mcp-agent"],
                               "alice": ["alice"], "picture": ["alice"]}
    assert found["after"] == {"lighthouse": ["alice", "mcp-agent"],
                              "dusk": ["alice", "mcp-agent"], "alice": ["alice"],
                              "picture": ["alice"]}
