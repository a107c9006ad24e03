"""The EverOS SDKs' sign routes, served by the gateway itself, and its upload form (SPEC §18).

`POST /api/v2/object/sign` (everos-cloud 1.x) and `POST /api/v1/object/sign` (everos 0.4)
answer in the Cloud's own shapes, with an upload target on the gateway's store; `POST
/uploads/{token}` is that target when files are on disk (no key: the token is the credential).
"""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.attachments import objects
from gateway.attachments.files import safe_name
from gateway.attachments.objects import SignRefused
from gateway.attachments.uploads import receive_upload
from gateway.errors import NotFound, ValidationFailed
from gateway.limits.classes import SIGN_PATHS
from gateway.routes.common import api, body_bytes
from gateway.services import request_id, services, user_id
from gateway.store import objects as object_store
from gateway.upstream.flavors import Flavor
from gateway.upstream.json_body import strict_json

PUBLIC_PREFIXES = ("/uploads/",)


@api(summary="Sign files for upload, in EverOS Cloud's shape (the SDKs' `upload` and "
     "multimodal add); the target is the gateway's own store", tag="memories", errors=(503,))
async def sign(request: Request) -> Response:
    svc = services(request)
    caller = user_id(request)
    rid = request_id(request)
    try:
        try:
            body = strict_json(request.scope["headers"], await body_bytes(request))
        except ValidationFailed as exc:
            raise SignRefused(objects.STATUS_INVALID, str(exc)) from None
        items = objects.parse_sign_body(body)
    except SignRefused as refused:
        # The Cloud's answer to a body it refuses: 200, a business status, the message as
        # data for validation failures (everos_cloud/models/sign_envelope.py).
        data = str(refused) if refused.status == objects.STATUS_INVALID else None
        return JSONResponse(objects.envelope(refused.status, str(refused), data, rid))
    made = [objects.new_object(caller, item, svc.files, svc.settings.uploads) for item in items]
    tokens: list[str | None] = []
    answered = []
    base = (svc.links.public_url or str(request.base_url)).rstrip("/")
    for obj in made:
        presigned = await svc.files.presigned_post(
            obj.internal_uri, obj.content_type, obj.max_size, svc.settings.uploads.sign_ttl_s)
        if presigned is not None:
            url, fields = presigned
            tokens.append(None)
        else:
            token = secrets.token_urlsafe(32)
            url, fields = f"{base}/uploads/{token}", objects.form_fields(
                obj, token, svc.links.secret())
            tokens.append(token)
        answered.append(objects.signed_item(obj, url, fields))
    await object_store.insert(svc.db, made, tokens)
    return JSONResponse(objects.envelope(objects.STATUS_OK, "OK", {"objectList": answered}, rid))


@api(summary="Upload a signed file: the signed form fields, then `file` (the token "
     "is the credential; single use, expiring)", tag="memories", status=204,
     errors=(403, 413, 422))
async def upload(request: Request) -> Response:
    svc = services(request)
    token = request.path_params["token"]
    obj = await object_store.claim_form(svc.db, token)
    if obj is None:
        raise NotFound("no open upload form has this token (unknown, used or expired)")
    secret = svc.links.secret()

    def check(fields: dict[str, str], part_type: str) -> None:
        objects.check_form(obj, token, secret, fields, part_type)

    folder = svc.files.folder_of(obj.internal_uri)
    assert folder is not None
    try:
        received = await receive_upload(
            request.scope, request.receive, svc.files, folder, obj.max_size, on_file=check,
            name=safe_name(obj.file_name, "file"))
    except BaseException:
        await object_store.release_form(svc.db, obj.id)
        raise
    stored = received.stored
    await object_store.mark_uploaded(svc.db, obj.user_id, obj.id, stored.uri, stored.size,
                                     stored.sha256)
    return Response(status_code=204)


def upload_routes(flavor: Flavor) -> list[Route]:
    """The sign routes for flavours whose SDKs use them, and the upload form."""
    signing = [Route(path, sign, methods=["POST"]) for path in SIGN_PATHS] \
        if flavor.signs_files else []
    return [*signing, Route("/uploads/{token}", upload, methods=["POST"])]
