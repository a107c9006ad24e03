"""API keys: rows of `api_keys` (the secret is stored only as its SHA-256).

A key has a kind (`user`, `service`, `admin`), scopes (`read`, `write`), a name, an optional
expiry and a last-used time (written in batches by the Authenticator, never per request).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.errors import UserErased
from gateway.store.audit import record_in
from gateway.store.database import Database, Row
from gateway.store.user_rows import refused_in

KINDS = ("user", "service", "admin")


@dataclass(frozen=True)
class ApiKey:
    id: str
    user_id: str
    secret_sha256: str
    created_at_ms: int
    revoked_at_ms: int | None
    kind: str = "user"
    scopes: tuple[str, ...] = ("read", "write")
    name: str = ""
    expires_at_ms: int | None = None
    last_used_at_ms: int | None = None
    users_glob: str = ""  # service keys: the user ids it may act for ("" = any)

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and self.expires_at_ms <= now_ms

    @property
    def state(self) -> str:
        if self.revoked_at_ms is not None:
            return "revoked"
        if self.expired(int(time.time() * 1000)):
            return "expired"
        return "active"


def _key(row: Row) -> ApiKey:
    return ApiKey(
        row["id"], row["user_id"], row["secret_sha256"], row["created_at_ms"],
        row["revoked_at_ms"], row["kind"], tuple(s for s in row["scopes"].split(",") if s),
        row["name"], row["expires_at_ms"], row["last_used_at_ms"], row["users_glob"],
    )


async def find(db: Database, key_id: str) -> ApiKey | None:
    row = await db.read_one("SELECT * FROM api_keys WHERE id = ?", (key_id,))
    return None if row is None else _key(row)


_COLUMNS = ("id, user_id, secret_sha256, created_at_ms, revoked_at_ms, kind, scopes, name, "
            "expires_at_ms, last_used_at_ms, users_glob")


async def find_now(db: Database, key_id: str) -> ApiKey | None:
    """`find` for a request's key check: one indexed row, read by the adapter's cheapest route
    (`Database.read_now`; on SQLite the event loop's own connection, no thread hand-off)."""
    rows = await db.read_now(f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))
    if not rows:
        return None
    (id_, user_id, secret, created, revoked, kind, scopes, name, expires, used,
     users_glob) = rows[0]
    return ApiKey(id_, user_id, secret, created, revoked, kind,
                  tuple(s for s in scopes.split(",") if s), name, expires, used, users_glob)


async def insert(db: Database, key_id: str, user_id: str, secret_sha256: str, *,
                 kind: str = "user", scopes: Iterable[str] = ("read", "write"), name: str = "",
                 expires_at_ms: int | None = None, users_glob: str = "",
                 audit: tuple[str, str] | None = None,
                 refuse_erased: bool | None = None) -> ApiKey:
    """Store a new key; `audit` = (admin key id, action) records it in the admin log too.

    With `refuse_erased` set (`auth.erased_users == "refuse"`, or False for "fresh"), a user or
    service key for an id a credential would be refused as erased is UserErased (409), nothing
    stored: the key could never work (SPEC §17)."""
    assert kind in KINDS, kind
    now = int(time.time() * 1000)
    scope_text = ",".join(sorted(set(scopes)))
    async with db.write() as tx:
        if (refuse_erased is not None and kind != "admin"
                and await refused_in(tx, user_id, refuse_erased)):
            raise UserErased(f"user {user_id}'s data was erased and auth.erased_users refuses "
                             "the id: a key for it could never be used")
        await tx.execute(
            "INSERT INTO api_keys (id, user_id, secret_sha256, created_at_ms, kind, scopes, name,"
            " expires_at_ms, users_glob) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key_id, user_id, secret_sha256, now, kind, scope_text, name, expires_at_ms,
             users_glob),
        )
        if audit is not None:
            await record_in(tx, audit[0], audit[1], key_id)
    return ApiKey(key_id, user_id, secret_sha256, now, None, kind,
                  tuple(s for s in scope_text.split(",") if s), name, expires_at_ms, None,
                  users_glob)


async def list_keys(db: Database, user_id: str | None = None) -> list[ApiKey]:
    if user_id is None:
        rows = await db.read("SELECT * FROM api_keys ORDER BY created_at_ms, id")
    else:
        rows = await db.read(
            "SELECT * FROM api_keys WHERE user_id = ? ORDER BY created_at_ms, id", (user_id,)
        )
    return [_key(row) for row in rows]


async def page(db: Database, user_id: str | None, after: tuple[int, str] | None,
               limit: int) -> list[ApiKey]:
    """Keys in creation order after the cursor position (created_at_ms, id)."""
    where: list[str] = []
    args: list[object] = []
    if user_id is not None:
        where.append("user_id = ?")
        args.append(user_id)
    if after is not None:
        where.append("(created_at_ms > ? OR (created_at_ms = ? AND id > ?))")
        args += [after[0], after[0], after[1]]
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    rows = await db.read(f"SELECT * FROM api_keys {clause}ORDER BY created_at_ms, id LIMIT ?",
                         (*args, limit))
    return [_key(row) for row in rows]


async def revoke(db: Database, key_id: str, audit: tuple[str, str] | None = None) -> bool:
    async with db.write() as tx:
        changed = await tx.execute(
            "UPDATE api_keys SET revoked_at_ms = ? WHERE id = ? AND revoked_at_ms IS NULL",
            (int(time.time() * 1000), key_id),
        )
        if changed == 1 and audit is not None:
            await record_in(tx, audit[0], audit[1], key_id)
    return changed == 1


async def touch(db: Database, used: dict[str, int]) -> None:
    """Move the last-used times of keys (key id -> ms), one transaction for the batch."""
    if not used:
        return
    async with db.write() as tx:
        for key_id, at_ms in used.items():
            await tx.execute(
                "UPDATE api_keys SET last_used_at_ms = ? WHERE id = ?"
                " AND (last_used_at_ms IS NULL OR last_used_at_ms < ?)",
                (at_ms, key_id, at_ms),
            )
