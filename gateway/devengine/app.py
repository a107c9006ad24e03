"""The dev engine's HTTP side: EverOS 1.5.1's `/api/v{1,2}/memory/{add,flush,search,get}` and
`/api/v{1,2}/tasks`, validated with the engine's own request models
(`gateway.upstream.flavors.everos_models`) and answered in its shapes and statuses.

Statuses, as the engine's FastAPI app and `entrypoints/api/exception_handlers.py` give them:
a body the request model refuses is 422 `INVALID_INPUT` with the first error as
"<msg>: <dotted.loc>" (an empty `query`: "Search query cannot be empty."); malformed JSON is 422
"JSON decode error: <pos>", a body JSON cannot hold (nested too deep, not UTF-8) 400; a filter
the compiler refuses is 422 `INVALID_INPUT`; a file its parser cannot read 415
`UNSUPPORTED_FORMAT`; an unknown task 404 `NOT_FOUND`; anything else 500 `INTERNAL_ERROR`.
Errors carry `{"request_id", "error": {"code", "message", "timestamp", "path"}}`; an unknown
path (404), a wrong method (405) and an unparsable body (400) carry Starlette's
`{"detail": …}`, as in the engine. The engine's own 500s for requests it cannot serve are kept:
`llm_multiround` for an agent; filters on columns its agent tables lack (a skill listing with any
filter field, a case listing by `sender_id`, an agent search with a filter field once agent
memory exists).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from email.message import Message as MimeHeader
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.devengine.filters import Compiled, FilterError, compile_filters
from gateway.devengine.ingest import canonical, shown_content
from gateway.devengine.keywords import KeywordQuery
from gateway.devengine.objects import DevObjects
from gateway.devengine.parse import UnsupportedFile
from gateway.devengine.store import CaseRow, DevEngineStore, EpisodeRow, Scope
from gateway.upstream.flavors.everos_models import (
    AddBody,
    FilterNode,
    FlushBody,
    GetBody,
    GetMemoryType,
    SearchBody,
    SearchMethod,
    TasksQuery,
)

ENGINE_VERSION = "dev"
ENGINE_NAME = "memory-gateway dev engine"  # in /health; doctor recognises it by this
EPISODE_TOP_K = 100  # what top_k = -1 means for episodes
AGENT_TOP_K = 10  # and for agent cases
MAX_QUEUED_PAYLOAD = 4_194_304  # memorize.async_queue.max_payload_bytes
TASK_STATUSES = ("queued", "processing", "success", "failed")
FIELD_HINTS = {"query": "Search query cannot be empty."}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
AGENT_KINDS = (GetMemoryType.AGENT_CASE, GetMemoryType.AGENT_SKILL)
EPISODE_COLUMNS = frozenset({"session_id", "parent_type", "parent_id", "timestamp",
                             "sender_ids"})
CASE_COLUMNS = EPISODE_COLUMNS - {"sender_ids"}


# --- envelopes --------------------------------------------------------------------------------


class EngineError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _internal() -> EngineError:
    return EngineError(500, "INTERNAL_ERROR", "Internal server error")


def iso(ms: int) -> str:
    """A time as the engine's pydantic answers write it (`…T00:00:00Z`, `….300000Z`)."""
    moment = EPOCH + timedelta(milliseconds=ms)
    fraction = f".{moment.microsecond:06d}" if moment.microsecond else ""
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _request_id(request: Request) -> str:
    rid: str = request.scope.setdefault("state", {}).setdefault("request_id", uuid.uuid4().hex)
    return rid


def _ok(request: Request, data: dict[str, Any], status: int = 200) -> JSONResponse:
    rid = _request_id(request)
    return JSONResponse({"request_id": rid, "data": data}, status_code=status,
                        headers={"X-Request-Id": rid})


