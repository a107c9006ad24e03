"""Recorded answers of the real EverOS engine (1.5.1), kept as fixtures in
`tests/fixtures/everos-1.5.1/`: `python -m tests.everos_recordings` starts the engine with the
stand-in model (tests/everos_engine.py), runs the exchanges below and writes one JSON file per
exchange: `{"request": {"path", "body"}, "status", "answer"}`, and into `prompts/` the first
prompt of each kind the engine sent its model (`<kind>.txt`, the text parts only).

The exchanges: an add with an image and its flush; a second, alike session (so the engine's
clustering groups the two and its reflection can merge them); searches for the user (episodes
with their atomic facts, the profile) and for the agent of a tool-using trajectory (agent cases
and skills, also reranked by the model); `/get` of each memory type; an item naming a web page
the engine fetches; the merged episode reflection writes (`session_id:
null`); the unprocessed messages of a session not yet flushed; and two refusals (a message
without `timestamp`, an item whose `uri` the engine cannot read).
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.real_engine_helpers import agent_trajectory, loopback_page, message, now_ms, png
from tests.everos_engine import VERSION, EverosEngine, eventually, everos_engine

FIXTURES = Path(__file__).resolve().parent / "fixtures" / f"everos-{VERSION}"
USER = "alice"
AGENT = "trip-agent"
SUMMIT = png(3, 2, shade=10)


def _exchange(engine: EverosEngine, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = engine.post(path, body)
    return {"request": {"path": path, "body": body}, "status": response.status_code,
            "answer": response.json()}


def _hike(session: str, at: int, text: str = "our hike to the summit") -> dict[str, Any]:
    return {"session_id": session, "messages": [
        message("user", USER, [
            {"type": "text", "text": text},
            {"type": "image", "base64": base64.b64encode(SUMMIT).decode(), "name": "summit.png",
             "ext": "png"}], at),
        message("assistant", "guide", "What a view from the summit!", at + 1000)]}


def _search_until(engine: EverosEngine, body: dict[str, Any],
                  done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        exchange = _exchange(engine, "/api/v2/memory/search", body)
        return exchange if exchange["status"] == 200 and done(exchange["answer"]["data"]) \
            else None
    return eventually(probe, what=f"search {body}")


def record(engine: EverosEngine) -> dict[str, dict[str, Any]]:
    """The exchanges, by fixture name."""
    out: dict[str, dict[str, Any]] = {}
    at = now_ms()
    out["add"] = _exchange(engine, "/api/v2/memory/add", _hike("hike", at))
    out["flush"] = _exchange(engine, "/api/v2/memory/flush", {"session_id": "hike"})
    # The profile is drawn from episodes already indexed: the second session comes after the
    # first is searchable (the engine's profile extraction reads its index, not its files).
    _search_until(engine, {"query": "summit hike", "user_id": USER},
                  lambda data: len(data["episodes"]) == 1)
    _exchange(engine, "/api/v2/memory/add", _hike("hike-again", at + 60_000,
                                                       "our second hike to the summit"))
    _exchange(engine, "/api/v2/memory/flush", {"session_id": "hike-again"})
    out["search-user"] = _search_until(
        engine, {"query": "summit hike", "user_id": USER, "include_profile": True},
        lambda data: bool(data["episodes"]) and len(data["profiles"]) == 1)

    trip = "trip"
    _exchange(engine, "/api/v2/memory/add",
              {"session_id": trip, "messages": agent_trajectory(USER, AGENT, at + 120_000)})
    _exchange(engine, "/api/v2/memory/flush", {"session_id": trip})
    out["search-agent"] = _search_until(
        engine, {"query": "flight Oslo", "agent_id": AGENT},
        lambda data: bool(data["agent_cases"]) and bool(data["agent_skills"]))
    out["search-agent-llm-rerank"] = _exchange(engine, "/api/v2/memory/search", {
        "query": "flight Oslo", "agent_id": AGENT, "enable_llm_rerank": True})

    for memory_type, owner in (("episode", {"user_id": USER}), ("profile", {"user_id": USER}),
                               ("agent_case", {"agent_id": AGENT}),
                               ("agent_skill", {"agent_id": AGENT})):
        out[f"get-{memory_type.replace('_', '-')}"] = _exchange(
            engine, "/api/v2/memory/get", {"memory_type": memory_type, **owner})

    out["reflect"] = _exchange(engine, "/api/v2/ome/trigger",
                               {"name": "reflect_episodes", "force": True})
    out["search-user-merged"] = _search_until(
        engine, {"query": "summit hike", "user_id": USER},
        lambda data: any(e["session_id"] is None for e in data["episodes"]))

    pending = "pending"
    _exchange(engine, "/api/v2/memory/add", _hike(pending, at + 180_000))
    out["search-unprocessed"] = _exchange(engine, "/api/v2/memory/search", {
        "query": "summit", "user_id": USER, "filters": {"session_id": pending}})

    with loopback_page("<html><body><h1>Harbour timetable</h1><p>Ferry at 9:15</p></body>"
                       "</html>") as page:
        out["add-web-page"] = _exchange(engine, "/api/v2/memory/add", {
            "session_id": "web", "messages": [message("user", USER, [
                {"type": "text", "text": "the ferry times"}, {"type": "html", "uri": page.url}],
                at)]})
    untimed = _hike("untimed", at)
    del untimed["messages"][0]["timestamp"]
    out["add-without-timestamp"] = _exchange(engine, "/api/v2/memory/add", untimed)
    out["add-unreadable-uri"] = _exchange(engine, "/api/v2/memory/add", {
        "session_id": "unreadable", "messages": [message("user", USER, [
            {"type": "image", "uri": "resource://res_0123456789", "name": "photo.png"}], at)]})
    return out


def first_prompts(engine: EverosEngine) -> dict[str, str]:
    """The first prompt of each kind the stand-in model was sent."""
    prompts: dict[str, str] = {}
    for call in engine.model_calls():
        if "prompt" in call:
            prompts.setdefault(call["kind"], call["prompt"])
    return prompts


def write(exchanges: dict[str, dict[str, Any]], prompts: dict[str, str],
          folder: Path = FIXTURES) -> None:
    (folder / "prompts").mkdir(parents=True, exist_ok=True)
    for name, exchange in exchanges.items():
        text = json.dumps(exchange, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
        (folder / f"{name}.json").write_text(text, encoding="utf-8")
    for kind, prompt in prompts.items():
        (folder / "prompts" / f"{kind}.txt").write_text(prompt, encoding="utf-8")


def load(folder: Path = FIXTURES) -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(folder.glob("*.json"))}


def load_prompts(folder: Path = FIXTURES) -> dict[str, str]:
    return {path.stem: path.read_text(encoding="utf-8")
            for path in sorted((folder / "prompts").glob("*.txt"))}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp, everos_engine(Path(tmp)) as engine:
        exchanges = record(engine)
        prompts = first_prompts(engine)
    write(exchanges, prompts)
    print(f"{len(exchanges)} exchanges written to {FIXTURES}", file=sys.stderr)
