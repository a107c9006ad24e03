"""Files the engines' SDKs upload by signing first (SPEC §18): sign, the upload form, and what
an add naming an object key hands the engine.

Signing records an object of the caller's, whose key (`mgw-object/{id}/{name}`, the id random
and unguessable) names a file of theirs under `{user}/memory_attachments/{id}/`. The upload target
is the gateway's own form (`POST /uploads/{token}`: the signed fields, then the file; size and
type checked while the body streams; expiring; single use), or with files on S3 a real S3
presigned POST for that key. An add whose item `uri` is an object key of the caller's names the
stored file; the engine gets its file:// URI, a signed URL, or for EverOS Cloud the Cloud's own
object key after the gateway has signed and uploaded the file through the Cloud.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import mimetypes
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from gateway.attachments.add_body import AttachmentItem
from gateway.attachments.files import FileStore, safe_name
from gateway.attachments.links import FileLinks
from gateway.config import UploadsSettings
from gateway.errors import Forbidden, UpstreamBadResponse, UpstreamUnavailable, ValidationFailed
from gateway.store import objects as object_store
from gateway.store.database import Database
from gateway.store.ids import now_ms
from gateway.store.objects import UploadedObject

KEY_PREFIX = "mgw-object/"
FILE_TYPES = ("image", "file", "video")
MAX_OBJECTS = 50  # per sign request, as the Cloud allows
# The Cloud's business statuses on its sign route (everos_cloud/models/sign_request.py).
STATUS_OK, STATUS_INVALID, STATUS_TOO_MANY, STATUS_DUPLICATE = 0, 2018, 1007, 1009
SIGNATURE_FIELD = "x-mgw-signature"
POLICY_CONTEXT = b"memory-gateway upload policy v1\n"
ENGINE_UPLOAD_TIMEOUT_S = 120.0
# A POST of a JSON payload the gateway built to the engine, for a user: (status, headers, body)
# (UpstreamClient.call_json).
EngineCall = Callable[[str, Any, str], Awaitable[tuple[int, list[tuple[bytes, bytes]], bytes]]]


class ObjectKeyNotFound(ValidationFailed):
    code = "object_key_not_found"
    default_message = "no uploaded object of yours has this key"


class UploadFormUsed(Forbidden):
    code = "upload_form_used"
    default_message = "this upload form has expired or was used already"


class SignRefused(ValueError):
    """A sign body the Cloud would refuse: its business status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class SignItem:
    file_id: str
    file_name: str
    file_type: str


def is_object_key(uri: str | None) -> bool:
    return uri is not None and uri.startswith(KEY_PREFIX)


def parse_sign_body(body: Any) -> list[SignItem]:
    """The Cloud's `SignRequest` (`objectList` of 1..50 `{fileId, fileName, fileType}`, unique
    file ids); SignRefused with the status the Cloud answers otherwise."""
    if not isinstance(body, Mapping):
        raise SignRefused(STATUS_INVALID, "the body must be a JSON object")
    listed = body.get("objectList")
    if not isinstance(listed, list) or not listed:
        raise SignRefused(STATUS_INVALID, "objectList: required, a list of 1 to 50 objects")
    if len(listed) > MAX_OBJECTS:
        raise SignRefused(STATUS_TOO_MANY, f"objectList: at most {MAX_OBJECTS} objects")
    items: list[SignItem] = []
    for index, entry in enumerate(listed):
        where = f"objectList[{index}]"
        if not isinstance(entry, Mapping):
            raise SignRefused(STATUS_INVALID, f"{where}: must be an object")
        for key in ("fileId", "fileName", "fileType"):
            value = entry.get(key)
            if not isinstance(value, str) or not value.strip():
                raise SignRefused(STATUS_INVALID, f"{where}.{key}: required, a non-empty string")
        if entry["fileType"] not in FILE_TYPES:
            raise SignRefused(STATUS_INVALID,
                              f"{where}.fileType: must be one of {', '.join(FILE_TYPES)}")
        items.append(SignItem(entry["fileId"], entry["fileName"].replace("\x00", ""),
                              entry["fileType"]))
    if len({item.file_id for item in items}) != len(items):
        raise SignRefused(STATUS_DUPLICATE, "objectList: every fileId must be unique")
    for index, item in enumerate(items):
        if not content_type_fits(item.file_type, content_type_of(item.file_name)):
            raise SignRefused(STATUS_INVALID, f"objectList[{index}].fileName: "
                              f"{item.file_name!r} does not name a {item.file_type}")
    return items


def envelope(status: int, error: str, data: Any, request_id: str) -> dict[str, Any]:
    """The Cloud's sign answer (everos_cloud/models/sign_envelope.py)."""
    return {"status": status, "error": error, "request_id": request_id,
            "result": {"data": data}}


