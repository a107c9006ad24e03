"""`/memories/search` (SPEC §9): normalisation, filename matching, isolation, bad answers."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
import respx

from gateway.config import Settings
from gateway.search import page_scan
from tests import databases
from tests.attachment_helpers import (
    PNG,
    answer_search,
    engine_ok,
    episodes,
    stored_files,
    stored_uri,
)
from tests.conftest import on_both_stores

# The route suite runs on both databases and through both production upstream clients over a
# loopback engine, paired (conftest): SQLite with the native client, PostgreSQL with httpx; and
# with files on local disk and on S3.
pytestmark = [pytest.mark.both_databases, pytest.mark.both_clients, on_both_stores]

B64 = base64.b64encode(PNG).decode()


@pytest.fixture(params=[True, False], ids=["scanner", "python"])
def settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    """Every search rule holds on both paths: the C page scanner and the Python reference."""
    return settings.with_values(server={"native_search": request.param})


async def add(client: httpx.AsyncClient, sender: str, session: str, *items: dict[str, Any],
              **extra: Any) -> None:
    body = {"session_id": session, **extra, "messages": [
        {"role": "user", "sender_id": sender, "content": [{"type": "text", "text": "x"}, *items]}]}
    response = await client.post("/memories/add", json=body)
    assert response.status_code == 200, response.text


async def test_episode_naming_the_file_gets_its_real_uri(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine_ok(engine)
    await add(alice, "alice", "s1", {"type": "image", "base64": B64, "name": "Sunset.PNG"},
              {"type": "image", "uri": "https://cdn/x/other.jpg"})
    answer_search(engine, episodes(
        {"id": "ep1", "session_id": "s1", "episode": "alice shared sunset.png at the beach",
         "score": 0.9, "timestamp": "2026-11-30T00:00:00Z"}))
    response = await alice.post("/memories/search", json={"query": "beach", "user_id": "alice"})
    assert response.status_code == 200
    body = response.json()
    assert body["total"] == 1
    [result] = body["results"]
    assert result["id"] == "ep1" and result["type"] == "episode"
    assert result["content"] == "alice shared sunset.png at the beach"
    assert result["score"] == 0.9 and result["session_id"] == "s1"
    assert result["created_at"] == "2026-11-30T00:00:00Z"
    assert result["raw"]["episode"] == result["content"] and "attachments" not in result["raw"]
    [attachment] = result["attachments"]
    assert attachment["type"] == "image" and attachment["name"] == "Sunset.PNG"
    [stored] = stored_files(settings)  # file:// on disk, s3:// on S3: where the bytes are
    assert attachment["internal_uri"] == stored_uri(settings, stored)
    assert attachment["internal_uri"].endswith("/Sunset.PNG")


async def test_no_filename_in_result_means_no_attachments(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine_ok(engine)
    await add(alice, "alice", "s1", {"type": "image", "uri": "https://cdn/cat.png"})
    answer_search(engine, episodes({"session_id": "s1", "episode": "a cat sat on a mat"},
                                   {"episode": "no session at all mentions cat.png"}))
    results = (await alice.post("/memories/search", json={"query": "cat"})).json()["results"]
    assert [r["attachments"] for r in results] == [[], []]


async def test_base64_values_are_not_scanned(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine_ok(engine)
    await add(alice, "alice", "s1", {"type": "image", "uri": "https://cdn/secret.png"})
    answer_search(engine, episodes(unprocessed=[{
        "session_id": "s1", "role": "user",
        "content": [{"type": "image", "base64": "secret.png", "name": None}]}]))
    [result] = (await alice.post("/memories/search", json={"query": "x"})).json()["results"]
    assert result["type"] == "unprocessed_message"
    assert result["attachments"] == []


async def test_matches_in_nested_values_and_dedupes_by_uri(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine_ok(engine)
    await add(alice, "alice", "s1", {"type": "image", "uri": "https://cdn/a.png"},
              {"type": "doc", "uri": "https://cdn/notes.pdf"})
    answer_search(engine, episodes({"session_id": "s1", "episode": "see A.PNG",
                                    "atomic_facts": [{"fact": "a.png twice: a.png"},
                                                     ["deep", {"x": "NOTES.pdf"}]]}))
    [result] = (await alice.post("/memories/search", json={"query": "x"})).json()["results"]
    assert sorted((a["name"], a["type"]) for a in result["attachments"]) == [
        ("a.png", "image"), ("notes.pdf", "file")]


async def test_another_user_with_the_same_session_id_gets_nothing(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine_ok(engine)
    await add(alice, "alice", "shared", {"type": "image", "uri": "https://cdn/private.png"})
    await add(bob, "bob", "bobs", {"type": "image", "uri": "https://cdn/private.png"})
    answer_search(engine, episodes(
        {"session_id": "shared", "episode": "private.png of alice"},
        {"session_id": "bobs", "episode": "private.png of bob"},
        {"session_id": "nobody-owns", "episode": "private.png elsewhere"},
        unprocessed=[{"session_id": "shared", "content": "private.png buffered"}]))
    body = (await bob.post("/memories/search", json={"query": "private"})).json()
    assert [r["session_id"] for r in body["results"]] == ["bobs", "nobody-owns"]
    assert body["total"] == 2
    assert [len(r["attachments"]) for r in body["results"]] == [1, 0]
    assert "alice" not in str(body)


async def test_search_naming_another_users_session_is_a_404_like_no_ones(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine_ok(engine)
    route = answer_search(engine, episodes())
    await add(alice, "alice", "mine")
    for session in ("mine", "no-ones"):
        response = await bob.post("/memories/search",
                                  json={"query": "x", "filters": {"session_id": session}})
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert not route.called


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ({"results": [{"id": 1, "memory": "m a.png", "metadata": {"session_id": "s1"},
                       "created_at": "t"}]}, "memory"),
        ({"memories": [{"content": "c a.png", "session_id": "s1", "type": "fact"}]}, "fact"),
        ({"data": {"memories": [{"text": "t a.png", "session_id": "s1"}]}}, "memory"),
        ({"data": {"raw_messages": [{"content": [{"text": "r a.png"}], "session_id": "s1"}]}},
         "raw_message"),
    ],
)
async def test_other_containers_are_normalised(
    alice: httpx.AsyncClient, engine: respx.MockRouter, answer: dict[str, Any], kind: str
) -> None:
    engine_ok(engine)
    await add(alice, "alice", "s1", {"type": "image", "uri": "https://cdn/a.png"})
    answer_search(engine, answer)
    [result] = (await alice.post("/memories/search", json={"query": "x"})).json()["results"]
    assert result["type"] == kind and result["session_id"] == "s1"
    assert [a["name"] for a in result["attachments"]] == ["a.png"]


async def test_content_is_the_first_present_text_field(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    answer_search(engine, {"results": [
        {"summary": "S", "memory": "M"}, {"content": {"not": "string"}, "text": "T"},
        {"description": "D"}, {"nothing": 1}]})
    results = (await alice.post("/memories/search", json={"query": "x"})).json()["results"]
    assert [r["content"] for r in results] == ["S", "T", "D", None]


@pytest.mark.parametrize(
    ("content", "detail"),
    [(b"<html>oops</html>", "not JSON"), (b'{"unexpected": []}', "none of the known shapes"),
     (b"[1, 2]", "not an object"), (b'{"data": {"episodes": {"x": 1}}}', "not a list")],
)
async def test_bad_upstream_answers_are_502_naming_the_problem(
    alice: httpx.AsyncClient, engine: respx.MockRouter, content: bytes, detail: str
) -> None:
    engine.post("/api/v2/memory/search").mock(return_value=httpx.Response(200, content=content))
    response = await alice.post("/memories/search", json={"query": "x"})
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "upstream_bad_response" and detail in error["message"]


async def test_an_engine_refusal_is_answered_in_the_gateways_shape(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    """SPEC §4: the engine's status and message, code upstream_error, upstream_status, and the
    gateway's request id (the X-Request-Id), not the engine's."""
    refusal = {"request_id": "engine-rid", "error": {
        "code": "INVALID_INPUT", "message": "Field required: user_id", "path": "/x"}}
    engine.post("/api/v2/memory/search").mock(return_value=httpx.Response(422, json=refusal))
    response = await alice.post("/memories/search", json={"query": "x"})
    assert response.status_code == 422
    assert response.json() == {"error": {
        "code": "upstream_error", "message": "Field required: user_id", "status": 422,
        "upstream_status": 422, "request_id": response.headers["x-request-id"]}}
    assert response.headers["x-request-id"] != "engine-rid"


async def test_the_engines_own_search_path_passes_its_refusal_through(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    refusal = {"request_id": "engine-rid", "error": {"code": "INVALID_INPUT", "message": "m"}}
    engine.post("/api/v2/memory/search").mock(return_value=httpx.Response(422, json=refusal))
    response = await alice.post("/api/v2/memory/search", json={"query": "x", "user_id": "alice"})
    assert response.status_code == 422 and response.json() == refusal


async def test_engine_path_keeps_the_engine_shape_with_attachments_added(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine_ok(engine)
    await add(alice, "alice", "s1", {"type": "image", "uri": "https://cdn/a.png"})
    answer_search(engine, episodes({"session_id": "s1", "episode": "a.png"},
                                   unprocessed=[{"session_id": "s1", "content": "x"}]))
    for path in ("/api/v2/memory/search", "/api/v1/memory/search"):
        body = (await alice.post(path, json={"query": "x", "user_id": "alice"})).json()
        assert body["request_id"] == "r"
        assert [a["name"] for a in body["data"]["episodes"][0]["attachments"]] == ["a.png"]
        assert body["data"]["unprocessed_messages"][0]["attachments"] == []
    body = (await bob.post("/api/v2/memory/search", json={"query": "x", "user_id": "bob"})).json()
    assert body["data"]["episodes"] == [] and body["data"]["unprocessed_messages"] == []


async def test_an_episode_the_engine_finds_late_is_relayed_as_each_answer_comes(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    """EverOS 1.5.1's keyword search may miss a fresh episode for up to a minute
    (docs/engines.md): each search goes upstream as the client sent it, an empty answer comes
    back empty, and nothing of it is kept: the next answer's episode carries its file."""
    engine_ok(engine)
    uploaded = (await alice.post(
        "/resources", files={"file": ("lighthouse-at-dusk.png", PNG, "image/png")})).json()
    found = {"session_id": uploaded["session_id"],
             "episode": "Uploaded file: lighthouse-at-dusk.png"}
    route = engine.post("/api/v2/memory/search").mock(side_effect=[
        httpx.Response(200, json=episodes()), httpx.Response(200, json=episodes()),
        httpx.Response(200, json=episodes(found)), httpx.Response(200, json=episodes(found))])
    query = b'{"query": "lighthouse dusk", "user_id": "alice"}'

    async def search(path: str) -> Any:
        response = await alice.post(path, content=query,
                                    headers={"Content-Type": "application/json"})
        assert response.status_code == 200, response.text
        assert route.calls.last.request.content == query
        return response.json()

    assert await search("/api/v2/memory/search") == episodes()
    assert await search("/memories/search") == {"results": [], "total": 0}
    [episode] = (await search("/api/v2/memory/search"))["data"]["episodes"]
    assert [a["name"] for a in episode["attachments"]] == ["lighthouse-at-dusk.png"]
    [result] = (await search("/memories/search"))["results"]
    assert [a["name"] for a in result["attachments"]] == ["lighthouse-at-dusk.png"]