def _error(request: Request, status: int, code: str, message: str) -> JSONResponse:
    error = {"code": code, "message": message, "timestamp": datetime.now(UTC).isoformat(),
             "path": request.url.path}
    rid = _request_id(request)
    return JSONResponse({"request_id": rid, "error": error}, status_code=status,
                        headers={"X-Request-Id": rid})


async def _engine_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, EngineError)
    return _error(request, exc.status, exc.code, exc.message)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    return _error(request, 500, "INTERNAL_ERROR", "Internal server error")


def _invalid(message: str) -> EngineError:
    return EngineError(422, "INVALID_INPUT", message)


def _validation_message(errors: list[Any], prefix: tuple[str, ...]) -> str:
    if not errors:
        return "Request validation error"
    first = errors[0]
    parts = [str(part) for part in (*prefix, *first.get("loc", ())) if part != "body"]
    if parts and parts[-1] in FIELD_HINTS:
        return FIELD_HINTS[parts[-1]]
    msg = first.get("msg", "Validation error")
    return f"{msg}: {'.'.join(parts)}" if parts else str(msg)


Model = TypeVar("Model", bound=BaseModel)


async def _parse(request: Request, model: type[Model]) -> Model:
    """The body as FastAPI reads a required body model: JSON when the content type is JSON or
    absent, the raw bytes (then refused) otherwise, nothing when empty."""
    raw = await request.body()
    payload: Any = None
    if raw:
        content_type = request.headers.get("content-type")
        header = MimeHeader()
        header["content-type"] = content_type or ""
        is_json = not content_type or (header.get_content_maintype() == "application" and (
            header.get_content_subtype() == "json"
            or header.get_content_subtype().endswith("+json")))
        if not is_json:
            payload = raw
        else:
            try:
                payload = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise _invalid(f"JSON decode error: {exc.pos}") from None
            except Exception:  # not UTF-8, nested past the recursion limit
                raise HTTPException(400, "There was an error parsing the body") from None
    if payload is None:
        raise _invalid("Field required")
    return _validated(model, payload, ("body",))


def _validated(model: type[Model], payload: Any, prefix: tuple[str, ...]) -> Model:
    try:
        return model.model_validate(payload, from_attributes=True)
    except ValidationError as exc:
        raise _invalid(_validation_message(exc.errors(), prefix)) from None
    except RecursionError:
        raise _invalid("Recursion error - maximum validation depth exceeded") from None


def _filters(node: FilterNode | None) -> Compiled:
    try:
        return compile_filters(None if node is None else node.model_dump(exclude_none=True))
    except FilterError as exc:
        raise _invalid(str(exc)) from None


def _session_pinned(node: FilterNode | None) -> str | None:
    """The session whose buffer a search also answers: only a top-level string `session_id`."""
    value = (node.__pydantic_extra__ or {}).get("session_id") if node is not None else None
    return value if isinstance(value, str) and value else None


def _top_k(top_k: int, cap: int) -> int:
    return cap if top_k == -1 else top_k


# --- shapes -------------------------------------------------------------------------------------


def episode_item(ep: EpisodeRow) -> dict[str, Any]:
    """`GetEpisodeItem`; search adds `score` and `atomic_facts` (`SearchEpisodeItem`)."""
    return {
        "id": ep.id, "user_id": ep.owner_id, "app_id": ep.app_id, "project_id": ep.project_id,
        "session_id": ep.session_id, "timestamp": iso(ep.timestamp_ms),
        "sender_ids": ep.sender_ids, "summary": ep.summary, "subject": ep.subject,
        "episode": ep.episode, "type": "Conversation",
    }


def case_item(case: CaseRow) -> dict[str, Any]:
    """`GetAgentCaseItem`; search adds `score` (`SearchAgentCaseItem`)."""
    return {
        "id": case.id, "agent_id": case.owner_id, "app_id": case.app_id,
        "project_id": case.project_id, "session_id": case.session_id,
        "task_intent": case.task_intent, "approach": case.approach,
        "quality_score": case.quality_score, "key_insight": case.key_insight,
        "timestamp": iso(case.timestamp_ms),
    }


