"""Add interception (SPEC §6, §8), and the memory routes on the gateway's paths and the engine's.

Add: identity checks, attachments recorded (inline files decoded to disk) around the forward.
Search is gateway/routes/search.py's. Which engine paths are intercepted and how bodies map is
the flavour's (gateway/flavors): for EverOS the client's bytes go upstream unchanged; for other
engines the gateway's own EverOS-shaped bodies become the engine's payloads. An engine's own
paths keep the engine's shape, so an engine client works by changing only its base URL.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

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
from gateway.errors import UpstreamRefused
from gateway.routes.common import api, body_bytes, relayed
from gateway.routes.engine_call import checked_json, forward
from gateway.routes.search import search_endpoint
from gateway.services import Services, services
from gateway.store.attachments import Intent, new_mapping
from gateway.store.ids import new_id
from gateway.store.objects import UploadedObject
from gateway.upstream.flavors import ADD, Dialect, Flavor, NativeRoute, flavor_for
from gateway.upstream.flavors import everos_models as models
from gateway.upstream.flavors.base import AddScope, everos_scope
from gateway.upstream.routes import ADD as HANDLED_ADD
from gateway.upstream.routes import CUBE, GROUP, EngineRoute
from gateway.upstream.routes import SEARCH as HANDLED_SEARCH

ADD_PATH = "/memories/add"
SEARCH_PATH = "/memories/search"
SOURCE_URI = "memory_add_uri"
SOURCE_BASE64 = "memory_add_base64"
SOURCE_OBJECT = "memory_add_object"
# The gateway's own add and search, under the same identity policy as every engine route.
OWN_ADD = EngineRoute("POST", ADD_PATH, claims=True, handled=HANDLED_ADD, model=models.OWN_ADD)
OWN_SEARCH = EngineRoute("POST", SEARCH_PATH, handled=HANDLED_SEARCH, model=models.OWN_SEARCH)


async def _add(request: Request, dialect: Dialect, native: bool, path: str | None,
               entry: EngineRoute = OWN_ADD) -> Response:
    """One add: `native` bodies are the engine's own, else the gateway's EverOS-shaped ones."""
    svc = services(request)
    raw = await body_bytes(request)
    caller, read, named = await checked_json(svc, request.scope, raw, entry)
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
    elif read.lean and (dialect.names_files if native else not dialect.adds_as_sent):
        payload = read.whole()  # the flavour makes the engine's payload of it (`_outgoing`)
    session_id = scope.session_id
    if session_id is None:
        outgoing = _outgoing(dialect, native, payload, caller, items, bool(named_objects))
        await _claim_written(svc, caller, native, add_path, outgoing)
        return _answered(native, *await forward(request.scope, svc, caller, add_path, raw,
                                                outgoing))
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
    if not intent.mappings:
        # Nothing to keep once the engine answers (no file, no mapping): the session's claim is
        # all an intent would record, and one already the caller's needs no write at all.
        await svc.rules.claim_once(caller, app_id, project_id, session_id)
        return relayed(*await forward(request.scope, svc, caller, add_path, raw, outgoing))
    async with intents.recorded(svc.db, svc.files, intent, scope.key(), svc.lease) as pending:
        for folder, name, data in files:
            await svc.files.write_bytes(folder, name, data)
        status, headers, body = await forward(request.scope, svc, caller, add_path, raw, outgoing)
        if 200 <= status < 300:
            await pending.commit()
            svc.metrics.attachments_recorded(intent.mappings)
    return _answered(native, status, headers, body)


def _answered(native: bool, status: int, headers: list[tuple[bytes, bytes]],
              body: bytes) -> Response:
    """The engine's answer: passed back on its own path; on `/memories/add` a refusal is
    answered in the gateway's shape (SPEC §4)."""
    if not native and not 200 <= status < 300:
        raise UpstreamRefused.of(status, body)
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


class EngineOwnedRoute(Route):
    """An engine's own path: its other methods are the engine's too, so they are proxied; a
    service key may name its user in the route's own user field (gateway/identity/acting.py)."""

    passes_other_methods = True
    names_user_in_body = True


class EngineOwnedSearch(EngineOwnedRoute):
    reads = True  # needs only the `read` scope


class SearchRoute(Route):
    reads = True


def _native_add(route: NativeRoute) -> Any:
    path = None if route.follows_config else route.path
    entry = route.entry

    async def endpoint(request: Request) -> Response:
        with services(request).proxy.parsing.held(request.scope):
            return await _add(request, route.dialect, True, path, entry)

    endpoint.__name__ = "engine_add"
    return api(summary=f"Add memories in the engine's own shape ({route.dialect.name}); "
               "attachments recorded as on /memories", errors=(403, 502, 503, 504),
               tag="memories")(endpoint)


def _native(route: NativeRoute) -> Route:
    """An engine's own add or search path, matched without a trailing slash and forwarded as
    the engine spells it."""
    path = route.path.rstrip("/")
    if route.kind == ADD:
        return EngineOwnedRoute(path, _native_add(route), methods=["POST"])
    search = search_endpoint(
        route.dialect, True, None if route.follows_config else route.path, route.entry,
        f"Search memories in the engine's own shape ({route.dialect.name}); attachments "
        "attached as on /memories")
    return EngineOwnedSearch(path, search, methods=["POST"])


def memory_routes(flavor: Flavor) -> list[Route]:
    """`/memories/add|search`, then the flavour's engine-native add and search paths."""
    dialect = flavor.dialect

    @api(summary="Add memories; records the attachments of the session", request=models.OwnAddBody,
         errors=(403, 502, 503, 504), tag="memories")
    async def add(request: Request) -> Response:
        # The body is parsed and held until the answer (the parsing budget, SPEC §13).
        with services(request).proxy.parsing.held(request.scope):
            return await _add(request, dialect, False, None)

    search = search_endpoint(dialect, False, None, OWN_SEARCH, "Search memories; results carry "
                             "the real URIs of matching attachments")
    return [
        Route(ADD_PATH, add, methods=["POST"]),
        SearchRoute(SEARCH_PATH, search, methods=["POST"]),
        *(_native(route) for route in flavor.native),
    ]
