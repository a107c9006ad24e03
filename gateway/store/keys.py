"""API keys: rows of `api_keys` (the secret is stored only as its SHA-256)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from gateway.store.database import Database, Row


@dataclass(frozen=True)
class ApiKey:
    id: str
    user_id: str
    secret_sha256: str
    created_at_ms: int
    revoked_at_ms: int | None
    kind: str = "user"


def _key(row: Row) -> ApiKey:
    return ApiKey(
        row["id"], row["user_id"], row["secret_sha256"], row["created_at_ms"], row["revoked_at_ms"],
        row["kind"],
    )


async def find(db: Database, key_id: str) -> ApiKey | None:
    row = await db.read_one("SELECT * FROM api_keys WHERE id = ?", (key_id,))
    return None if row is None else _key(row)


async def insert(db: Database, key_id: str, user_id: str, secret_sha256: str) -> None:
    async with db.write() as tx:
        await tx.execute(
            "INSERT INTO api_keys (id, user_id, secret_sha256, created_at_ms) VALUES (?, ?, ?, ?)",
            (key_id, user_id, secret_sha256, int(time.time() * 1000)),
        )


async def user_exists(db: Database, user_id: str) -> bool:
    """Whether any key (revoked or not) was ever made for this user id."""
    row = await db.read_one("SELECT 1 FROM api_keys WHERE user_id = ? LIMIT 1", (user_id,))
    return row is not None


async def list_keys(db: Database, user_id: str | None = None) -> list[ApiKey]:
    if user_id is None:
        rows = await db.read("SELECT * FROM api_keys ORDER BY created_at_ms, id")
    else:
        rows = await db.read(
            "SELECT * FROM api_keys WHERE user_id = ? ORDER BY created_at_ms, id", (user_id,)
        )
    return [_key(row) for row in rows]


async def revoke(db: Database, key_id: str) -> bool:
    async with db.write() as tx:
        changed = await tx.execute(
            "UPDATE api_keys SET revoked_at_ms = ? WHERE id = ? AND revoked_at_ms IS NULL",
            (int(time.time() * 1000), key_id),
        )
    return changed == 1
