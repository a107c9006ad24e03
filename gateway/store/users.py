"""The users the gateway holds anything for, and what it holds (the admin API, SPEC §17).

A user exists for the gateway once a key names them or a row of theirs is stored (a JWT user
has no key): the user ids of these tables, together (an erased user's tombstoned sessions are
no one's: gateway/store/user_rows.py).
"""

from __future__ import annotations

import time

from gateway.store.database import Database
from gateway.store.user_rows import TOMBSTONE

# answer field -> (table, extra condition): what `counts` reports per user.
COUNTED = {
    "keys": ("api_keys", "kind <> 'admin'"),
    "resources": ("resources", "deleted_at IS NULL"),
    "conversations": ("conversations", "deleted_at_ms IS NULL"),
    "agents": ("agents", "deleted_at_ms IS NULL"),
    "facts": ("memory_facts", "deleted_at_ms IS NULL"),
    "assets": ("media_assets", ""),
    "sessions": ("memory_sessions", ""),
}
_TABLES = sorted({table for table, _ in COUNTED.values()})


async def page(db: Database, after: str | None, limit: int) -> list[str]:
    """User ids in order after `after`, from every table that names users."""
    selects = [
        f"SELECT DISTINCT user_id FROM {table} WHERE user_id > ?"
        + (" AND kind <> 'admin'" if table == "api_keys" else "")
        + (f" AND user_id <> '{TOMBSTONE}'" if table == "memory_sessions" else "")
        for table in _TABLES
    ]
    sql = (f"SELECT user_id FROM ({' UNION '.join(selects)}) AS known "
           "ORDER BY user_id LIMIT ?")
    rows = await db.read(sql, (*([after or ""] * len(_TABLES)), limit))
    return [row["user_id"] for row in rows]


async def counts(db: Database, user_ids: list[str]) -> dict[str, dict[str, int]]:
    """Per user id, how many of each COUNTED kind the gateway holds."""
    out = {user: dict.fromkeys(COUNTED, 0) for user in user_ids}
    if not user_ids:
        return out
    marks = ", ".join("?" * len(user_ids))
    for field, (table, condition) in COUNTED.items():
        where = f"user_id IN ({marks})" + (f" AND {condition}" if condition else "")
        rows = await db.read(
            f"SELECT user_id, COUNT(*) AS n FROM {table} WHERE {where} GROUP BY user_id",
            tuple(user_ids))
        for row in rows:
            out[row["user_id"]][field] = int(row["n"])
    return out


async def totals(db: Database) -> dict[str, int]:
    """How many users the gateway knows and how many keys are live, for the console overview."""
    selects = [
        f"SELECT DISTINCT user_id FROM {table}"
        + (" WHERE kind <> 'admin'" if table == "api_keys" else "")
        for table in _TABLES
    ]
    known = await db.read_one(
        f"SELECT COUNT(*) AS n FROM ({' UNION '.join(selects)}) AS known")
    live = await db.read_one(
        "SELECT COUNT(*) AS n FROM api_keys WHERE revoked_at_ms IS NULL AND "
        "(expires_at_ms IS NULL OR expires_at_ms > ?)", (int(time.time() * 1000),))
    return {"users": int(known["n"]) if known else 0, "keys": int(live["n"]) if live else 0}
