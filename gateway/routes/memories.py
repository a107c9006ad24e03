"""Add and search interception (SPEC §6, §8, §9), on the gateway's paths and the engine's own.

Add: identity checks, attachments recorded (inline files decoded to disk) around the forward.
Search: forward, then drop other users' sessions and attach the caller's files whose names occur
in each result. Which engine paths are intercepted and how bodies map is the flavour's
(gateway/flavors): for EverOS the client's bytes go upstream unchanged; for other engines the
gateway's own EverOS-shaped bodies become the engine's payloads. `/memories/search` answers the
normalised `{"results", "total"}`; an engine's own search paths keep the engine's shape with an
`attachments` list added to each item, so an engine client works by changing only its base URL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway import jsonio
from gateway.attachments import intents, objects
from gateway.attachments.add_body import (
    AttachmentItem,
    attachment_items,
    decode_inline,
    with_item_uris,
)
from gateway.attachments.fetch_guard import item_uris
from gateway.attachments.files import safe_name
from gateway.attachments.links import URL_ACCESS
from gateway.attachments.uris import check_uris
from gateway.errors import UpstreamBadResponse, UserIdRequired, ValidationFailed
from gateway.identity import acting
from gateway.ids import new_id
from gateway.routes.common import MAX_BODY_DEPTH, api, body_bytes, nesting_exceeds, relayed
from gateway.search import page_scan
from gateway.search.answers import (
    PYTHON_INLINE_BYTES,
    SCANNER_INLINE_BYTES,
    off_loop,
    python_answer,
    scanned_answer,
    session_ids,
)
from gateway.services import Services, request_id, services
from gateway.store.attachments import Intent, new_mapping
from gateway.store.objects import UploadedObject
from gateway.upstream.flavors import ADD, Dialect, Flavor, NativeRoute, flavor_for
from gateway.upstream.flavors import everos_models as models
from gateway.upstream.flavors.base import AddScope, everos_scope
from gateway.upstream.headers import upstream_headers
from gateway.upstream.json_body import JsonBody, json_bytes, json_object, nested_deeper
from gateway.upstream.proxy import TARGET_KEY
from gateway.upstream.routes import ADD as HANDLED_ADD
from gateway.upstream.routes import CUBE, GROUP, EngineRoute, Named, named_in, named_in_json
from gateway.upstream.routes import SEARCH as HANDLED_SEARCH
from gateway.upstream.target import Target

ADD_PATH = "/memories/add"
SEARCH_PATH = "/memories/search"
SOURCE_URI = "memory_add_uri"
SOURCE_BASE64 = "memory_add_base64"
SOURCE_OBJECT = "memory_add_object"
# The gateway's own add and search, under the same identity policy as every engine route.
OWN_ADD = EngineRoute("POST", ADD_PATH, claims=True, handled=HANDLED_ADD, model=models.OWN_ADD)
OWN_SEARCH = EngineRoute("POST", SEARCH_PATH, handled=HANDLED_SEARCH, model=models.OWN_SEARCH)


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


# These document the answer the search path writes straight to bytes (gateway/search/items.py's
# `result`, or the C page scanner): no model is built per request, for speed.
class Attachment(BaseModel):
    type: str
    name: str
    internal_uri: str
    # GET /attachments/{id}/content under server.public_url; absent for a client's own URIs
    # and when no public URL is configured.
    url: str | None = None


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


async def _json_body(request: Request, entry: EngineRoute
                     ) -> tuple[Services, str, bytes, JsonBody, Named]:
    """The body read once as strict JSON, and the identity policy run on it (SPEC §3, §5)."""
    svc = services(request)
    raw = await body_bytes(request)
    data = json_bytes(request.scope["headers"], raw)
    if data is None:
        raise ValidationFailed("the body must be a JSON object", field="body")
    target: Target | None = request.scope.get(TARGET_KEY)
    query = target.query if target else {}
    if nested_deeper(data, MAX_BODY_DEPTH):  # its bytes say so: parsed, unless not JSON at all
        payload = json_object(data)
        if nesting_exceeds(payload, MAX_BODY_DEPTH):
            raise ValidationFailed(f"request body is nested deeper than {MAX_BODY_DEPTH} "
                                   "levels", field="body")
        named, read = named_in(entry, payload, query, {}), JsonBody(data, payload)
    else:
        named, checked = named_in_json(entry, data, query, {})
        assert checked is not None
        read = checked
    caller = await acting.settle_user(request.scope, named, svc.erased_users.is_refused)
    scoped = await svc.rules.check_named(named, caller, claims=entry.claims)
    if entry.scoped and not scoped:
        raise UserIdRequired(field="user_id")
    return svc, caller, raw, read, named


async def _forward(request: Request, svc: Services, caller: str, path: str, raw: bytes,
                   rewritten: dict[str, Any] | None = None
                   ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """POST to the engine: the client's bytes, or the payload the flavour made of them."""
    headers = upstream_headers(request.scope, svc.settings, caller, request_id(request))
    if rewritten is not None:
        raw = jsonio.dumps(rewritten)
        headers = [(k, v) for k, v in headers if k.lower() not in ("content-length",
                                                                    "content-type")]
        headers.append(("Content-Type", "application/json"))
    return await svc.upstream.call("POST", path, headers, raw)


