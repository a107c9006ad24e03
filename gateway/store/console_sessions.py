"""Operator console sessions (SPEC §20), kept in the database so every process shares them.

A session is named by a random token that only the browser's cookie holds; the table keeps its
SHA-256 and the admin key that signed in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from gateway.store import audit
from gateway.store.database import Database


@dataclass(frozen=True)
class ConsoleSession:
    admin_key_id: str
    created_at_ms: int
    expires_at_ms: int


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def begin(db: Database, token: str, admin_key_id: str, now_ms: int,
                expires_at_ms: int) -> None:
    """Store a new session and audit the sign-in, in one transaction; expired rows go with it."""
    async with db.write() as tx:
        await tx.execute("DELETE FROM console_sessions WHERE expires_at_ms <= ?", (now_ms,))
        await tx.execute(
            "INSERT INTO console_sessions (token_sha256, admin_key_id, created_at_ms, "
            "expires_at_ms) VALUES (?, ?, ?, ?)",
            (token_sha256(token), admin_key_id, now_ms, expires_at_ms))
        await audit.record_in(tx, admin_key_id, "console.sign_in", admin_key_id)


async def find(db: Database, token: str, now_ms: int) -> ConsoleSession | None:
    """The live session this token names, or None (unknown, ended or expired)."""
    row = await db.read_one(
        "SELECT admin_key_id, created_at_ms, expires_at_ms FROM console_sessions "
        "WHERE token_sha256 = ? AND expires_at_ms > ?", (token_sha256(token), now_ms))
    if row is None:
        return None
    return ConsoleSession(row["admin_key_id"], row["created_at_ms"], row["expires_at_ms"])


async def end(db: Database, token: str, admin_key_id: str) -> None:
    """End the session and audit the sign-out, in one transaction."""
    async with db.write() as tx:
        await tx.execute("DELETE FROM console_sessions WHERE token_sha256 = ?",
                         (token_sha256(token),))
        await audit.record_in(tx, admin_key_id, "console.sign_out", admin_key_id)
