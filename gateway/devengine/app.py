"""The built-in dev engine: a small reference memory engine speaking the subset of the
EverOS v2 HTTP API the gateway uses, so the gateway runs — and its end-to-end tests have
a peer — on a machine with no engine installed.

It is a development default, not a memory product: no LLM, no embeddings, no extraction.
An "episode" is simply the text of a session's flushed messages (files appear as a line
"[image] photo.png"; payloads never do), and search is keyword overlap. Storage lives in
`gateway.devengine.store`, the request bodies and their validation in `gateway.devengine.models`.

Contract followed: EverOS `docs/api.md` and `docs/openapi.json` (EverMind-AI/EverOS) —
`POST /api/v2/memory/{add,flush,search,get}` with `/api/v1/...` aliases, the success
envelope `{"request_id", "data"}`, the error envelope
`{"request_id", "error": {"code", "message", "timestamp", "path"}}` (`INVALID_INPUT`
422 with the first validation error as "<msg>: <dotted.loc>", `NOT_FOUND` 404,
`INTERNAL_ERROR` 500), add answering `{message_count, status: "accumulated"}`, flush
`{status: "extracted" | "no_extraction"}`, search the five lists with episodes shaped as
`SearchEpisodeItem` and buffered messages as `UnprocessedMessageDTO` (returned only when
`filters.session_id` is a top-level string), get as `GetData` with `total_count`/`count`.

Where it differs from the reference, on purpose or by assumption:
- Messages stay buffered until `/flush` (no boundary detector); add always answers
  "accumulated", and `defer_extraction` is accepted and changes nothing.
- Episodes are session-level: one per `(app_id, project_id, session_id)`, each flush
  appends to it; `user_id` is the requested user or the session's first user-role sender.
  `timestamp` is the first flushed message's time. `summary` and `subject` are cut from
  the text, `atomic_facts` is always empty. Scores are the share of query terms found.
- Lenient where the gateway's clients are: `user_id`/`agent_id` may both be absent (then
  every session of the scope is searched; both set is still 422); `query` may be empty
  (recent episodes, score 0); `limit` is an alias of `top_k`; `memory_type` defaults to
  "episode"; `sender_id` defaults to the role and `timestamp` to now; content items only
  need a string `type` (text items a string `text`), so OpenAI-style parts are accepted;
  unknown body fields are ignored; `method`, `radius`, `enable_llm_rerank` are ignored.
- The agent track (agent_cases, agent_skills) and profiles are never produced.
- Filters: `session_id` (eq/ne/in), `sender_id` (eq/in), `timestamp` (eq..lte), `AND`/`OR`;
  anything else is 422. `GET /health` mimics the reference's shape with every capability
  false. A wrong method answers 405 `METHOD_NOT_ALLOWED` (not in the reference's enum).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.devengine.models import (
    AddRequest,
    FlushRequest,
    GetRequest,
    OwnerBody,
    SearchRequest,
)
from gateway.devengine.store import (
    BufferedMessage,
    DevEngineStore,
    Episode,
    FilterError,
    KeywordQuery,
    Scope,
    compile_filter,
)

DEFAULT_TOP_K = 10
ENGINE_VERSION = "dev"
ENGINE_NAME = "memory-gateway dev engine"  # in /health; doctor recognises it by this


# --- envelopes --------------------------------------------------------------------------------


class EngineError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def iso(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    text = moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
    return text.replace("+00:00", "Z")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _ok(data: dict[str, Any]) -> JSONResponse:
    return JSONResponse({"request_id": uuid.uuid4().hex, "data": data})


def _error(request: Request, status: int, code: str, message: str) -> JSONResponse:
    error = {
        "code": code, "message": message, "timestamp": iso(_now_ms()), "path": request.url.path
    }
    return JSONResponse({"request_id": uuid.uuid4().hex, "error": error}, status_code=status)


async def _engine_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, EngineError)
    return _error(request, exc.status, exc.code, exc.message)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "BAD_REQUEST")
    return _error(request, exc.status_code, code, str(exc.detail))


async def _internal_error(request: Request, exc: Exception) -> Response:
    return _error(request, 500, "INTERNAL_ERROR", "internal error")


def _invalid(message: str) -> EngineError:
    return EngineError(422, "INVALID_INPUT", message)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


Body = TypeVar("Body", bound=BaseModel)


async def _parse(request: Request, model: type[Body]) -> Body:
    raw = await request.body()
    try:
        payload = json.loads(raw, parse_constant=_reject_constant)
        if b"\\u" in raw:
            # Escapes can smuggle in lone surrogates, which SQLite and the response
            # encoder would choke on: refuse them once, here (UnicodeError is a ValueError).
            json.dumps(payload, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):
        raise _invalid("JSON decode error: the body must be a UTF-8 JSON object") from None
    if not isinstance(payload, dict):
        raise _invalid("the body must be a JSON object")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(part) for part in first["loc"])
        raise _invalid(f"{first['msg']}: {loc}" if loc else first["msg"]) from None


def _filter(filters: dict[str, Any] | None) -> Callable[[Episode], bool]:
    try:
        return compile_filter(filters) if filters else (lambda ep: True)
    except FilterError as exc:
        raise _invalid(f"invalid filters: {exc}") from None


def _session_eq(filters: dict[str, Any] | None) -> str | None:
    value = (filters or {}).get("session_id")
    return value if isinstance(value, str) else None


# --- shapes -------------------------------------------------------------------------------------


def episode_item(ep: Episode, user_id: str | None) -> dict[str, Any]:
    owner = user_id or (ep.user_ids[0] if ep.user_ids else None)
    day = datetime.fromtimestamp(ep.first_message_ms / 1000, UTC).strftime("%Y%m%d")
    flat = " ".join(ep.text.split())
    return {
        "id": f"{owner or 'unowned'}_ep_{day}_{ep.pk:08d}",
        "user_id": owner,
        "app_id": ep.app_id,
        "project_id": ep.project_id,
        "session_id": ep.session_id,
        "timestamp": iso(ep.first_message_ms),
        "sender_ids": ep.sender_ids,
        "summary": flat if len(flat) <= 200 else flat[:199] + "…",
        "subject": ep.text.split("\n", 1)[0][:120],
        "episode": ep.text,
        "type": "Conversation",
    }


def unprocessed_item(scope: Scope, m: BufferedMessage) -> dict[str, Any]:
    return {
        "id": m.message_id,
        "app_id": scope.app_id,
        "project_id": scope.project_id,
        "session_id": scope.session_id,
        "sender_id": m.sender_id,
        "sender_name": m.sender_name,
        "role": m.role,
        "content": m.content,
        "timestamp": iso(m.timestamp_ms),
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
    }


# --- the app ------------------------------------------------------------------------------------


def create_dev_engine(database: str = ":memory:") -> Starlette:
    """The dev engine as an ASGI app; `database` is a SQLite file path or ":memory:".

    The store opens in lifespan and closes at shutdown; a request served without lifespan
    (e.g. through `httpx.ASGITransport`) opens it on first use.
    """

    def store(request: Request) -> DevEngineStore:
        state = request.app.state
        if state.store is None:
            state.store = DevEngineStore(database)
        opened: DevEngineStore = state.store
        return opened

    def visible(ep: Episode, body: OwnerBody) -> bool:
        return body.agent_id is None and (body.user_id is None or body.user_id in ep.user_ids)

    async def add(request: Request) -> Response:
        body = await _parse(request, AddRequest)
        now = _now_ms()
        messages = [
            BufferedMessage(
                message_id=m.message_id or f"msg_{uuid.uuid4().hex}",
                sender_id=m.sender_id or m.role, sender_name=m.sender_name, role=m.role,
                timestamp_ms=m.timestamp or now, content=m.content,
                tool_calls=m.tool_calls, tool_call_id=m.tool_call_id,
            )
            for m in body.messages
        ]
        scope = Scope(body.app_id, body.project_id, body.session_id)
        await run_in_threadpool(store(request).add, scope, messages)
        return _ok({"message_count": len(messages), "status": "accumulated"})

    async def flush(request: Request) -> Response:
        body = await _parse(request, FlushRequest)
        scope = Scope(body.app_id, body.project_id, body.session_id)
        count = await run_in_threadpool(store(request).flush, scope, _now_ms())
        return _ok({"status": "extracted" if count else "no_extraction"})

    async def search(request: Request) -> Response:
        body = await _parse(request, SearchRequest)
        matches, session_id = _filter(body.filters), _session_eq(body.filters)
        episodes = await run_in_threadpool(
            store(request).episodes, body.app_id, body.project_id, session_id
        )
        query = KeywordQuery(body.query)
        scored = [
            (query.score(ep.text), ep) for ep in episodes if visible(ep, body) and matches(ep)
        ]
        if not query.empty:  # `episodes` is newest first and the sort is stable
            scored = sorted((pair for pair in scored if pair[0] > 0), key=lambda p: -p[0])
        floor = body.min_score or 0.0
        limit = body.limit or (body.top_k if body.top_k > 0 else DEFAULT_TOP_K)
        hits = [
            {**episode_item(ep, body.user_id), "score": score, "atomic_facts": []}
            for score, ep in scored
            if score >= floor
        ][:limit]
        unprocessed: list[dict[str, Any]] = []
        if session_id is not None:
            scope = Scope(body.app_id, body.project_id, session_id)
            buffered = await run_in_threadpool(store(request).buffered, scope)
            unprocessed = [unprocessed_item(scope, m) for m in buffered]
        return _ok({"episodes": hits, "profiles": [], "agent_cases": [], "agent_skills": [],
                    "unprocessed_messages": unprocessed})

    async def get(request: Request) -> Response:
        body = await _parse(request, GetRequest)
        matches, session_id = _filter(body.filters), _session_eq(body.filters)
        episodes: list[Episode] = []
        if body.memory_type == "episode":
            found = await run_in_threadpool(
                store(request).episodes, body.app_id, body.project_id, session_id
            )
            episodes = [ep for ep in found if visible(ep, body) and matches(ep)]
        key = "first_message_ms" if body.sort_by == "timestamp" else "updated_at_ms"
        episodes.sort(key=lambda ep: (getattr(ep, key), ep.pk), reverse=body.sort_order == "desc")
        start = (body.page - 1) * body.page_size
        page = [episode_item(ep, body.user_id) for ep in episodes[start : start + body.page_size]]
        return _ok({"episodes": page, "profiles": [], "agent_cases": [], "agent_skills": [],
                    "total_count": len(episodes), "count": len(page)})

    async def health(request: Request) -> Response:
        capabilities = dict.fromkeys(("llm", "embed", "rerank", "multimodal_llm", "parser"), False)
        return JSONResponse({
            "status": "ok", "version": ENGINE_VERSION, "engine": ENGINE_NAME,
            "capabilities": capabilities,
            "disabled_features": ["extraction", "vector_search", "profiles", "agent_memory"],
            "cascade": None,
        })

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if app.state.store is None:
            app.state.store = DevEngineStore(database)
        try:
            yield
        finally:
            app.state.store.close()
            app.state.store = None

    routes = [Route("/health", health, methods=["GET"])]
    for version in ("v2", "v1"):
        for name, endpoint in (("add", add), ("flush", flush), ("search", search), ("get", get)):
            routes.append(Route(f"/api/{version}/memory/{name}", endpoint, methods=["POST"]))
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            EngineError: _engine_error,
            HTTPException: _http_error,
            Exception: _internal_error,
        },
    )
    app.state.store = None
    return app
