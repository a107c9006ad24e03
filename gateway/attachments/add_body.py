"""What an add body carries as attachments (SPEC §8): pure parsing of message content items.

Understands EverOS items (`uri` / `base64` / `name` / `ext`), OpenAI-style `image_url` parts
(a `data:` URL counts as base64) and `file` parts (`file_data`, `filename`). A `uri` that is itself
a `data:` URL is treated as inline data, so no mapping ever holds a payload as its URI.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urlsplit

from gateway.attachments.files import last_segment
from gateway.errors import PayloadTooLarge, ValidationFailed

OCTET_STREAM = "application/octet-stream"
_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[^;,]*)*?),(?P<data>.*)",
                       re.DOTALL)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


# Where an item sits in its message (AttachmentItem.part): an index into a content list, or
WHOLE_CONTENT = -1  # the message's content is the part itself (a single dict)
WHOLE_MESSAGE = -2  # the message is the part (MemOS "pure input" items, no role)


@dataclass(frozen=True)
class AttachmentItem:
    field: str  # where its uri or payload sits in the body, e.g. "messages[0].content[1].uri"
    name: str
    content_type: str
    uri: str | None = None
    base64: str | None = None  # encoded payload, when the item carries the file inline
    message: int = 0  # index of its message in `messages`
    part: int = 0  # index in the message's content list, or WHOLE_CONTENT / WHOLE_MESSAGE
    url: str | None = None  # a signed URL to the stored file, for an engine off the gateway's disk


def guess_type(name: str) -> str | None:
    return mimetypes.guess_type(name, strict=False)[0]


def engine_type(content_type: str) -> str:
    """The engine's content-item type for a MIME type (resource ingestion)."""
    if content_type.startswith("image/"):
        return "image"
    if content_type.startswith("audio/"):
        return "audio"
    if content_type == "application/pdf":
        return "pdf"
    if content_type in ("text/html", "application/xhtml+xml"):
        return "html"
    if content_type == "message/rfc822":
        return "email"
    return "doc"


def _name_from_uri(uri: str) -> str:
    path = urlsplit(uri).path if "://" in uri or uri.startswith("file:") else uri
    return last_segment(unquote(path))


def _extension_for(mime: str | None, ext: Any) -> str:
    if isinstance(ext, str) and ext.strip(". "):
        return ext.strip(". ")
    if mime:
        guessed = mimetypes.guess_extension(mime, strict=False)
        if guessed:
            return guessed.lstrip(".")
    return "bin"


def _item(
    field: str,
    *,
    name: Any,
    ext: Any,
    uri: str | None,
    data: str | None,
    declared_mime: str | None = None,
) -> AttachmentItem:
    mime = declared_mime
    if uri is not None and uri.startswith("data:"):
        data, mime, uri = _split_data_url(uri, field)
    if data is not None and data.startswith("data:"):
        data, mime, _ = _split_data_url(data, field)
    display = last_segment(name) if isinstance(name, str) and name.strip() else ""
    if not display and uri:
        display = _name_from_uri(uri)
    if not display:
        display = f"attachment.{_extension_for(mime, ext)}"
    content_type = mime or guess_type(display)
    if content_type is None and isinstance(ext, str):
        content_type = guess_type(f"x.{ext.strip('. ')}")
    return AttachmentItem(field, display, content_type or OCTET_STREAM, uri, data)


def _split_data_url(url: str, field: str) -> tuple[str, str | None, None]:
    match = _DATA_URL.fullmatch(url)
    if match is None or ";base64" not in (match.group("params") or ""):
        raise ValidationFailed(f"{field}: only base64 data: URLs are accepted", field=field)
    return match.group("data"), match.group("mime"), None


def attachment_items(body: Mapping[str, Any]) -> list[AttachmentItem]:
    """Every attachment of every message, in body order; text-only items give nothing.

    A message's content is a string, a list of items, or one item (a dict); a message that has a
    `type` but no `role` is itself an item (MemOS accepts such "pure input" items).
    """
    found: list[AttachmentItem] = []
    messages = body.get("messages")
    if not isinstance(messages, list):
        return found
    for m_index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        for part, field, item in _parts(m_index, message):
            parsed = _parse(field, item)
            if parsed is not None:
                found.append(replace(parsed, message=m_index, part=part))
    return found