def content_type_of(name: str) -> str:
    return mimetypes.guess_type(name, strict=False)[0] or "application/octet-stream"


def content_type_fits(file_type: str, content_type: str) -> bool:
    """An image must be an image/*, a video a video/*; a `file` may be anything."""
    if file_type == "image":
        return content_type.startswith("image/")
    if file_type == "video":
        return content_type.startswith("video/")
    return True


def max_size(settings: UploadsSettings, file_type: str) -> int:
    return {"image": settings.max_image_bytes, "file": settings.max_file_bytes,
            "video": settings.max_video_bytes}[file_type]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def policy_document(obj: UploadedObject) -> str:
    """The form's policy, as an S3 POST policy reads (base64 of its JSON)."""
    expiration = datetime.fromtimestamp(obj.upload_expires_at_ms / 1000, UTC)
    return _b64(json.dumps({
        "expiration": expiration.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "conditions": [{"key": obj.object_key}, {"Content-Type": obj.content_type},
                       ["content-length-range", 0, obj.max_size]],
    }, separators=(",", ":")).encode())


def policy_signature(secret: bytes, token: str, policy: str) -> str:
    return hmac.new(secret, POLICY_CONTEXT + token.encode() + b"\n" + policy.encode(),
                    hashlib.sha256).hexdigest()


def form_fields(obj: UploadedObject, token: str, secret: bytes) -> dict[str, str]:
    """The fields an SDK posts back with the file (it sends them as given, then `file`)."""
    policy = policy_document(obj)
    return {"key": obj.object_key, "Content-Type": obj.content_type, "policy": policy,
            SIGNATURE_FIELD: policy_signature(secret, token, policy)}


def check_form(obj: UploadedObject, token: str, secret: bytes, fields: Mapping[str, str],
               part_type: str) -> None:
    """Before the file's first byte is stored: the signed fields came back unchanged and the
    file is of the signed type (422 otherwise)."""
    expected = form_fields(obj, token, secret)
    for key, value in expected.items():
        sent = fields.get(key)
        if sent is None or not hmac.compare_digest(sent.encode(), value.encode()):
            raise ValidationFailed(f"form field {key!r} is missing or not the signed value",
                                   field=key)
    declared = part_type.split(";")[0].strip().lower() or obj.content_type
    if not content_type_fits(obj.file_type, declared) or (
            obj.file_type != "file" and declared.split("/")[0] != obj.content_type.split("/")[0]):
        raise ValidationFailed(f"the file is {declared}, the form was signed for a "
                               f"{obj.file_type} ({obj.content_type})", field="file")


def new_object(user_id: str, item: SignItem, files: FileStore, settings: UploadsSettings
               ) -> UploadedObject:
    object_id = f"obj_{secrets.token_hex(16)}"
    name = safe_name(item.file_name, "file")
    folder = files.folder(user_id, "memory_attachments", object_id)
    now = now_ms()
    return UploadedObject(
        id=object_id, user_id=user_id, object_key=f"{KEY_PREFIX}{object_id}/{name}",
        file_id=item.file_id, file_name=item.file_name, file_type=item.file_type,
        content_type=content_type_of(item.file_name), max_size=max_size(settings, item.file_type),
        internal_uri=files.uri(folder, name), state=object_store.SIGNED, size=None, sha256=None,
        engine_key=None, signed_at_ms=now, upload_expires_at_ms=now + settings.sign_ttl_s * 1000,
        expires_at_ms=now + settings.object_ttl_s * 1000,
    )


def signed_item(obj: UploadedObject, url: str, fields: dict[str, str]) -> dict[str, Any]:
    """One `SignResponseItem` (everos_cloud/models/sign_response_item.py)."""
    return {"fileId": obj.file_id, "fileName": obj.file_name, "fileType": obj.file_type,
            "objectKey": obj.object_key,
            "objectSignedInfo": {"url": url, "fields": fields, "maxSize": obj.max_size}}


# --- an add naming object keys ---------------------------------------------------------------


async def named_objects(db: Database, files: FileStore, user_id: str,
                        items: list[AttachmentItem]) -> dict[str, UploadedObject]:
    """The caller's uploaded object behind every item whose `uri` is an object key, by field.

    Another user's key, an unknown or expired one, or one nothing was uploaded for → 422.
    """
    found: dict[str, UploadedObject] = {}
    now = now_ms()
    for item in items:
        if not is_object_key(item.uri) or not item.field.endswith(".uri"):
            continue
        assert item.uri is not None
        obj = await object_store.by_key(db, user_id, item.uri)
        if obj is None or obj.expires_at_ms <= now:
            raise ObjectKeyNotFound(f"{item.field}: no uploaded object of yours has this key "
                                    "(unknown, another user's, or expired)", field=item.field)
        if obj.state != object_store.UPLOADED:
            obj = await _uploaded_to_store(db, files, obj, item.field)
        found[item.field] = obj
    return found


