"""`/files/{token}`: a stored file handed to the engine as a signed, expiring URL (SPEC §15).

No API key: the token is the key to that one file (gateway/attachments/links.py). A token that
is not ours (tampered, made up) is 404; an expired one is 403.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.attachments.files import safe_name
from gateway.errors import NotFound
from gateway.routes.common import api, stream_file
from gateway.services import services

PUBLIC_PREFIXES = ("/files/",)


@api(summary="A stored file handed out as a signed, expiring URL (the token is the key)",
     tag="memories", content_type="application/octet-stream", errors=(403, 503))
async def get_file(request: Request) -> Response:
    svc = services(request)
    grant = svc.links.verify(request.path_params["token"])
    found = await svc.files.open(grant.uri) if svc.files.location(grant.uri) else None
    if found is None:
        raise NotFound("no such file")
    return stream_file(found, grant.content_type, safe_name(grant.name))


routes = [Route("/files/{token}", get_file, methods=["GET"])]