def profile_items(episodes: list[EpisodeRow], user_id: str, app_id: str,
                  project_id: str) -> list[dict[str, Any]]:
    """`GetProfileItem`: a user with episodes has a profile; the dev engine has no model to
    write its summary, facts or traits, so they are empty."""
    if not episodes:
        return []
    data = {"summary": "", "explicit_info": [], "implicit_traits": [],
            "profile_timestamp_ms": max(ep.timestamp_ms for ep in episodes)}
    return [{"id": user_id, "user_id": user_id, "app_id": app_id, "project_id": project_id,
             "profile_data": data}]


def unprocessed_item(scope: Scope, m: Any) -> dict[str, Any]:
    """`UnprocessedMessageDTO`: the buffered message with its engine-made id and its items as
    ingested (parse records included)."""
    return {
        "id": m.message_id, "app_id": scope.app_id, "project_id": scope.project_id,
        "session_id": scope.session_id, "sender_id": m.sender_id, "sender_name": m.sender_name,
        "role": m.role, "content": shown_content(m.content_items),
        "timestamp": iso(m.timestamp_ms), "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
    }


def _ranked(query: KeywordQuery, rows: Iterable[Any], text_of: Any,
            merged: Any = lambda row: False) -> list[tuple[float, Any]]:
    """Rows the keywords match, best first; ties: session episodes before merged ones, then
    newer first."""
    scored = [(query.score(text_of(row)), row) for row in rows]
    hits = [(score, row) for score, row in scored if score > 0]
    hits.sort(key=lambda pair: (-pair[0], merged(pair[1]), -pair[1].timestamp_ms, pair[1].pk))
    return hits


# --- the app ------------------------------------------------------------------------------------


