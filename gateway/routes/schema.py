"""Shared pieces of the camelCase application surface (SPEC §10–§11): base models, checked types.

Text and JSON from a request are checked before they reach SQLite: a lone surrogate (`"\\ud800"`
is valid JSON) cannot be stored as UTF-8, and NaN or very deep nesting cannot be stored as JSON.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from gateway.errors import ValidationFailed
from gateway.store.cursors import Cursor, decode_cursor
from gateway.store.records import CamelModel as CamelModel  # responses' base, re-exported

MAX_JSON_DEPTH = 32
MAX_JSON_CHARS = 64 * 1024


class CamelRequest(CamelModel):
    """Request bodies: JSON types as sent, no coercion ("5" is not an integer, true is not 1)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, strict=True)


class CamelPatch(CamelRequest):
    """Partial updates: an unknown (or not updatable) field is refused, never silently ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, strict=True, extra="forbid"
    )


def _unicode_text(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


def _storable_json(value: Any) -> Any:
    """Refuse what SQLite or JSON cannot hold; iterative, so depth cannot blow the stack."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    size = 0
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, str):
            _unicode_text(item)
            size += len(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError("must not contain NaN or Infinity")
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) >= 2**63:
            raise ValueError("integers must fit in 64 bits")
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, depth + 1))
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        if size > MAX_JSON_CHARS:
            raise ValueError(f"holds more than {MAX_JSON_CHARS} characters of text")
    return value


Text = Annotated[str, AfterValidator(_unicode_text)]
NonBlankText = Annotated[
    str,
    AfterValidator(_unicode_text),
    AfterValidator(_not_blank),
    Field(json_schema_extra={"pattern": r"\S"}),  # documents "not blank" in the OpenAPI schema
]
JsonObject = Annotated[dict[str, Any], AfterValidator(_storable_json)]
JsonValue = Annotated[Any, AfterValidator(_storable_json)]

Limit = Annotated[int, Field(ge=1, le=200)]


class PageQuery(CamelModel):
    """`?limit=` (1..200, default 50) and `?cursor=` (a `nextCursor` from the previous page)."""

    limit: Limit = 50
    cursor: str | None = None


def refuse_null(patch: BaseModel, *fields: str) -> None:
    """A PATCH may leave these fields out, but not set them to null."""
    for name in fields:
        if name in patch.model_fields_set and getattr(patch, name) is None:
            alias = to_camel(name)
            raise ValidationFailed(f"{alias}: must not be null", field=alias)


def cursor_param(value: str | None, field: str) -> Cursor | None:
    """An opaque cursor from the query string; ValidationFailed naming `field` when malformed."""
    return None if value is None else decode_cursor(value, field)
