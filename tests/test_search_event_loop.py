"""A search over a huge page of a huge session leaves the event loop free (SPEC §13).

The page of issue 23: one add to the user's own session of a 200 KB text and 2,000 files with
200-character names without an extension, and a search whose answer holds that message. The
session's matchers are built and the page is matched in a worker thread, so a coroutine beside
the search keeps running meanwhile: each of the two long steps (building the session's
matchers, answering the page) runs off the event loop's thread, and a probe beside the search
counts the loop's turns while they run. Run on the loop, they would see it stand still.
(Time figures: bench/search_adversarial.py --http.)
"""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

import httpx
import pytest
import respx

from gateway.config import Settings
from gateway.routes import search as search_route
from gateway.search import index
from tests.attachment_helpers import answer_search, engine_ok, episodes

NAMES = 2000


@pytest.fixture(params=[True, False], ids=["scanner", "python"])
def settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    return settings.with_values(server={"native_search": request.param})


def _content() -> list[dict[str, Any]]:
    """A 200 KB text repeating a phrase, and names that start with 150 characters of it."""
    rng = random.Random(23)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789-_"
    phrase = "shared-report-"
    names = [(phrase * 20)[:150] + f"{i:04d}" + "".join(rng.choice(letters) for _ in range(46))
             for i in range(NAMES)]
    return [{"type": "text", "text": (phrase * 20_000)[:200_000]}] + [
        {"type": "file", "name": name, "uri": f"https://cdn.example/f/{n}"}
        for n, name in enumerate(names)]


async def test_a_search_over_the_issue_page_lets_the_loop_run(
    bob: httpx.AsyncClient, engine: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine_ok(engine)
    content = _content()
    added = await bob.post("/memories/add", json={"session_id": "big", "messages": [
        {"role": "user", "sender_id": "bob", "content": content}]})
    assert added.status_code == 200, added.text
    answer_search(engine, episodes(unprocessed=[
        {"message_id": "m1", "session_id": "big", "user_id": "bob", "role": "user",
         "content": content}]))
    turns = 0
    loop_thread = threading.get_ident()
    seen: dict[str, tuple[int, int, int]] = {}  # step -> (its thread, turns at start, at end)

    def watched(step: str, work: Any) -> Any:
        def run(*args: Any) -> Any:
            began = turns
            try:
                return work(*args)
            finally:
                seen[step] = (threading.get_ident(), began, turns)
        return run

    monkeypatch.setattr(index, "_build", watched("build", index._build))
    for answer in ("render_scanned", "python_answer"):
        monkeypatch.setattr(search_route, answer, watched("answer", getattr(search_route, answer)))
    search = asyncio.create_task(
        bob.post("/memories/search", json={"query": "trip", "user_id": "bob"}))
    while not search.done():
        turns += 1
        await asyncio.sleep(0)
    response = search.result()
    assert response.status_code == 200, response.text
    [result] = response.json()["results"]
    assert len(result["attachments"]) == NAMES
    assert set(seen) == {"build", "answer"}
    for step, (thread, _, _) in seen.items():
        assert thread != loop_thread, f"the {step} step ran on the event loop's thread"
    assert sum(ended - began for _, began, ended in seen.values()) > 0, (
        "the loop stood still while the steps ran")