async def test_resource_search_returns_uri_only_when_filename_occurs(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine_ok(engine)
    uploaded = (await alice.post(
        "/resources", files={"file": ("simple-multimodal-image.png", PNG, "image/png")})).json()
    session = uploaded["session_id"]
    answer_search(engine, episodes(
        {"session_id": session, "episode": "Uploaded file: simple-multimodal-image.png"},
        {"session_id": session, "episode": "a picture of a red square"}))
    results = (await alice.post("/memories/search", json={"query": "x"})).json()["results"]
    assert [a["name"] for a in results[0]["attachments"]] == ["simple-multimodal-image.png"]
    uri = results[0]["attachments"][0]["internal_uri"]
    [stored] = stored_files(settings)
    assert uri == stored_uri(settings, stored) and stored.startswith("alice/resources/")
    assert results[1]["attachments"] == []


async def test_cached_matchers_follow_every_mapping_change(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:

    engine_ok(engine)
    answer_search(engine, episodes({"session_id": "s1", "episode": "late.png and early.png"}))

    async def names() -> list[str]:
        body = (await alice.post("/memories/search", json={"query": "x"})).json()
        return sorted(a["name"] for a in body["results"][0]["attachments"])

    await add(alice, "alice", "s1", {"type": "image", "uri": "https://cdn/early.png"})
    assert await names() == ["early.png"]
    await add(alice, "alice", "s1", {"type": "image", "uri": "https://cdn/late.png"})
    assert await names() == ["early.png", "late.png"]
    databases.execute(settings.storage.database,
                      "UPDATE memory_attachments SET deleted_at = 1 WHERE name = 'early.png'")
    assert await names() == ["late.png"]


@pytest.mark.skipif(not page_scan.AVAILABLE, reason="the C page scanner was not built")
async def test_the_scanner_answers_everos_pages_unless_turned_off(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pages: list[Any] = []
    real_scan = page_scan.scan

    def spy(body: bytes, native: bool) -> Any:
        pages.append(real_scan(body, native))
        return pages[-1]

    monkeypatch.setattr(page_scan, "scan", spy)
    engine_ok(engine)
    await add(alice, "alice", "s1", {"type": "image", "uri": "https://cdn/x/a.png"})
    answer_search(engine, episodes({"id": "ep1", "session_id": "s1", "episode": "see A.png"}))
    for path in ("/memories/search", "/api/v2/memory/search"):
        response = await alice.post(path, json={"query": "x", "user_id": "alice"})
        assert response.status_code == 200
    if settings.server.native_search:
        assert len(pages) == 2 and all(page is not None for page in pages)
    else:
        assert pages == []


async def test_profiles_and_agent_cases_get_content_made_of_their_fields(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    """EverOS profiles and agent cases carry no text field: `content` is made of theirs."""
    answer_search(engine, {"request_id": "r", "data": {
        "episodes": [], "unprocessed_messages": [], "agent_skills": [],
        "profiles": [{"id": "p1", "user_id": "alice", "profile_data": {"likes": "tea"}}],
        "agent_cases": [{"id": "c1", "agent_id": "agt_1", "session_id": "s",
                         "task_intent": "book a table", "approach": "called ahead",
                         "quality_score": 0.9, "key_insight": None, "score": 0.5,
                         "timestamp": "2026-11-30T00:00:00Z"}]}})
    body = (await alice.post("/memories/search", json={"query": "x", "user_id": "alice"})).json()
    contents = {r["type"]: r["content"] for r in body["results"]}
    assert contents == {"profile": '{"likes": "tea"}', "agent_case": "book a table\ncalled ahead"}