async def _add(request: Request, dialect: Dialect, native: bool, path: str | None,
               entry: EngineRoute = OWN_ADD) -> Response:
    """One add: `native` bodies are the engine's own, else the gateway's EverOS-shaped ones."""
    svc, caller, raw, read, named = await _json_body(request, entry)
    payload = read.fields  # what is read; `read.whole()` where the body is rewritten
    scope: AddScope
    items: list[AttachmentItem]
    if native:
        scope, items = dialect.add_scope(payload), dialect.attachments(payload)
    else:
        scope, items = everos_scope(payload), attachment_items(payload)
    # Object keys the caller signed and uploaded (SPEC §18): 422 unless they are the caller's.
    named_objects = await objects.named_objects(svc.db, svc.files, caller, items)
    others = [item for item in items if item.field not in named_objects]
    check_uris(others, caller, svc.settings.storage)
    await svc.fetch_guard.check(item_uris(others))
    add_path = path or svc.settings.upstream.add_path
    limit = svc.settings.limits.max_inline_file_bytes
    # Validate and decode everything before any work is done (413 / 422, nothing written).
    inline = {item.field: decode_inline(item, limit) for item in items if item.uri is None}
    if entry.claims and named.of(GROUP, CUBE):
        # Sessions are claimed with the add's intent; groups and cubes once the add is valid.
        await svc.rules.claim(named.only(GROUP, CUBE), caller)
    if named_objects:
        payload, items = await _hand_objects(svc, dialect, read.whole(), items, named_objects)
    elif read.lean and (not native or dialect.names_files):
        payload = read.whole()  # the flavour makes the engine's payload of it (`_outgoing`)
    session_id = scope.session_id
    if session_id is None:
        outgoing = _outgoing(dialect, native, payload, caller, items, bool(named_objects))
        await _claim_written(svc, caller, native, add_path, outgoing)
        return relayed(*await _forward(request, svc, caller, add_path, raw, outgoing))
    app_id, project_id = scope.app_id, scope.project_id
    intent = Intent(id=new_id("int"), user_id=caller, kind="memory_add")
    files: list[tuple[str, str, bytes]] = []
    for index, item in enumerate(items):
        mapping_id = new_id("att")
        common = dict(user_id=caller, app_id=app_id, project_id=project_id,
                      session_id=session_id, name=item.name, content_type=item.content_type,
                      mapping_id=mapping_id)
        if item.field in named_objects:  # the stored file, the gateway's own
            obj = named_objects[item.field]
            intent.mappings.append(new_mapping(**common, internal_uri=obj.internal_uri,
                                               source=SOURCE_OBJECT, sha256=obj.sha256))
            continue
        if item.uri is not None:
            intent.mappings.append(new_mapping(**common, internal_uri=item.uri, source=SOURCE_URI))
            continue
        data = inline[item.field]
        folder = svc.files.folder(caller, "memory_attachments", mapping_id)
        name = safe_name(item.name, "attachment")
        internal_uri = svc.files.uri(folder, name)
        intent.folders.append(folder)
        files.append((folder, name, data))
        intent.mappings.append(new_mapping(
            **common, internal_uri=internal_uri, source=SOURCE_BASE64,
            sha256=hashlib.sha256(data).hexdigest(),
        ))
        if svc.links.access == URL_ACCESS:  # an engine off the gateway's disk: a signed link
            url = await svc.links.signed_url(internal_uri, item.name, item.content_type)
            items[index] = replace(item, url=url)
    outgoing = _outgoing(dialect, native, payload, caller, items, bool(named_objects))
    await _claim_written(svc, caller, native, add_path, outgoing)
    async with intents.recorded(svc.db, svc.files, intent, scope.key(), svc.lease) as pending:
        for folder, name, data in files:
            await svc.files.write_bytes(folder, name, data)
        status, headers, body = await _forward(request, svc, caller, add_path, raw, outgoing)
        if 200 <= status < 300:
            await pending.commit()
            svc.metrics.attachments_recorded(intent.mappings)
    return relayed(status, headers, body)


