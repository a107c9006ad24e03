"""Opaque keyset cursors: a `(sort key, id)` pair as unpadded urlsafe base64 of JSON.

Pages walk `ORDER BY key DESC, id DESC` and continue strictly below the cursor's pair, so a row
is never skipped or repeated, however many rows share one key (e.g. one millisecond).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from gateway.errors import ValidationFailed

if TYPE_CHECKING:
    from gateway.store.database import Database, Row

MAX_CURSOR_CHARS = 512
T = TypeVar("T")
_INT64 = 2**63


class Cursor(NamedTuple):
    key: int
    id: str


def encode_cursor(key: int, item_id: str) -> str:
    raw = json.dumps([key, item_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str, field: str) -> Cursor:
    invalid = ValidationFailed(f"{field}: not a cursor this endpoint returned", field=field)
    if not cursor or len(cursor) > MAX_CURSOR_CHARS:
        raise invalid
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parsed = json.loads(raw)
    except (binascii.Error, ValueError):
        raise invalid from None
    if not (isinstance(parsed, list) and len(parsed) == 2):
        raise invalid
    key, item_id = parsed
    if isinstance(key, bool) or not isinstance(key, int) or not -_INT64 <= key < _INT64:
        raise invalid
    if not isinstance(item_id, str) or not item_id or len(item_id) > 128:
        raise invalid
    try:
        item_id.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid from None
    return Cursor(key, item_id)


def keyset_page(found: Sequence[T], limit: int, key: Callable[[T], tuple[int, str]]
                ) -> tuple[list[T], str | None]:
    """A page read as `LIMIT limit + 1`: its first `limit` items, and the cursor after the last
    of them (`key`: its sort key and id) when the extra row says there is more."""
    page = list(found[:limit])
    if len(found) <= limit or not page:
        return page, None
    return page, encode_cursor(*key(page[-1]))


async def read_page(db: Database, sql: str, params: Sequence[Any], by: tuple[str, str],
                    after: Cursor | None, limit: int, item: Callable[[Row], T],
                    key: Callable[[T], tuple[int, str]]) -> tuple[list[T], str | None]:
    """One page of `sql` (a SELECT up to its WHERE), newest first by `by` (the sort key's and
    the id's columns), continued strictly below `after`: its items, and the next cursor."""
    column, id_column = by
    if after is not None:
        sql += f" AND ({column}, {id_column}) < (?, ?)"
        params = (*params, after.key, after.id)
    rows = await db.read(f"{sql} ORDER BY {column} DESC, {id_column} DESC LIMIT ?",
                         (*params, limit + 1))
    return keyset_page([item(row) for row in rows], limit, key)
