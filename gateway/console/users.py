"""`/console/users` and a user's page: keys, sessions with their attachments, uploads,
conversations; the user's files (thumbnails for raster images only); export and erase."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.console import guard
from gateway.console.calls import Refused, as_admin, as_user, query_string
from gateway.console.rendering import next_url, page
from gateway.console.thumbnails import raster_type, stored_raster_type
from gateway.errors import NotFound, ValidationFailed
from gateway.identity.auth import validate_user_id
from gateway.services import services
from gateway.store import attachments, audit, user_rows
from gateway.upstream.flavors import flavor_for
from gateway.userdata.export import export_archive, primed

MAPPINGS_SHOWN = 200
# /console/users/{user}/files/{kind}/{id} -> the user route that serves that file's bytes
FILE_ROUTES = {"attachment": "/attachments/{}/content", "resource": "/resources/{}/content"}


def _user(request: Request) -> str:
    try:
        return validate_user_id(request.path_params["user_id"])
    except ValidationFailed:
        raise Refused(404, "no such user") from None


async def list_users(request: Request) -> Response:
    who = await guard.operator(request)
    cursor = request.query_params.get("cursor", "")
    found = (await as_admin(request, who, "GET", "/admin/users",
                            query=query_string(cursor=cursor))).json()
    return page(request, "users.html", who, users=found["items"],
                next_url=next_url(request, found["nextCursor"]))


async def _sessions(request: Request, user: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The user's sessions with their attachments (each marked when it is a raster image), and
    the internal URI of each upload's file."""
    svc = services(request)
    grouped: dict[str, list[dict[str, Any]]] = {}
    uploads: dict[str, str] = {}
    for row in await attachments.user_mappings(svc.db, user, MAPPINGS_SHOWN):
        image = await stored_raster_type(svc.files, row["internal_uri"])
        grouped.setdefault(row["session_id"], []).append({
            "id": row["id"], "name": row["name"], "content_type": row["content_type"],
            "source": row["source"], "image": image is not None})
        if row["resource_id"]:
            uploads[row["resource_id"]] = row["internal_uri"]
    sessions = [{"id": session, "attachments": found} for session, found in grouped.items()]
    return sessions, uploads


async def _conversations(request: Request, who: guard.Operator,
                         user: str) -> list[dict[str, Any]]:
    agents = await as_user(request, who, user, "GET", "/agents", query="limit=50")
    if not agents.ok:
        return []
    found = []
    for agent in agents.json()["agents"]:
        listed = await as_user(request, who, user, "GET",
                               f"/agents/{agent['id']}/conversations", query="limit=50")
        for conversation in listed.json()["conversations"] if listed.ok else []:
            found.append({**conversation, "agentName": agent["name"]})
    return found


async def show_user(request: Request) -> Response:
    who = await guard.operator(request)
    user = _user(request)
    svc = services(request)
    user_keys = (await as_admin(request, who, "GET", "/admin/keys",
                                query=query_string(userId=user))).json()["items"]
    sessions, upload_files = await _sessions(request, user)
    listed = await as_user(request, who, user, "GET", "/resources",
                           query=query_string(cursor=request.query_params.get("cursor", "")))
    uploads: list[dict[str, Any]] = []
    more_uploads = None
    if listed.ok:
        found = listed.json()
        more_uploads = next_url(request, found["next_cursor"])
        for item in found["items"]:
            stored = upload_files.get(item["id"])
            image = stored is not None and await stored_raster_type(svc.files, stored)
            uploads.append({**item, "image": bool(image)})
    shown = sum(len(session["attachments"]) for session in sessions)
    return page(request, "user.html", who, user=user, keys=user_keys, sessions=sessions,
                more_attachments=MAPPINGS_SHOWN if shown >= MAPPINGS_SHOWN else 0,
                uploads=uploads, next_url=more_uploads,
                refused=listed.status == 401,
                conversations=await _conversations(request, who, user))


async def user_file(request: Request) -> Response:
    """A user's file as the console shows it: inline only when its bytes open a PNG, JPEG, WebP
    or GIF (and then as that type); anything else, or `?download=1`, as an attachment."""
    who = await guard.operator(request)
    user = _user(request)
    route = FILE_ROUTES.get(request.path_params["kind"])
    if route is None:
        raise Refused(404, "no such file")
    answer = await as_user(request, who, user, "GET", route.format(request.path_params["file_id"]))
    if not answer.ok:
        raise Refused(404, "no such file")
    image = raster_type(answer.body[:16])
    if image is not None and request.query_params.get("download") != "1":
        return Response(answer.body, media_type=image,
                        headers={"Content-Disposition": "inline"})
    return Response(answer.body, media_type="application/octet-stream",
                    headers={"Content-Disposition": "attachment"})


async def export_user(request: Request) -> Response:
    who, _ = await guard.change(request)
    user = _user(request)
    svc = services(request)
    try:
        await user_rows.require_known(svc.db, user)
    except NotFound:
        raise Refused(404, f"no such user: {user}") from None
    chunks = await primed(export_archive(svc.db, svc.files, svc.upstream,
                                         flavor_for(svc.settings), user))
    await audit.record(svc.db, who.key_id, "console.user_export", user)
    return StreamingResponse(chunks, media_type="application/zip", headers={
        "Content-Disposition": f'attachment; filename="{user}-export.zip"'})


async def confirm_erase(request: Request) -> Response:
    who = await guard.operator(request)
    return page(request, "erase.html", who, user=_user(request), error="")


async def erase_user(request: Request) -> Response:
    who, form = await guard.change(request)
    user = _user(request)
    if str(form.get("confirm_user", "")).strip() != user:
        return page(request, "erase.html", who, status=422, user=user,
                    error="Type the user id exactly to erase this user.")
    erased = (await as_admin(request, who, "DELETE", f"/admin/users/{user}")).json()
    await audit.record(services(request).db, who.key_id, "console.user_erase", user)
    return page(request, "erased.html", who, user=user, erasure=erased)


routes = [
    Route("/console/users", list_users, methods=["GET"]),
    Route("/console/users/{user_id}", show_user, methods=["GET"]),
    Route("/console/users/{user_id}/files/{kind}/{file_id}", user_file, methods=["GET"]),
    Route("/console/users/{user_id}/export", export_user, methods=["POST"]),
    Route("/console/users/{user_id}/erase", confirm_erase, methods=["GET"]),
    Route("/console/users/{user_id}/erase", erase_user, methods=["POST"]),
]