async def _claim_written(svc: Services, caller: str, native: bool, path: str,
                         outgoing: dict[str, Any] | None) -> None:
    """A payload the gateway made for `/memories/add` writes where the engine's model says."""
    if not native and outgoing is not None:
        written = flavor_for(svc.settings).written(path, outgoing)
        await svc.rules.claim_written(written, caller)


def _outgoing(dialect: Dialect, native: bool, payload: dict[str, Any], caller: str,
              items: list[AttachmentItem], rewritten: bool = False) -> dict[str, Any] | None:
    """The engine's payload for an add, or None to forward the client's bytes unchanged
    (never when `rewritten`: the gateway replaced object keys in `payload`)."""
    if native:
        made = dialect.with_file_names(payload, items) if dialect.names_files and items else None
    else:
        made = dialect.add_payload(payload, caller, items)
    return payload if made is None and rewritten else made


async def _hand_objects(svc: Services, dialect: Dialect, payload: dict[str, Any],
                        items: list[AttachmentItem], named_objects: dict[str, UploadedObject]
                        ) -> tuple[dict[str, Any], list[AttachmentItem]]:
    """The add body with each object key replaced by what the engine can read (SPEC §18), and
    the items named and typed as signed."""
    uris: dict[str, str | None] = {}
    handed: dict[str, str | None] = {}  # by object id: one named twice is handed over once
    for item in items:
        if (obj := named_objects.get(item.field)) is not None:
            if obj.id not in handed:
                handed[obj.id] = await objects.for_engine(
                    obj, dialect.sign_path, svc.upstream.call_json, svc.links, svc.db)
            uris[item.field] = handed[obj.id]
    items = [replace(item, name=obj.file_name, content_type=obj.content_type)
             if (obj := named_objects.get(item.field)) is not None else item for item in items]
    return with_item_uris(payload, items, uris), items


async def _search(request: Request, dialect: Dialect, native: bool, path: str | None,
                  entry: EngineRoute = OWN_SEARCH) -> Response:
    svc, caller, raw, read, _ = await _json_body(request, entry)
    payload = read.fields if native else read.whole()
    outgoing = None if native else dialect.search_payload(payload, caller)
    status, headers, body = await _forward(
        request, svc, caller, path or svc.settings.upstream.search_path, raw, outgoing
    )
    if not 200 <= status < 300:
        return relayed(status, headers, body)
    try:
        out, matched = await _answer(svc, caller, dialect, native, body, status, payload)
    except (UnicodeEncodeError, TypeError) as exc:  # a lone surrogate cannot be encoded
        raise UpstreamBadResponse(f"upstream search answer cannot be re-encoded: {exc}") from None
    svc.metrics.attachments_matched(matched)
    return Response(out, status_code=status, media_type="application/json")