def create_dev_engine(database: str = ":memory:") -> Starlette:
    """The dev engine as an ASGI app; `database` is a SQLite file path or ":memory:".

    The store opens in lifespan and closes at shutdown; a request served without lifespan
    (e.g. through `httpx.ASGITransport`) opens it on first use.
    """
    tasks: dict[str, dict[str, Any]] = {}  # accepted async adds, by request id
    objects = DevObjects()

    def store(request: Request) -> DevEngineStore:
        state = request.app.state
        if state.store is None:
            state.store = DevEngineStore(database)
        opened: DevEngineStore = state.store
        return opened

    async def memorize(request: Request, body: AddBody) -> bool:
        try:
            messages = canonical(body.session_id, body.messages, objects.sizes)
        except UnsupportedFile as exc:
            raise EngineError(415, "UNSUPPORTED_FORMAT", str(exc)) from None
        except (OverflowError, OSError, ValueError):
            raise _internal() from None  # a timestamp no datetime holds
        scope = Scope(body.app_id, body.project_id, body.session_id)
        try:
            return await run_in_threadpool(store(request).memorize, scope, messages,
                                           final=False, defer=body.defer_extraction,
                                           now_ms=_now_ms())
        except UnicodeEncodeError:
            raise _internal() from None  # a lone surrogate in a message's text

    async def add(request: Request) -> Response:
        body = await _parse(request, AddBody)
        if body.async_mode:
            return await queued_add(request, body)
        extracted = await memorize(request, body)
        return _ok(request, {"message_count": len(body.messages),
                             "status": "extracted" if extracted else "accumulated"})

    async def queued_add(request: Request, body: AddBody) -> Response:
        """The engine's queue takes the batch and answers 202; the dev engine runs it at once
        and keeps its outcome for `/tasks`."""
        payload = body.model_dump(exclude={"async_mode", "defer_extraction"})
        try:
            size = len(json.dumps(payload, ensure_ascii=False).encode("utf-8"))
        except UnicodeEncodeError:
            raise _invalid("payload contains a lone surrogate character (not valid UTF-8)"
                           ) from None
        if size > MAX_QUEUED_PAYLOAD:
            raise EngineError(413, "PAYLOAD_TOO_LARGE",
                              f"payload is {size} bytes, limit is {MAX_QUEUED_PAYLOAD}")
        rid = _request_id(request)
        task: dict[str, Any] = {"id": rid, "status": "success", "task_type": "memory_add",
                                "error": None, "error_code": None, "created_at": _now_ms(),
                                "scope": (body.app_id, body.project_id, body.session_id)}
        try:
            await memorize(request, body)
        except Exception as exc:
            kind = "UnsupportedModalityError" if isinstance(exc, EngineError) \
                and exc.status == 415 else type(exc).__name__
            task.update(status="failed", error=f"{kind}: {exc}", error_code=kind)
        task["finished_at"] = _now_ms()
        tasks[rid] = task
        return _ok(request, {"status": "queued", "message_count": len(body.messages),
                             "pending": 1}, status=202)

    async def flush(request: Request) -> Response:
        body = await _parse(request, FlushBody)
        scope = Scope(body.app_id, body.project_id, body.session_id)
        extracted = await run_in_threadpool(store(request).memorize, scope, [], final=True,
                                            defer=False, now_ms=_now_ms())
        return _ok(request, {"status": "extracted" if extracted else "no_extraction"})

    async def search(request: Request) -> Response:
        body = await _parse(request, SearchBody)
        compiled = _filters(body.filters)
        if body.method == SearchMethod.LLM_MULTIROUND and body.agent_id is not None:
            raise _internal()  # the engine's RuntimeError: llm_multiround is user memory only
        query, engine = KeywordQuery(body.query), store(request)
        data: dict[str, Any] = {"episodes": [], "profiles": [], "agent_cases": [],
                                "agent_skills": [], "unprocessed_messages": []}
        if body.user_id is not None:
            rows = await run_in_threadpool(engine.episodes, body.user_id, body.app_id,
                                           body.project_id)
            hits = _ranked(query, (ep for ep in rows if compiled.matches(ep)),
                           lambda ep: f"{ep.episode} {ep.subject}", lambda ep: ep.merged)
            floor = body.min_score if body.method == SearchMethod.HYBRID else None
            data["episodes"] = [
                {**episode_item(ep), "score": score, "atomic_facts": []}
                for score, ep in hits[: _top_k(body.top_k, EPISODE_TOP_K)]
                if floor is None or score >= floor
            ]
            if body.include_profile:
                data["profiles"] = [{**item, "score": None} for item in profile_items(
                    rows, body.user_id, body.app_id, body.project_id)]
        else:
            assert body.agent_id is not None
            holds_cases = await run_in_threadpool(engine.holds_agent_cases)
            if compiled.columns and holds_cases:
                raise _internal()  # the engine's skill table has none of the filter columns
            cases = await run_in_threadpool(engine.agent_cases, body.agent_id, body.app_id,
                                            body.project_id)
            hits = _ranked(query, (case for case in cases if compiled.matches(case)),
                           lambda case: f"{case.task_intent} {case.approach}")
            data["agent_cases"] = [{**case_item(case), "score": score}
                                   for score, case in hits[: _top_k(body.top_k, AGENT_TOP_K)]]
        session_id = _session_pinned(body.filters)
        if session_id is not None:
            scope = Scope(body.app_id, body.project_id, session_id)
            buffered = await run_in_threadpool(engine.buffered, scope)
            data["unprocessed_messages"] = [unprocessed_item(scope, m) for m in buffered]
        return _ok(request, data)

    async def get(request: Request) -> Response:
        body = await _parse(request, GetBody)
        compiled = _filters(body.filters)
        engine, kind = store(request), body.memory_type
        owner = body.user_id if body.user_id is not None else body.agent_id
        assert owner is not None
        data: dict[str, Any] = {"episodes": [], "profiles": [], "agent_cases": [],
                                "agent_skills": [], "total_count": 0, "count": 0}
        if kind == GetMemoryType.PROFILE:  # one row by key: filters are compiled, not applied
            rows = await run_in_threadpool(engine.episodes, owner, body.app_id, body.project_id)
            data["profiles"] = profile_items(rows, owner, body.app_id, body.project_id)
            data["total_count"] = data["count"] = len(data["profiles"])
            return _ok(request, data)
        if kind == GetMemoryType.AGENT_SKILL:
            if compiled.columns:
                raise _internal()  # no such column in the engine's skill table
            return _ok(request, data)
        found: list[Any]
        if kind == GetMemoryType.AGENT_CASE:
            if compiled.columns - CASE_COLUMNS:
                raise _internal()
            found = await run_in_threadpool(engine.agent_cases, owner, body.app_id,
                                            body.project_id)
        else:
            # A merged episode has no session, which the engine's GetEpisodeItem requires
            # (such a page is a 500 there): listings leave them out.
            found = [ep for ep in await run_in_threadpool(engine.episodes, owner, body.app_id,
                                                          body.project_id) if not ep.merged]
        found = [row for row in found if compiled.matches(row)]
        key = "timestamp_ms" if body.sort_by == "timestamp" else "updated_at_ms"
        found.sort(key=lambda row: (getattr(row, key), row.pk), reverse=body.sort_order == "desc")
        start = (body.page - 1) * body.page_size
        page = found[start : start + body.page_size]
        if kind == GetMemoryType.AGENT_CASE:
            data["agent_cases"] = [case_item(case) for case in page]
        else:
            data["episodes"] = [episode_item(ep) for ep in page]
        data["total_count"], data["count"] = len(found), len(page)
        return _ok(request, data)

    async def task_list(request: Request) -> Response:
        query = _validated(TasksQuery, dict(request.query_params), ("query",))
        if query.status is not None and query.status not in TASK_STATUSES:
            raise _invalid(f"status must be one of {', '.join(TASK_STATUSES)}; "
                           f"got {query.status!r}")
        chosen = [task for task in reversed(tasks.values())
                  if task["scope"][:2] == (query.app_id, query.project_id)
                  and query.session_id in (None, task["scope"][2])
                  and query.status in (None, task["status"])]
        size = min(query.page_size, 100)
        start = (query.page - 1) * size
        return _ok(request, {"total": len(chosen), "page": query.page, "page_size": size,
                             "items": [_task_item(task) for task in chosen[start:start + size]]})

    async def task_status(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        if task_id not in tasks:
            raise EngineError(404, "NOT_FOUND", f"task {task_id} not found or expired")
        return _ok(request, _task_item(tasks[task_id]))

    async def health(request: Request) -> Response:
        capabilities = {"llm": False, "embed": False, "rerank": False, "multimodal_llm": False,
                        "parser": True}
        return JSONResponse({
            "status": "ok", "version": ENGINE_VERSION, "engine": ENGINE_NAME,
            "capabilities": capabilities,
            "disabled_features": ["agentic_search", "knowledge", "multimodal_upload"],
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

    routes = [Route("/health", health, methods=["GET"]), *objects.routes()]
    for version in ("v2", "v1"):
        for name, endpoint in (("add", add), ("flush", flush), ("search", search), ("get", get)):
            routes.append(Route(f"/api/{version}/memory/{name}", endpoint, methods=["POST"]))
        routes.append(Route(f"/api/{version}/tasks", task_list, methods=["GET"]))
        routes.append(Route(f"/api/{version}/tasks/{{task_id}}", task_status, methods=["GET"]))
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


def _task_item(task: dict[str, Any]) -> dict[str, Any]:
    """`TaskItem`, the engine's (and the Cloud's) shape of an accepted request."""
    return {"id": task["id"], "status": task["status"], "task_type": task["task_type"],
            "error": task["error"], "error_code": task["error_code"],
            "created_at": iso(task["created_at"]), "finished_at": iso(task["finished_at"])}
