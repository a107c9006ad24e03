"""Rows that name files: live resources and attachment mappings, as `gc` reads and marks them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.store.database import Database
from gateway.store.ids import now_ms


@dataclass(frozen=True)
class FileRow:
    kind: str  # "resource" | "mapping"
    id: str
    user_id: str
    internal_uri: str
    source: str  # a mapping's source; "resource" for resource rows
    created_at: int  # ms


async def live_file_rows(db: Database) -> list[FileRow]:
    """Every live resource and every live mapping (any user), oldest first."""
    rows = await db.read(
        "SELECT 'resource' AS kind, id, user_id, internal_uri, 'resource' AS source, created_at "
        "FROM resources WHERE deleted_at IS NULL "
        "UNION ALL "
        "SELECT 'mapping', id, user_id, internal_uri, source, created_at "
        "FROM memory_attachments WHERE deleted_at IS NULL "
        "ORDER BY created_at, id"
    )
    return [FileRow(r["kind"], r["id"], r["user_id"], r["internal_uri"], r["source"],
                    r["created_at"]) for r in rows]


async def mark_mappings_deleted(db: Database, mapping_ids: Sequence[str]) -> int:
    """Soft-delete these mappings (those still live); returns how many changed."""
    if not mapping_ids:
        return 0
    async with db.write() as tx:
        return await tx.execute(
            "UPDATE memory_attachments SET deleted_at = ? WHERE deleted_at IS NULL "
            "AND id IN (SELECT value FROM json_each(?))",
            (now_ms(), json.dumps(list(mapping_ids))),
        )