async def _answer(svc: Services, caller: str, dialect: Dialect, native: bool, body: bytes,
                  status: int, payload: Mapping[str, Any]) -> tuple[bytes, int]:
    """The answer's bytes with other users' sessions dropped and attachments added (SPEC §9)."""
    # The scanner leaves items whose content is derived (profiles, agent cases) to Python.
    scanner = dialect.page_scan and svc.settings.server.native_search
    size = len(body)
    page = await off_loop(size, SCANNER_INLINE_BYTES, page_scan.scan, body, native
                          ) if scanner else None
    if page is not None:  # the C scanner read it: the same answer, without Python objects
        foreign, matchers = await svc.attachment_index.lookup(caller, sorted(page.sessions),
                                                              python=False)
        out, matched = await off_loop(size, SCANNER_INLINE_BYTES, scanned_answer, page, foreign,
                                      matchers)
    else:
        try:
            answer = await off_loop(size, PYTHON_INLINE_BYTES, jsonio.loads, body)
        except ValueError:
            raise UpstreamBadResponse(
                f"upstream search answer is not JSON (status {status}, {len(body)} bytes)"
            ) from None
        items = dialect.find_items(answer)
        foreign, matchers = await svc.attachment_index.lookup(caller, session_ids(items))
        out, matched = await off_loop(size, PYTHON_INLINE_BYTES, python_answer, answer, items,
                                      native, foreign, matchers)
    return out, matched


class EngineOwnedRoute(Route):
    """An engine's own path: its other methods are the engine's too, so they are proxied; a
    service key may name its user in the route's own user field (gateway/identity/acting.py)."""

    passes_other_methods = True
    names_user_in_body = True


class EngineOwnedSearch(EngineOwnedRoute):
    reads = True  # needs only the `read` scope


class SearchRoute(Route):
    reads = True


def _native(route: NativeRoute) -> Any:
    handle = _add if route.kind == ADD else _search
    path = None if route.follows_config else route.path
    entry = route.entry

    async def endpoint(request: Request) -> Response:
        with services(request).proxy.parsing.held(request.scope):
            return await handle(request, route.dialect, True, path, entry)

    endpoint.__name__ = f"engine_{route.kind}"
    verb = "Add memories" if route.kind == ADD else "Search memories"
    return api(summary=f"{verb} in the engine's own shape ({route.dialect.name}); attachments "
               "recorded / attached as on /memories", errors=(403, 502, 503, 504),
               tag="memories")(endpoint)


def memory_routes(flavor: Flavor) -> list[Route]:
    """`/memories/add|search`, then the flavour's engine-native add and search paths."""
    dialect = flavor.dialect

    @api(summary="Add memories; records the attachments of the session", request=AddRequest,
         errors=(403, 502, 503, 504), tag="memories")
    async def add(request: Request) -> Response:
        # The body is parsed and held until the answer (the parsing budget, SPEC §13).
        with services(request).proxy.parsing.held(request.scope):
            return await _add(request, dialect, False, None)

    @api(summary="Search memories; results carry the real URIs of matching attachments",
         request=SearchRequest, response=SearchResponse, errors=(403, 502, 503, 504),
         tag="memories")
    async def search(request: Request) -> Response:
        with services(request).proxy.parsing.held(request.scope):
            return await _search(request, dialect, False, None)

    return [
        Route(ADD_PATH, add, methods=["POST"]),
        SearchRoute(SEARCH_PATH, search, methods=["POST"]),
        # Matched on the normalised path (no trailing slash); forwarded as the engine spells it.
        *((EngineOwnedRoute if route.kind == ADD else EngineOwnedSearch)(
            route.path.rstrip("/"), _native(route), methods=["POST"]) for route in flavor.native),
    ]
