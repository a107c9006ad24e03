"""The real EverOS engine's recorded answers (tests/fixtures/everos-1.5.1/, written by
`python -m tests.everos_recordings`) read by the gateway's search answer code, and the recorded
requests answered by the dev engine as the real engine answered them."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from gateway.devengine.app import create_dev_engine
from gateway.search import page_scan
from gateway.search.answers import python_answer
from gateway.search.index import EMPTY, _build
from gateway.search.items import DERIVED_CONTENT_MARKERS, EVEROS_GROUPS, find_items
from gateway.serving import jsonio
from tests.everos_recordings import load
from tests.test_page_scan import agree

RECORDED = load()
SEARCHES = sorted(name for name in RECORDED if name.startswith("search-"))
SUMMIT = {"id": "att_1", "name": "summit.png", "content_type": "image/png",
          "internal_uri": "file:///storage/alice/memory_attachments/att_1/summit.png",
          "source": "memory_add_base64"}


def test_every_exchange_the_recordings_promise_is_there() -> None:
    assert set(RECORDED) == {
        "add", "flush", "search-user", "search-agent", "search-user-merged",
        "search-unprocessed", "get-episode", "get-profile", "get-agent-case", "get-agent-skill",
        "reflect", "add-without-timestamp", "add-unreadable-uri", "search-agent-llm-rerank",
        "add-web-page"}
    groups = {name: {g for g, items in RECORDED[name]["answer"]["data"].items() if items}
              for name in SEARCHES}
    assert groups == {"search-agent": {"agent_cases", "agent_skills"},
                      "search-agent-llm-rerank": {"agent_cases", "agent_skills"},
                      "search-unprocessed": {"unprocessed_messages"},
                      "search-user": {"episodes", "profiles"},
                      "search-user-merged": {"episodes"}}


@pytest.mark.parametrize("name", SEARCHES)
def test_find_items_reads_every_group_of_a_real_answer(name: str) -> None:
    data = RECORDED[name]["answer"]["data"]
    found = find_items(copy.deepcopy(RECORDED[name]["answer"]))
    expected = [(EVEROS_GROUPS[group], item.get("session_id"))
                for group in EVEROS_GROUPS for item in data[group]]
    assert [(item.type, item.session_id) for item in found] == expected


def test_a_merged_episode_has_no_session_and_so_no_attachments() -> None:
    """Reflection's merged episodes carry `session_id: null` (SPEC §9: no session, no match),
    though their text names the file of the sessions they merge."""
    answer = copy.deepcopy(RECORDED["search-user-merged"]["answer"])
    [merged] = answer["data"]["episodes"]
    assert merged["session_id"] is None and "summit.png" in merged["episode"]
    matchers = {"hike": _build(1, [SUMMIT]), "hike-again": _build(1, [SUMMIT])}
    out, matched = python_answer(answer, find_items(answer), False, set(), matchers)
    [result] = jsonio.loads(out)["results"]
    assert (result["session_id"], result["attachments"], matched) == (None, [], 0)


def test_an_episode_of_a_session_gets_the_file_its_text_names() -> None:
    answer = copy.deepcopy(RECORDED["search-user"]["answer"])
    sessions = {e["session_id"] for e in answer["data"]["episodes"]}
    matchers = {session: _build(1, [SUMMIT]) for session in sessions}
    out, matched = python_answer(answer, find_items(answer), True, set(), matchers)
    episodes = jsonio.loads(out)["data"]["episodes"]
    assert matched == len(episodes) > 0
    assert all([a["name"] for a in e["attachments"]] == ["summit.png"] for e in episodes)


def _normalised(name: str) -> list[dict[str, Any]]:
    answer = copy.deepcopy(RECORDED[name]["answer"])
    out, _ = python_answer(answer, find_items(answer), False, set(), {})
    results: list[dict[str, Any]] = jsonio.loads(out)["results"]
    return results


def test_normalised_results_take_their_text_from_the_keys_spec_6_names() -> None:
    """Episodes read `episode`, skills `content`; a profile its `profile_data.summary`, an agent
    case its `task_intent` and `approach`; a buffered message (a list of items) has none of the
    keys SPEC §6 lists, so its `content` is null."""
    by_type: dict[str, dict[str, Any]] = {}
    for name in SEARCHES:
        for r in _normalised(name):
            by_type.setdefault(r["type"], r)  # the first: the user's message, with its items
    assert isinstance(by_type["unprocessed_message"]["raw"]["content"], list)
    assert by_type["episode"]["content"] == by_type["episode"]["raw"]["episode"]
    assert by_type["agent_skill"]["content"] == by_type["agent_skill"]["raw"]["content"]
    assert by_type["unprocessed_message"]["content"] is None
    profile, case = by_type["profile"], by_type["agent_case"]
    assert profile["content"] == profile["raw"]["profile_data"]["summary"]
    assert case["content"].startswith(case["raw"]["task_intent"] + "\n" + case["raw"]["approach"])
    assert by_type["profile"]["created_at"] is None  # its time is profile_data's
    assert by_type["agent_case"]["session_id"] == by_type["agent_case"]["raw"]["session_id"]
    assert by_type["agent_skill"]["session_id"] is None  # a skill spans the agent's sessions


@pytest.mark.skipif(not page_scan.AVAILABLE, reason="the C page scanner was not built")
@pytest.mark.parametrize("name", SEARCHES)
@pytest.mark.parametrize("native", [True, False])
def test_the_page_scanner_answers_a_real_page_as_the_python_path(name: str, native: bool) -> None:
    body = jsonio.dumps(RECORDED[name]["answer"])
    items = find_items(jsonio.loads(body))
    derived = any(item.type in ("profile", "agent_case") for item in items)
    if not native and derived:
        # Their `content` is made in Python: the gateway sends such pages down the Python path.
        assert any(marker in body for marker in DERIVED_CONTENT_MARKERS)
        return
    sessions = {i.session_id for i in items if i.session_id}
    agree(body, native, set(), {s: _build(1, [SUMMIT]) for s in sessions} or {"x": EMPTY})


# The routes the dev engine serves (SPEC §2); `/ome/trigger` (reflection) is the real engine's.
DEV_ENGINE_ROUTES = ("/api/v2/memory/add", "/api/v2/memory/flush", "/api/v2/memory/search",
                     "/api/v2/memory/get")
REPLAYED = [name for name in sorted(RECORDED)
            if RECORDED[name]["request"]["path"] in DEV_ENGINE_ROUTES]
# Where the dev engine still answers otherwise than the real one: nowhere, now.
DEV_ENGINE_DIFFERS: dict[str, str] = {}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=DEV_ENGINE_DIFFERS[name]))
    if name in DEV_ENGINE_DIFFERS else name for name in REPLAYED])
async def test_the_dev_engine_answers_a_recorded_request_with_the_real_status(name: str) -> None:
    """Each request replayed alone on a fresh dev engine; a session's flush and search follow
    its add, as they did on the real engine."""
    exchange = RECORDED[name]
    app = create_dev_engine()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app),
                                 base_url="http://dev.test") as client:
        session = exchange["request"]["body"].get("session_id")
        if session and exchange["request"]["path"].endswith("/flush"):
            await client.post("/api/v2/memory/add", json=RECORDED["add"]["request"]["body"])
        response = await client.post(exchange["request"]["path"],
                                     json=exchange["request"]["body"])
    assert response.status_code == exchange["status"], response.text