def _parts(m_index: int, message: Mapping[str, Any]
           ) -> Iterator[tuple[int, str, Mapping[str, Any]]]:
    """(part, field, item) of each item of a message that may carry a file; a field is made
    only for an object (a content list can hold millions of other values)."""
    if "role" not in message and isinstance(message.get("type"), str):
        yield WHOLE_MESSAGE, f"messages[{m_index}]", message
        return
    content = message.get("content")
    if isinstance(content, list):
        for c_index, item in enumerate(content):
            if isinstance(item, Mapping):
                yield c_index, f"messages[{m_index}].content[{c_index}]", item
    elif isinstance(content, Mapping):
        yield WHOLE_CONTENT, f"messages[{m_index}].content", content


def _parse(field: str, item: Mapping[str, Any]) -> AttachmentItem | None:
    uri, data = item.get("uri"), item.get("base64")
    if isinstance(uri, str) and uri:
        return _item(f"{field}.uri", name=item.get("name"), ext=item.get("ext"), uri=uri,
                     data=None)
    if isinstance(data, str) and data:
        return _item(f"{field}.base64", name=item.get("name"), ext=item.get("ext"), uri=None,
                     data=data)
    image_url = item.get("image_url")
    if item.get("type") == "image_url" and image_url is not None:
        url = image_url.get("url") if isinstance(image_url, Mapping) else image_url
        if isinstance(url, str) and url:
            return _item(f"{field}.image_url.url", name=item.get("name"), ext=None, uri=url,
                         data=None)
    file_part = item.get("file")
    if item.get("type") == "file" and isinstance(file_part, Mapping):
        file_data = file_part.get("file_data")
        if isinstance(file_data, str) and file_data:
            # MemOS also takes a URL here; a URL is never base64, so it is read as a uri.
            is_url = _URL.match(file_data) is not None
            return _item(f"{field}.file.file_data", name=file_part.get("filename"), ext=None,
                         uri=file_data if is_url else None, data=None if is_url else file_data)
    return None


def decoded_size_bound(encoded: str) -> int:
    """An upper bound of the decoded size, known before decoding."""
    return (len(encoded) * 3) // 4


def decode_inline(item: AttachmentItem, limit: int) -> bytes:
    """Strictly decode an inline payload: 413 over `limit` (checked first), 422 when invalid."""
    assert item.base64 is not None
    encoded = item.base64
    padding = len(encoded) - len(encoded.rstrip("="))
    if decoded_size_bound(encoded) - padding > limit:
        raise PayloadTooLarge(
            f"{item.field}: decoded file exceeds the limit of {limit} bytes", field=item.field
        )
    if len(encoded) % 4:
        raise ValidationFailed(f"{item.field}: invalid base64 (bad length)", field=item.field)
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValidationFailed(f"{item.field}: invalid base64", field=item.field) from None


def with_item_uris(body: Mapping[str, Any], items: list[AttachmentItem],
                   uris: Mapping[str, str | None]) -> dict[str, Any]:
    """A copy of an add body where each item's `uri` is `uris[item.field]`, or the item is a
    text part naming its file when that is None (the caller's objects are never changed)."""
    messages = list(body.get("messages") or [])
    for item in items:
        if item.field not in uris:
            continue
        uri = uris[item.field]
        message = dict(messages[item.message])
        if item.part == WHOLE_MESSAGE:
            part: dict[str, Any] = message
        elif item.part == WHOLE_CONTENT:
            part = dict(message["content"])
        else:
            content = list(message["content"])
            part = dict(content[item.part])
        if uri is None:
            part = {"type": "text", "text": f"Attached file: {item.name}"}
        else:
            part["uri"] = uri
        if item.part == WHOLE_MESSAGE:
            message = part
        elif item.part == WHOLE_CONTENT:
            message["content"] = part
        else:
            content[item.part] = part
            message["content"] = content
        messages[item.message] = message
    return {**body, "messages": messages}
