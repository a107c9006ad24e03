"""`/resources`: files kept on the gateway's storage and ingested into the engine (SPEC §7)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.attachments import intents
from gateway.attachments.add_body import OCTET_STREAM, guess_type
from gateway.attachments.files import safe_name
from gateway.attachments.uploads import receive_upload, upload_name
from gateway.errors import NotFound, UpstreamRefused, ValidationFailed
from gateway.routes.common import api, json_response, query_params, stream_file
from gateway.services import Services, services, user_id
from gateway.store import resources
from gateway.store.attachments import Intent
from gateway.store.cursors import decode_cursor, keyset_page
from gateway.store.ids import new_id, now_ms
from gateway.store.resources import Resource
from gateway.upstream.flavors import AddScope, flavor_for

MAX_SCOPE_CHARS = 128


# Not the Resource row: the API shows a resource:// URI and an ISO time, never the file's path.
class ResourceOut(BaseModel):
    id: str
    uri: str
    name: str
    content_type: str
    size: int
    sha256: str
    session_id: str
    created_at: str
    metadata: dict[str, Any]


class ResourcePage(BaseModel):
    items: list[ResourceOut]
    next_cursor: str | None


class ResourceListQuery(BaseModel):
    limit: int = Field(50, ge=1, le=200)
    cursor: str | None = None


class UploadForm(BaseModel):
    """multipart/form-data: `file` (required), `name`, `metadata` (JSON object), app/project."""

    file: bytes
    name: str | None = None
    metadata: str | None = None
    app_id: str | None = None
    project_id: str | None = None


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


def resource_out(resource: Resource) -> ResourceOut:
    return ResourceOut(
        id=resource.id,
        uri=f"resource://{resource.id}",
        name=resource.name,
        content_type=resource.content_type,
        size=resource.size,
        sha256=resource.sha256,
        session_id=resource.session_id,
        created_at=iso(resource.created_at),
        metadata=resource.metadata,
    )


def _form_scope(fields: dict[str, str], key: str) -> str:
    value = fields.get(key, "").strip() or "default"
    if len(value) > MAX_SCOPE_CHARS:
        raise ValidationFailed(f"{key}: at most {MAX_SCOPE_CHARS} characters", field=key)
    return value


def _form_metadata(fields: dict[str, str]) -> dict[str, Any]:
    raw = fields.get("metadata")
    if raw is None or not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        raise ValidationFailed("metadata: not valid JSON", field="metadata") from None
    if not isinstance(parsed, dict):
        raise ValidationFailed("metadata: must be a JSON object", field="metadata")
    return parsed


@api(summary="Upload a file", request=UploadForm, response=ResourceOut, status=201,
     also=(200,), errors=(502, 503, 504), content_type="multipart/form-data", tag="resources")
async def upload(request: Request) -> Response:
    svc = services(request)
    db = svc.db
    caller = user_id(request)
    resource_id = new_id("res")
    folder = svc.files.folder(caller, "resources", resource_id)
    received = await receive_upload(
        request.scope, request.receive, svc.files, folder, svc.settings.limits.max_upload_bytes
    )
    try:
        fields = received.fields
        display = upload_name(fields, received.filename)
        metadata = _form_metadata(fields)
        app_id, project_id = _form_scope(fields, "app_id"), _form_scope(fields, "project_id")
        duplicate = await resources.find_same(db, caller, received.stored.sha256, display)
    except BaseException:
        await svc.files.remove_folder(folder)
        raise
    if duplicate is not None:
        await svc.files.remove_folder(folder)
        await resources.ensure_mapping(db, duplicate)
        return json_response(resource_out(duplicate), 200)
    content_type = received.content_type.split(";")[0].strip().lower()
    if not content_type or content_type == OCTET_STREAM:
        content_type = guess_type(display) or OCTET_STREAM
    name_on_disk = safe_name(display)
    session_id = f"resource:{caller}:{resource_id}"
    resource = Resource(
        id=resource_id, user_id=caller, name=display, safe_name=name_on_disk,
        content_type=content_type, size=received.stored.size, sha256=received.stored.sha256,
        app_id=app_id, project_id=project_id, session_id=session_id,
        internal_uri=svc.files.uri(folder, name_on_disk), metadata=metadata, created_at=now_ms(),
    )
    intent = Intent(
        id=new_id("int"), user_id=caller, kind="resource_upload",
        mappings=[resources.mapping_of(resource)],
        folders=[folder],
        resource=resources.row_values(resource),
    )
    try:
        await svc.files.rename(received.stored, name_on_disk)
    except BaseException:
        await svc.files.remove_folder(folder)
        raise
    session = (app_id, project_id, session_id)
    async with intents.recorded(db, svc.files, intent, session, svc.lease) as pending:
        await _ingest(svc, resource)
        await pending.commit()
        svc.metrics.attachments_recorded(intent.mappings)
    return json_response(resource_out(resource), 201)


async def _ingest(svc: Services, resource: Resource) -> None:
    """Add the file's message to the engine and flush it; an engine refusal raises."""
    flavor = flavor_for(svc.settings)
    calls = flavor.ingest_calls(
        svc.settings.upstream, resource.user_id,
        AddScope(resource.app_id, resource.project_id, resource.session_id),
        name=resource.name, content_type=resource.content_type,
        engine_uri=await svc.links.for_engine(resource.internal_uri, resource.name,
                                              resource.content_type),
        flush=svc.settings.resources.flush_after_ingest,
    )
    for path, payload in calls:
        await svc.rules.claim_written(flavor.written(path, payload), resource.user_id)
        status, _, body = await svc.upstream.call_json(path, payload, resource.user_id)
        if not 200 <= status < 300:  # the gateway's own route: its own shape (SPEC §4)
            raise UpstreamRefused.of(status, body)


