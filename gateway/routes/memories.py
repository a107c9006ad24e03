"""Add and search interception (SPEC §6, §8, §9), on the gateway's paths and the engine's own.

Add: identity checks, attachments recorded (inline files decoded to disk) around an unchanged
forward of the client's bytes. Search: forward unchanged, then drop other users' sessions and
attach the caller's files whose names occur in each result. `/memories/search` answers the
normalised `{"results", "total"}`; the engine's own search paths keep the engine's shape with an
`attachments` list added to each item, so an engine client works by changing only its base URL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway import jsonio
from gateway.attachment_index import EMPTY
from gateway.attachments import attachment_items, decode_inline
from gateway.context import Services, request_id, services, user_id
from gateway.errors import UpstreamBadResponse, ValidationFailed
from gateway.files import file_uri, safe_name
from gateway.ids import new_id
from gateway.proxy import upstream_headers
from gateway.routes.common import api, body_bytes, parse_json, relayed
from gateway.search import FoundItem, drop, find_items, result
from gateway.store import attachments
from gateway.store.attachments import Intent, new_mapping

ADD_PATHS = ("/memories/add", "/api/v2/memory/add", "/api/v1/memory/add")
SEARCH_PATHS = ("/memories/search", "/api/v2/memory/search", "/api/v1/memory/search")
SOURCE_URI = "memory_add_uri"
SOURCE_BASE64 = "memory_add_base64"


class AddRequest(BaseModel):
    """An EverOS add body; fields beyond these pass through to the engine unchanged."""

    model_config = ConfigDict(extra="allow")
    session_id: str | None = None
    app_id: str = "default"
    project_id: str = "default"
    messages: list[dict[str, Any]]


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    query: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    filters: dict[str, Any] | None = None


class Attachment(BaseModel):
    type: str
    name: str
    internal_uri: str


class SearchResult(BaseModel):
    id: str
    type: str
    content: str | None
    score: float | None
    session_id: str | None
    created_at: Any
    raw: Any
    attachments: list[Attachment]


class SearchResponse(BaseModel):
    results: list[SearchResult]
    total: int


def _scope(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    return value if isinstance(value, str) and value else "default"


async def _checked_body(request: Request) -> tuple[Services, str, bytes, dict[str, Any]]:
    svc = services(request)
    caller = user_id(request)
    raw = await body_bytes(request)
    payload = parse_json(raw)
    if not isinstance(payload, dict):
        raise ValidationFailed("the body must be a JSON object", field="body")
    await svc.rules.check_body(payload, caller)
    return svc, caller, raw, payload


async def _forward(request: Request, svc: Services, caller: str, path: str, raw: bytes
                   ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    headers = upstream_headers(request.scope, svc.settings, caller, request_id(request))
    return await svc.upstream.call("POST", path, headers, raw)


@api(summary="Add memories; records the attachments of the session", request=AddRequest,
     errors=(403, 502, 503, 504), tag="memories")
async def add(request: Request) -> Response:
    svc, caller, raw, payload = await _checked_body(request)
    add_path = svc.settings.upstream.add_path
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return relayed(*await _forward(request, svc, caller, add_path, raw))
    app_id, project_id = _scope(payload, "app_id"), _scope(payload, "project_id")
    limit = svc.settings.limits.max_inline_file_bytes
    items = attachment_items(payload)
    # Validate and decode everything before any work is done (413 / 422, nothing written).
    inline = {item.field: decode_inline(item, limit) for item in items if item.uri is None}
    intent = Intent(id=new_id("int"), user_id=caller, kind="memory_add")
    files: list[tuple[Path, str, bytes]] = []
    for item in items:
        mapping_id = new_id("att")
        common = dict(user_id=caller, app_id=app_id, project_id=project_id,
                      session_id=session_id, name=item.name, content_type=item.content_type,
                      mapping_id=mapping_id)
        if item.uri is not None:
            intent.mappings.append(new_mapping(**common, internal_uri=item.uri, source=SOURCE_URI))
            continue
        data = inline[item.field]
        folder = svc.files.folder(caller, "memory_attachments", mapping_id)
        name = safe_name(item.name, "attachment")
        intent.folders.append(str(folder))
        files.append((folder, name, data))
        intent.mappings.append(new_mapping(
            **common, internal_uri=file_uri(folder / name), source=SOURCE_BASE64,
            sha256=hashlib.sha256(data).hexdigest(),
        ))
    await attachments.begin_intent(svc.db, intent, (app_id, project_id, session_id))
    try:
        for folder, name, data in files:
            await svc.files.write_bytes(folder, name, data)
        status, headers, body = await _forward(request, svc, caller, add_path, raw)
    except BaseException:
        await _undo(svc, intent)
        raise
    if 200 <= status < 300:
        await attachments.commit_intent(svc.db, intent)
        svc.metrics.attachments_recorded(intent.mappings)
    else:
        await _undo(svc, intent)
    return relayed(status, headers, body)


async def _undo(svc: Services, intent: Intent) -> None:
    for folder in intent.folders:
        await svc.files.remove_folder(Path(folder))
    await attachments.abandon_intent(svc.db, intent)


@api(summary="Search memories; results carry the real URIs of matching attachments",
     request=SearchRequest, response=SearchResponse, errors=(403, 502, 503, 504), tag="memories")
async def search(request: Request) -> Response:
    svc, caller, raw, payload = await _checked_body(request)
    status, headers, body = await _forward(
        request, svc, caller, svc.settings.upstream.search_path, raw
    )
    if not 200 <= status < 300:
        return relayed(status, headers, body)
    try:
        answer = jsonio.loads(body)
    except ValueError:
        raise UpstreamBadResponse(
            f"upstream search answer is not JSON (status {status}, {len(body)} bytes)"
        ) from None
    items = find_items(answer)
    kept, found = await _attach(svc, caller, payload, items)
    if request.url.path == "/memories/search":
        results = [result(item, index, found[id(item)]) for index, item in enumerate(kept)]
        out = jsonio.dumps({"results": results, "total": len(results)})
        return Response(out, status_code=status, media_type="application/json")
    for item in kept:
        if isinstance(item.raw, dict):
            item.raw["attachments"] = found[id(item)]
    return Response(jsonio.dumps(answer), status_code=status, media_type="application/json")


async def _attach(
    svc: Services, caller: str, payload: Mapping[str, Any], items: list[FoundItem]
) -> tuple[list[FoundItem], dict[int, list[dict[str, str]]]]:
    """Drop other users' sessions (in place), and find each kept item's attachments."""
    app_id, project_id = _scope(payload, "app_id"), _scope(payload, "project_id")
    session_ids = sorted({sid for item in items if (sid := item.session_id)})
    foreign_scopes, matchers = await svc.attachment_index.lookup(caller, session_ids)
    foreign = [
        item for item in items
        if item.session_id and (*item.scope(app_id, project_id), item.session_id) in foreign_scopes
    ]
    if foreign:
        drop(items, foreign)
        dropped = {id(item) for item in foreign}
        items = [item for item in items if id(item) not in dropped]
    found: dict[int, list[dict[str, str]]] = {}
    for item in items:
        matcher = matchers.get(item.session_id or "", EMPTY)
        found[id(item)] = matcher.attachments_in(item.raw)
    svc.metrics.attachments_matched(sum(len(matched) for matched in found.values()))
    return items, found


routes = [
    *(Route(path, add, methods=["POST"]) for path in ADD_PATHS),
    *(Route(path, search, methods=["POST"]) for path in SEARCH_PATHS),
]
