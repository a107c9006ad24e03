"""`/attachments/{id}/content`: the owner downloads a file the gateway stores (SPEC §9)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.attachments.files import safe_name
from gateway.errors import NotFound
from gateway.routes.common import api, stream_file
from gateway.services import services, user_id
from gateway.store import attachments


@api(summary="An attachment's bytes (uploads and inline files; your own only)",
     tag="memories", content_type="application/octet-stream", errors=(503,))
async def get_content(request: Request) -> Response:
    svc = services(request)
    mapping = await attachments.stored_mapping(
        svc.db, user_id(request), request.path_params["attachment_id"])
    found = None if mapping is None else await svc.files.open(mapping.internal_uri)
    if mapping is None or found is None:
        raise NotFound("no such attachment")
    return stream_file(found, mapping.content_type, safe_name(mapping.name))


routes = [Route("/attachments/{attachment_id}/content", get_content, methods=["GET"])]
