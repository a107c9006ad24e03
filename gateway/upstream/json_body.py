"""Bodies of routes that name identities, read exactly once and the way the engine reads them.

JSON only: one `Content-Type`, `application/json` or `application/*+json`, no charset but UTF-8,
no `Content-Encoding`, UTF-8 bytes without a byte-order mark, a JSON object. Anything else is
refused (415 / 422) rather than forwarded unchecked: an engine that guesses encodings (UTF-16,
a BOM) or ignores the declared type would otherwise read ids the gateway never saw (SPEC §5).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

from gateway.errors import UnsupportedMediaType, ValidationFailed

_BOM = b"\xef\xbb\xbf"


def _is_json_type(value: bytes) -> bool:
    if value == b"application/json":
        return True
    media, _, params = value.partition(b";")
    media = media.strip().lower()
    if media != b"application/json" and not (
        media.startswith(b"application/") and media.endswith(b"+json")
    ):
        return False
    for param in params.split(b";"):
        name, _, charset = param.partition(b"=")
        if name.strip().lower() == b"charset" and charset.strip(b' "').lower() not in (
            b"utf-8", b"utf8"
        ):
            return False
    return True


def strict_json(headers: Sequence[tuple[bytes, bytes]], body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, None when empty; UnsupportedMediaType / ValidationFailed."""
    if not body:
        return None
    types = []
    for key, value in headers:
        if key == b"content-type":
            types.append(value)
        elif key == b"content-encoding" and value.strip().lower() not in (b"", b"identity"):
            raise UnsupportedMediaType("compressed request bodies are not accepted here",
                                       field="content-encoding")
    if len(types) != 1 or not _is_json_type(types[0]):
        raise UnsupportedMediaType(
            "this route's body names users: send exactly one Content-Type: application/json "
            "(UTF-8)", field="content-type")
    if body.startswith(_BOM):
        raise ValidationFailed("the JSON body starts with a byte-order mark", field="body")
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        payload = _standard(body)
    if not isinstance(payload, dict):
        raise ValidationFailed("the body must be a JSON object", field="body")
    return payload


def _standard(body: bytes) -> Any:
    """What orjson refuses but the engine's standard-library parser may accept (NaN, deep ints)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationFailed("the body is not UTF-8", field="body") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ValidationFailed("the JSON body is nested too deeply", field="body") from None
    except ValueError:
        raise ValidationFailed("the body is not JSON", field="body") from None
