"""Tiny fake engines for end-to-end client tests, each checking the request shapes its engine takes.

`python -m tests.fake_engines everos-cloud PORT` serves a fake EverOS Cloud v2 API: add (the
Cloud's AddInput rules: session_id, 1..500 messages each with sender_id, role, integer timestamp
and content; 202 "queued"), flush, and search answering episodes shaped like the Cloud's
SearchEpisodeItem (plus `unprocessed_messages` when `filters.session_id` is given). Bodies that
break the rules get 422, as the Cloud would answer. It keeps messages in memory only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.processes import free_port, running

ROLES = ("user", "assistant", "tool")
ITEM_TYPES = ("text", "audio", "image", "doc", "pdf", "html", "email")


def _problems_with_add(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return ["body: not an object"]
    problems = []
    session = body.get("session_id")
    if not isinstance(session, str) or not 1 <= len(session) <= 128:
        problems.append("session_id: required, 1..128 characters")
    messages = body.get("messages")
    if not isinstance(messages, list) or not 1 <= len(messages) <= 500:
        return [*problems, "messages: 1..500 required"]
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            problems.append(f"{where}: not an object")
            continue
        if not isinstance(message.get("sender_id"), str):
            problems.append(f"{where}.sender_id: required string")
        if message.get("role") not in ROLES:
            problems.append(f"{where}.role: one of {ROLES}")
        if not isinstance(message.get("timestamp"), int):
            problems.append(f"{where}.timestamp: required integer (ms)")
        content = message.get("content")
        if isinstance(content, list):
            for c_index, item in enumerate(content):
                if not isinstance(item, dict) or item.get("type") not in ITEM_TYPES:
                    problems.append(f"{where}.content[{c_index}].type: one of {ITEM_TYPES}")
        elif not isinstance(content, str):
            problems.append(f"{where}.content: a string or a list of items")
    return problems


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(item.get("text") or "" for item in content if isinstance(item, dict))


def everos_cloud_app() -> Starlette:
    sessions: dict[tuple[str, str, str], list[dict[str, Any]]] = {}

    async def add(request: Request) -> JSONResponse:
        body = await request.json()
        problems = _problems_with_add(body)
        if problems:
            return JSONResponse({"detail": problems}, status_code=422)
        key = (body.get("app_id", "default"), body.get("project_id", "default"),
               body["session_id"])
        sessions.setdefault(key, []).extend(body["messages"])
        return JSONResponse({"request_id": "fake", "data": {
            "message_count": len(body["messages"]), "status": "queued"}}, status_code=202)

    async def flush(request: Request) -> JSONResponse:
        body = await request.json()
        if not isinstance(body.get("session_id"), str):
            return JSONResponse({"detail": ["session_id: required"]}, status_code=422)
        return JSONResponse({"request_id": "fake", "data": {"status": "no_extraction"}})

    async def search(request: Request) -> JSONResponse:
        body = await request.json()
        if not isinstance(body.get("query"), str) or not body["query"]:
            return JSONResponse({"detail": ["query: required"]}, status_code=422)
        words = body["query"].lower().split()
        now = datetime.now(UTC).isoformat()
        episodes, unprocessed = [], []
        wanted = (body.get("filters") or {}).get("session_id")
        for (app_id, project_id, session_id), messages in sessions.items():
            text = " ".join(_text(m["content"]) for m in messages)
            if any(word in text.lower() for word in words):
                episodes.append({
                    "id": f"ep-{session_id}", "app_id": app_id, "project_id": project_id,
                    "user_id": body.get("user_id"), "session_id": session_id,
                    "timestamp": now, "sender_ids": sorted({m["sender_id"] for m in messages}),
                    "summary": text[:80], "subject": session_id, "episode": text,
                    "type": "conversation", "score": 0.9,
                })
            if session_id == wanted:
                unprocessed += [{
                    "id": f"msg-{session_id}-{index}", "app_id": app_id,
                    "project_id": project_id, "session_id": session_id,
                    "sender_id": m["sender_id"], "role": m["role"], "content": m["content"],
                    "timestamp": now,
                } for index, m in enumerate(messages)]
        return JSONResponse({"request_id": "fake", "data": {
            "episodes": episodes, "profiles": [], "agent_cases": [], "agent_skills": [],
            "unprocessed_messages": unprocessed}})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[
        Route("/api/v2/memory/add", add, methods=["POST"]),
        Route("/api/v2/memory/flush", flush, methods=["POST"]),
        Route("/api/v2/memory/search", search, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
    ])


APPS = {"everos-cloud": everos_cloud_app}


@contextmanager
def fake_engine(kind: str) -> Iterator[str]:
    """Run `python -m tests.fake_engines KIND PORT` until the block ends; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running([kind, str(port)], dict(os.environ), url + "/health", module="tests.fake_engines"):
        yield url


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(APPS[sys.argv[1]](), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
