"""Bodies of routes that name identities, read exactly once and the way the engine reads them.

JSON only: one `Content-Type`, `application/json` or `application/*+json`, no charset but UTF-8,
no `Content-Encoding`, UTF-8 bytes without a byte-order mark, a JSON object. Anything else is
refused (415 / 422) rather than forwarded unchecked: an engine that guesses encodings (UTF-16,
a BOM) or ignores the declared type would otherwise read ids the gateway never saw (SPEC §5).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import orjson

from gateway.errors import UnsupportedMediaType, ValidationFailed, body_not_json
from gateway.serving import jsonio

_BOM = b"\xef\xbb\xbf"
_OBJECT_START = re.compile(rb"[ \t\n\r]*\{")
# `nested_deeper`: quotes and brackets only, objects' braces read as brackets.
_NOT_MARKS = bytes(set(range(256)) - set(b'"[]{}'))
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_STRING = re.compile(rb'"[^"]*"')


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


def json_bytes(headers: Sequence[tuple[bytes, bytes]], body: bytes) -> bytes | None:
    """The body when it may be read as JSON (the checks of `strict_json` before parsing), None
    when empty; UnsupportedMediaType / ValidationFailed."""
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
    return body


def strict_json(headers: Sequence[tuple[bytes, bytes]], body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, None when empty; UnsupportedMediaType / ValidationFailed."""
    checked = json_bytes(headers, body)
    return None if checked is None else json_object(checked)


def json_object(body: bytes) -> dict[str, Any]:
    """Checked bytes (`json_bytes`) parsed as the engine parses them: a JSON object, or a 422.

    orjson reads what it can, fast; what it refuses but the engine's standard-library parser
    accepts (NaN, lone surrogates, deep nesting) is read by that parser, and so is a body that
    may hold an integer past 64 bits, which orjson reads as a float: no body reads one way
    here and another way upstream."""
    try:
        payload = _standard(body) if jsonio.has_long_digit_run(body) else orjson.loads(body)
    except orjson.JSONDecodeError:
        payload = _standard(body)
    if not isinstance(payload, dict):
        raise ValidationFailed("the body must be a JSON object", field="body")
    return payload


class JsonBody:
    """A checked JSON body (`json_bytes`) as the gateway reads it: `fields`, the body parsed
    (`json_object`), or, read by a lean route model (gateway/upstream/models.py), that model's
    fields: what the gateway reads of it and nothing more. `whole()` is the body parsed, for
    the few paths that rewrite it; only the bytes are forwarded otherwise."""

    __slots__ = ("raw", "fields", "lean")

    def __init__(self, raw: bytes, fields: dict[str, Any], *, lean: bool = False) -> None:
        self.raw = raw
        self.fields = fields
        self.lean = lean

    def whole(self) -> dict[str, Any]:
        return json_object(self.raw) if self.lean else self.fields


def starts_an_object(body: bytes) -> bool:
    """The bytes open a JSON object (after JSON whitespace); read without copying them."""
    return _OBJECT_START.match(body) is not None


def nested_deeper(body: bytes, limit: int) -> bool:
    """Whether valid JSON `body` nests more than `limit` arrays and objects, read off its bytes
    without parsing them (as `nesting_exceeds` counts a parsed body, gateway/routes/common.py).

    Escapes are removed first, so every quote left opens or closes a string; what is left of
    the brackets outside strings is then peeled one level per pass. Bytes-level operations
    only: a fraction of a second for tens of megabytes."""
    if len(body) <= 2 * limit:  # deeper takes limit + 1 opening and closing brackets
        return False
    text = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = text.translate(_BRACKETS, _NOT_MARKS).replace(b'""', b"")
    if b'"' in marks:  # strings holding brackets
        marks = _STRING.sub(b"", marks)
    for _ in range(limit):
        if not marks:
            return False
        marks = marks.replace(b"[]", b"")
    return bool(marks)


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
    except ValueError as exc:
        raise body_not_json(exc) from None