async def _uploaded_to_store(db: Database, files: FileStore, obj: UploadedObject, field: str
                             ) -> UploadedObject:
    """An object uploaded by S3 presigned POST: the gateway learns of it at the add."""
    stat = await files.stat(obj.internal_uri)
    if stat is None:
        raise ObjectKeyNotFound(f"{field}: nothing was uploaded for this object key",
                                field=field)
    size, content_type = stat
    if size > obj.max_size or not content_type_fits(obj.file_type, content_type):
        raise ObjectKeyNotFound(f"{field}: the uploaded object breaks its signed policy",
                                field=field)
    await object_store.mark_uploaded(db, obj.user_id, obj.id, obj.internal_uri, size, None)
    return UploadedObject(**{**obj.__dict__, "state": object_store.UPLOADED, "size": size})


async def _multipart(fields: Mapping[str, str], name: str, content_type: str,
                     chunks: AsyncIterator[bytes], boundary: str) -> AsyncIterator[bytes]:
    for key, value in fields.items():
        yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{key}\"\r\n\r\n"
               f"{value}\r\n").encode()
    quoted = name.replace("\\", "_").replace('"', "_")
    yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
           f"filename=\"{quoted}\"\r\nContent-Type: {content_type}\r\n\r\n").encode()
    async for chunk in chunks:
        yield chunk
    yield f"\r\n--{boundary}--\r\n".encode()


async def post_form(url: str, fields: Mapping[str, str], name: str, content_type: str,
                    files: FileStore, uri: str) -> int:
    """POST a presigned form with the stored file streamed as its last part; the status."""
    download = await files.open(uri)
    if download is None:
        raise UpstreamBadResponse("the stored object vanished before it reached the engine")
    boundary = secrets.token_hex(16)
    body = _multipart(fields, name, content_type, download.chunks, boundary)
    try:
        async with httpx.AsyncClient(timeout=ENGINE_UPLOAD_TIMEOUT_S) as client:
            response = await client.post(url, content=body, headers={
                "Content-Type": f"multipart/form-data; boundary={boundary}"})
    except httpx.TransportError as exc:
        raise UpstreamUnavailable(f"the engine's upload target is unreachable: {exc}") from exc
    return response.status_code


def engine_signed(answer: Any) -> tuple[str, str, dict[str, str]]:
    """(objectKey, url, fields) of the first item of the engine's own sign answer."""
    try:
        if answer["status"] != STATUS_OK:
            raise UpstreamBadResponse(f"the engine refused to sign an upload: "
                                      f"{answer.get('error')!r} (status {answer['status']})")
        item = answer["result"]["data"]["objectList"][0]
        info = item["objectSignedInfo"]
        key, url, fields = item["objectKey"], info["url"], dict(info.get("fields") or {})
    except (KeyError, IndexError, TypeError) as exc:
        raise UpstreamBadResponse(f"the engine's sign answer lacks {exc}") from None
    if not all(isinstance(v, str) for v in (key, url, *fields.keys(), *fields.values())):
        raise UpstreamBadResponse("the engine's sign answer holds non-string values")
    return key, url, fields


async def for_engine(obj: UploadedObject, sign_path: str | None, call_engine: EngineCall,
                     links: FileLinks, db: Database) -> str | None:
    """What the engine is handed for an object: the engine's own object key (signed and
    uploaded through the engine's sign route, with the engine's key, once), or the stored
    file's URI or signed URL (None: the engine gets the file's name only)."""
    if sign_path is None:
        return await links.for_engine(obj.internal_uri, obj.file_name, obj.content_type)
    if obj.engine_key is not None:
        return obj.engine_key
    request = {"objectList": [{"fileId": obj.id, "fileName": obj.file_name,
                               "fileType": obj.file_type}]}
    status, _, raw = await call_engine(sign_path, request, obj.user_id)
    try:
        answer = json.loads(raw)
    except ValueError:
        answer = None
    if not 200 <= status < 300 or not isinstance(answer, Mapping):
        raise UpstreamBadResponse(f"the engine's sign route answered {status}")
    key, url, fields = engine_signed(answer)
    uploaded = await post_form(url, fields, obj.file_name, obj.content_type, links.files,
                               obj.internal_uri)
    if uploaded not in (200, 201, 204):
        raise UpstreamBadResponse(f"the engine's upload target answered {uploaded}")
    await object_store.remember_engine_key(db, obj.user_id, obj.id, key)
    return key