@api(summary="List your resources, newest first", query=ResourceListQuery, response=ResourcePage,
     tag="resources")
async def list_resources(request: Request) -> Response:
    query = query_params(request, ResourceListQuery)
    before = decode_cursor(query.cursor, "cursor") if query.cursor else None
    found = await resources.page(services(request).db, user_id(request), query.limit + 1, before)
    rows, next_cursor = keyset_page(found, query.limit, lambda row: (row.created_at, row.id))
    return json_response(ResourcePage(items=[resource_out(r) for r in rows],
                                      next_cursor=next_cursor))


async def _owned(request: Request) -> Resource:
    found = await resources.get(
        services(request).db, user_id(request), request.path_params["resource_id"]
    )
    if found is None:
        raise NotFound("no such resource")
    return found


@api(summary="One resource", response=ResourceOut, tag="resources")
async def get_resource(request: Request) -> Response:
    return json_response(resource_out(await _owned(request)))


@api(summary="The resource's bytes, with its content type", tag="resources",
     content_type="application/octet-stream")
async def get_content(request: Request) -> Response:
    resource = await _owned(request)
    found = await services(request).files.open(resource.internal_uri)
    if found is None:
        raise NotFound("the resource's file is missing from storage")
    return stream_file(found, resource.content_type, resource.safe_name)


@api(summary="Delete a resource, its mappings and its file", status=204, tag="resources")
async def delete_resource(request: Request) -> Response:
    svc = services(request)
    resource = await _owned(request)
    if not await resources.mark_deleted(svc.db, resource.user_id, resource.id):
        raise NotFound("no such resource")
    folder = svc.files.folder_of(resource.internal_uri)
    if folder is not None:
        await svc.files.remove_folder(folder)
    return Response(status_code=204)


routes = [
    Route("/resources", upload, methods=["POST"]),
    Route("/resources", list_resources, methods=["GET"]),
    Route("/resources/{resource_id}", get_resource, methods=["GET"]),
    Route("/resources/{resource_id}", delete_resource, methods=["DELETE"]),
    Route("/resources/{resource_id}/content", get_content, methods=["GET"]),
]
