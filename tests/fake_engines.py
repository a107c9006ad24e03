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
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.processes import free_port, running

ROLES = ("user", "assistant", "tool")
ENGINE_KEY = "cloud-engine-key"  # the Cloud key the gateway holds (upstream.headers)
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


class FakeObjectStore:
    """The Cloud's sign route and the presigned POST target it hands out: files kept in memory,
    keys the Cloud's own (`mms/…`); an add may name only keys whose file arrived."""

    def __init__(self) -> None:
        self.signed: dict[str, str] = {}  # upload token -> object key
        self.files: dict[str, bytes] = {}  # object key -> bytes

    async def sign(self, request: Request) -> JSONResponse:
        body = await request.json()
        listed = body.get("objectList") if isinstance(body, dict) else None
        if not isinstance(listed, list) or not listed \
                or request.headers.get("authorization") != f"Bearer {ENGINE_KEY}":
            return JSONResponse({"status": 2018, "error": "objectList required",
                                 "result": {"data": "objectList required"}})
        out = []
        for entry in listed:
            token = uuid.uuid4().hex
            key = f"mms/{uuid.uuid4().hex}/{entry['fileName']}"
            self.signed[token] = key
            out.append({**entry, "objectKey": key, "objectSignedInfo": {
                "url": f"{str(request.base_url).rstrip('/')}/_s3/{token}",
                "fields": {"key": key, "policy": "p"}, "maxSize": 10 * 1024 * 1024}})
        return JSONResponse({"status": 0, "error": "OK", "request_id": "fake",
                             "result": {"data": {"objectList": out}}})

    async def upload(self, request: Request) -> Response:
        key = self.signed.pop(request.path_params["token"], None)
        form = await request.form()
        file = form.get("file")
        if key is None or form.get("key") != key or isinstance(file, str) or file is None:
            return Response(status_code=403)
        self.files[key] = await file.read()
        return Response(status_code=204)

    def problems(self, messages: Any) -> list[str]:
        """Items whose `uri` looks like an object key the Cloud never stored."""
        found = []
        for message in messages if isinstance(messages, list) else []:
            content = message.get("content") if isinstance(message, dict) else None
            for item in content if isinstance(content, list) else []:
                uri = item.get("uri") if isinstance(item, dict) else None
                if isinstance(uri, str) and "://" not in uri and uri not in self.files:
                    found.append(f"uri {uri!r}: no such object")
        return found

    async def show(self, request: Request) -> JSONResponse:
        return JSONResponse({key: len(data) for key, data in self.files.items()})

    def routes(self, version: str) -> list[Route]:
        return [Route(f"/api/{version}/object/sign", self.sign, methods=["POST"]),
                Route("/_s3/{token}", self.upload, methods=["POST"]),
                Route("/_objects", self.show, methods=["GET"])]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(item.get("text") or "" for item in content if isinstance(item, dict))


def everos_cloud_app() -> Starlette:
    sessions: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    objects = FakeObjectStore()

    async def add(request: Request) -> JSONResponse:
        body = await request.json()
        problems = _problems_with_add(body) or objects.problems(body.get("messages"))
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

    async def delete(request: Request) -> JSONResponse:
        """V2Delete (everos_cloud/api/memory_api.py): one owner, user_id or agent_id, in one
        app/project scope, narrowed by session_id; here the owner's messages go."""
        body = await request.json()
        owners = [body.get(key) for key in ("user_id", "agent_id") if body.get(key)]
        if len(owners) != 1:
            return JSONResponse({"detail": ["one of user_id, agent_id required"]}, 422)
        scope = (body.get("app_id", "default"), body.get("project_id", "default"))
        removed = 0
        for key in list(sessions):
            if key[:2] != scope or body.get("session_id") not in (None, key[2]):
                continue
            kept = [m for m in sessions[key] if m["sender_id"] != owners[0]]
            removed += len(sessions[key]) - len(kept)
            if kept:
                sessions[key] = kept
            else:
                del sessions[key]
        return JSONResponse({"request_id": "fake", "data": {"deleted_count": removed}})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[
        Route("/api/v2/memory/delete", delete, methods=["POST"]),
        Route("/api/v2/memory/add", add, methods=["POST"]),
        Route("/api/v2/memory/flush", flush, methods=["POST"]),
        Route("/api/v2/memory/search", search, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        *objects.routes("v2"),
    ])


