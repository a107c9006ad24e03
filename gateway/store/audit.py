"""The admin audit log (SPEC §17): every admin action, who took it, on what, and when."""

from __future__ import annotations

import time
from dataclasses import dataclass

from gateway.store.database import Database, Row, Transaction


@dataclass(frozen=True)
class AuditEntry:
    seq: int
    at_ms: int
    admin_key_id: str
    action: str  # e.g. "keys.create", "keys.revoke", "users.erase", "users.export"
    target: str  # what it acted on: a key id, a user id


def _entry(row: Row) -> AuditEntry:
    return AuditEntry(row["seq"], row["at_ms"], row["admin_key_id"], row["action"], row["target"])


async def record_in(tx: Transaction, admin_key_id: str, action: str, target: str) -> None:
    """Record an admin action inside the transaction that carries it out."""
    await tx.execute(
        "INSERT INTO admin_audit (at_ms, admin_key_id, action, target) VALUES (?, ?, ?, ?)",
        (int(time.time() * 1000), admin_key_id, action, target),
    )


async def record(db: Database, admin_key_id: str, action: str, target: str) -> None:
    async with db.write() as tx:
        await record_in(tx, admin_key_id, action, target)


async def page(db: Database, after_seq: int, limit: int,
               action: str | None = None) -> list[AuditEntry]:
    """Entries after `after_seq` in the order they were recorded (only `action`'s, if given)."""
    if action is None:
        rows = await db.read(
            "SELECT * FROM admin_audit WHERE seq > ? ORDER BY seq LIMIT ?", (after_seq, limit)
        )
    else:
        rows = await db.read(
            "SELECT * FROM admin_audit WHERE seq > ? AND action = ? ORDER BY seq LIMIT ?",
            (after_seq, action, limit),
        )
    return [_entry(row) for row in rows]
