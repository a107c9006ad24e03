"""Rows of `resources` (files uploaded through /resources); every query is scoped to the user."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.store.attachments import (
    RESOURCE_SOURCE,
    AttachmentMapping,
    insert_mappings,
    insert_resource_row,
    new_mapping,
)
from gateway.store.cursors import Cursor
from gateway.store.database import Database, Row
from gateway.store.ids import now_ms


@dataclass(frozen=True)
class Resource:
    id: str
    user_id: str
    name: str
    safe_name: str
    content_type: str
    size: int
    sha256: str
    app_id: str
    project_id: str
    session_id: str
    internal_uri: str
    metadata: dict[str, Any]
    created_at: int


def _resource(row: Row) -> Resource:
    return Resource(
        row["id"], row["user_id"], row["name"], row["safe_name"], row["content_type"],
        row["size"], row["sha256"], row["app_id"], row["project_id"], row["session_id"],
        row["internal_uri"], json.loads(row["metadata"]), row["created_at"],
    )


def row_values(resource: Resource) -> dict[str, Any]:
    """The row's column values (`insert_resource_row`; kept in the upload intent)."""
    values = dict(resource.__dict__)
    values["metadata"] = json.dumps(resource.metadata, ensure_ascii=False)
    return values


async def get(db: Database, user_id: str, resource_id: str) -> Resource | None:
    row = await db.read_one(
        "SELECT * FROM resources WHERE user_id = ? AND id = ? AND deleted_at IS NULL",
        (user_id, resource_id),
    )
    return None if row is None else _resource(row)


async def find_same(db: Database, user_id: str, sha256: str, name: str) -> Resource | None:
    """A live resource of this user with the same bytes and the same name."""
    row = await db.read_one(
        "SELECT * FROM resources WHERE user_id = ? AND sha256 = ? AND name = ? "
        "AND deleted_at IS NULL ORDER BY created_at LIMIT 1",
        (user_id, sha256, name),
    )
    return None if row is None else _resource(row)


async def page(
    db: Database, user_id: str, limit: int, before: Cursor | None
) -> list[Resource]:
    """Newest first; `before` continues strictly below a (created_at, id) pair."""
    if before is None:
        rows = await db.read(
            "SELECT * FROM resources WHERE user_id = ? AND deleted_at IS NULL "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (user_id, limit),
        )
    else:
        rows = await db.read(
            "SELECT * FROM resources WHERE user_id = ? AND deleted_at IS NULL "
            "AND (created_at < ? OR (created_at = ? AND id < ?)) "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (user_id, before.key, before.key, before.id, limit),
        )
    return [_resource(row) for row in rows]


async def mark_deleted(db: Database, user_id: str, resource_id: str) -> bool:
    """Soft-delete the resource and its mappings in one transaction; False if not found."""
    stamp = now_ms()
    async with db.write() as tx:
        changed = await tx.execute(
            "UPDATE resources SET deleted_at = ? WHERE user_id = ? AND id = ? "
            "AND deleted_at IS NULL",
            (stamp, user_id, resource_id),
        )
        if changed:
            await tx.execute(
                "UPDATE memory_attachments SET deleted_at = ? WHERE user_id = ? "
                "AND resource_id = ? AND deleted_at IS NULL",
                (stamp, user_id, resource_id),
            )
    return bool(changed)


def mapping_of(resource: Resource) -> AttachmentMapping:
    """The attachment mapping that makes a resource findable by search."""
    return new_mapping(
        user_id=resource.user_id, app_id=resource.app_id, project_id=resource.project_id,
        session_id=resource.session_id, name=resource.name,
        content_type=resource.content_type, internal_uri=resource.internal_uri,
        source=RESOURCE_SOURCE, resource_id=resource.id, sha256=resource.sha256,
    )


async def ensure_mapping(db: Database, resource: Resource) -> None:
    """Repair a resource's mapping (duplicate uploads make sure it exists)."""
    async with db.write() as tx:
        await insert_mappings(tx, [mapping_of(resource)], now_ms())


async def insert(db: Database, resource: Resource) -> None:
    """Keep a file the gateway itself made as the user's resource, with its mapping; a resource
    with this id already kept is left as it is."""
    async with db.write() as tx:
        if await insert_resource_row(tx, row_values(resource)):
            await insert_mappings(tx, [mapping_of(resource)], now_ms())