def everos_cloud_v1_app() -> Starlette:
    """EverOS Cloud's legacy v1 API as the 0.4.x SDK calls it: add (user_id, messages with integer
    timestamps), search (filters.user_id required), flush."""
    memories: list[dict[str, Any]] = []
    objects = FakeObjectStore()

    async def add(request: Request) -> JSONResponse:
        body = await request.json()
        messages = body.get("messages")
        if not isinstance(body.get("user_id"), str) or not isinstance(messages, list) \
                or not all(isinstance(m.get("timestamp"), int) for m in messages) \
                or objects.problems(messages):
            return JSONResponse({"detail": "user_id and timestamped messages required"}, 422)
        for message in messages:
            memories.append({"user_id": body["user_id"], "session_id": body.get("session_id"),
                             **message})
        return JSONResponse({"status": "ok", "message": "accepted", "request_id": "fake",
                             "data": {"status": "accumulated", "message_count": len(messages)}})

    async def search(request: Request) -> JSONResponse:
        body = await request.json()
        user = (body.get("filters") or {}).get("user_id")
        if not isinstance(user, str):
            return JSONResponse({"detail": "filters.user_id required"}, 422)
        words = str(body.get("query") or "").lower().split()
        now = datetime.now(UTC).isoformat()
        episodes = [{
            "id": f"ep-{index}", "user_id": m["user_id"], "session_id": m["session_id"],
            "episode": _text(m["content"]), "summary": _text(m["content"])[:40],
            "timestamp": now, "score": 0.8,
        } for index, m in enumerate(memories)
            if m["user_id"] == user and any(w in _text(m["content"]).lower() for w in words)]
        return JSONResponse({"status": "ok", "request_id": "fake", "data": {
            "episodes": episodes, "profiles": [], "raw_messages": []}})

    async def flush(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "request_id": "fake", "data": {"status": "done"}})

    async def delete(request: Request) -> Response:
        """By filters (the 0.4 SDK's `memories.delete`: omitted fields skip filtering; answered
        with no body, as the SDK casts it to None)."""
        body = await request.json()
        if not body.get("user_id") and not body.get("group_id"):
            return JSONResponse({"detail": "user_id or group_id required"}, 422)
        memories[:] = [m for m in memories if not all(
            m.get(key) == body[key] for key in ("user_id", "group_id", "session_id")
            if key in body)]
        return Response(status_code=200)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[
        Route("/api/v1/memories/delete", delete, methods=["POST"]),
        Route("/api/v1/memories", add, methods=["POST"]),
        Route("/api/v1/memories/search", search, methods=["POST"]),
        Route("/api/v1/memories/flush", flush, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        *objects.routes("v1"),
    ])


def evermemos_v0_app() -> Starlette:
    """EverMemOS v0 as the `evermemos` 0.3 SDK calls it: one message per add (`sender` is the
    owner, `group_id` the conversation), search by query string."""
    messages: list[dict[str, Any]] = []

    async def add(request: Request) -> JSONResponse:
        body = await request.json()
        missing = [key for key in ("message_id", "create_time", "sender", "content")
                   if not isinstance(body.get(key), str)]
        if missing:
            return JSONResponse({"status": "failed", "message": f"missing {missing}"}, 422)
        messages.append(body)
        return JSONResponse({"status": "ok", "message": "queued", "request_id": "fake"})

    async def search(request: Request) -> JSONResponse:
        user = request.query_params.get("user_id")
        words = (request.query_params.get("query") or "").lower().split()
        now = datetime.now(UTC).isoformat()
        found = [{
            "memory_type": "episodic_memory", "timestamp": now, "user_id": m["sender"],
            "id": m["message_id"], "group_id": m.get("group_id"), "episode": m["content"],
        } for m in messages
            if m["sender"] == user and any(w in m["content"].lower() for w in words)]
        return JSONResponse({"status": "ok", "message": "", "result": {
            "memories": found, "total_count": len(found)}})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[
        Route("/api/v0/memories", add, methods=["POST"]),
        Route("/api/v0/memories/search", search, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ])


def mem0_platform_app() -> Starlette:
    """mem0's hosted platform API as `MemoryClient` calls it: ping, v3 add/search/get-all, and
    memories by id (trailing slashes as the platform spells them)."""
    memories: dict[str, dict[str, Any]] = {}

    async def ping(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "org_id": "org", "project_id": "project",
                             "user_email": None})

    async def add(request: Request) -> JSONResponse:
        body = await request.json()
        if not isinstance(body.get("user_id"), str):
            return JSONResponse({"detail": "user_id required"}, 400)
        results = []
        for message in body.get("messages") or []:
            memory_id = f"mem-{len(memories) + 1}"
            memories[memory_id] = {"id": memory_id, "memory": message.get("content"),
                                   "user_id": body["user_id"], "run_id": body.get("run_id"),
                                   "metadata": body.get("metadata")}
            results.append({"id": memory_id, "event": "ADD", "memory": message.get("content")})
        return JSONResponse({"results": results})

    def _mine(body: dict[str, Any]) -> list[dict[str, Any]]:
        user = (body.get("filters") or {}).get("user_id")
        return [m for m in memories.values() if m["user_id"] == user]

    async def search(request: Request) -> JSONResponse:
        body = await request.json()
        words = str(body.get("query") or "").lower().split()
        return JSONResponse({"results": [
            {**m, "score": 0.9} for m in _mine(body)
            if any(w in str(m["memory"]).lower() for w in words)]})

    async def get_all(request: Request) -> JSONResponse:
        return JSONResponse({"results": _mine(await request.json())})

    async def by_id(request: Request) -> JSONResponse:
        memory = memories.get(request.path_params["memory_id"])
        if memory is None:
            return JSONResponse({"detail": "not found"}, 404)
        if request.method == "DELETE":
            del memories[memory["id"]]
            return JSONResponse({"message": "Memory deleted successfully!"})
        return JSONResponse(memory)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[
        Route("/v1/ping/", ping, methods=["GET"]),
        Route("/v3/memories/add/", add, methods=["POST"]),
        Route("/v3/memories/search/", search, methods=["POST"]),
        Route("/v3/memories/", get_all, methods=["POST"]),
        Route("/v1/memories/{memory_id}/", by_id, methods=["GET", "DELETE"]),
        Route("/health", health, methods=["GET"]),
    ])


APPS = {"everos-cloud": everos_cloud_app, "everos-cloud-v1": everos_cloud_v1_app,
        "evermemos-v0": evermemos_v0_app, "mem0-platform": mem0_platform_app}


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
