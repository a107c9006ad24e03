"""A user's data (SPEC §17): `DELETE /admin/users/{user_id}` erases it,
`GET /admin/users/{user_id}/export` and `GET /me/export` hand it over as a zip."""

from __future__ import annotations

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.errors import Forbidden
from gateway.identity.auth import validate_user_id
from gateway.identity.principal import READ, Principal, request_principal, require_admin
from gateway.routes.common import api, json_response
from gateway.services import Services, services
from gateway.store import audit, user_rows
from gateway.upstream.flavors import flavor_for
from gateway.userdata.erasure import answer
from gateway.userdata.export import export_archive, primed


class EngineErasure(BaseModel):
    erased: bool  # the engine deleted the user's memories through its own delete routes
    remaining: list[str]  # sessions left upstream where the engine serves no delete


class ErasureOut(BaseModel):
    userId: str  # noqa: N815 - the admin API speaks camelCase
    status: str
    counts: dict[str, int]
    engine: EngineErasure


def _admin_target(request: Request) -> tuple[Principal, str]:
    """(the admin, the user the path names): admin keys only, the id checked like any user id."""
    return require_admin(request.scope), validate_user_id(request.path_params["user_id"])


@api(summary="Erase a user: credentials, rows, files and the engine's memories",
     response=ErasureOut, tag="admin", errors=(404, 502))
async def erase_user(request: Request) -> Response:
    admin, user_id = _admin_target(request)
    erasure = await services(request).eraser.erase(user_id, admin.credential_id)
    return json_response(answer(user_id, erasure))


async def _archive(svc: Services, user_id: str, credential_id: str) -> Response:
    """The user's zip, streamed; the export is audited once its first bytes are ready."""
    chunks = await primed(export_archive(svc.db, svc.files, svc.upstream,
                                         flavor_for(svc.settings), user_id))
    await audit.record(svc.db, credential_id, "users.export", user_id)
    return StreamingResponse(chunks, media_type="application/zip", headers={
        "Content-Disposition": f'attachment; filename="{user_id}-export.zip"'})


@api(summary="Everything the gateway holds for a user, as a zip", tag="admin",
     content_type="application/zip", errors=(404,))
async def export_user(request: Request) -> Response:
    admin, user_id = _admin_target(request)
    svc = services(request)
    await user_rows.require_known(svc.db, user_id)
    return await _archive(svc, user_id, admin.credential_id)


@api(summary="Everything the gateway holds for you, as a zip", tag="user data",
     content_type="application/zip", errors=(403,))
async def export_mine(request: Request) -> Response:
    principal = request_principal(request.scope)
    if not principal.allows(READ):
        raise Forbidden("this credential may not read", code="insufficient_scope")
    return await _archive(services(request), validate_user_id(principal.user_id),
                          principal.credential_id)


routes = [
    Route("/admin/users/{user_id}", erase_user, methods=["DELETE"]),
    Route("/admin/users/{user_id}/export", export_user, methods=["GET"]),
    Route("/me/export", export_mine, methods=["GET"]),
]
