"""Rows of `uploaded_objects` (SPEC §18): objects signed through an engine SDK's sign route.

A row goes `signed` → `uploading` (the one-time form is being read) → `uploaded`; a failed upload
goes back to `signed` so the SDK may retry within the form's lifetime. Every read is scoped to
the user; only the upload form is found by its token (the token is the credential).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from gateway.store.database import Database, Row
from gateway.store.ids import now_ms

SIGNED, UPLOADING, UPLOADED = "signed", "uploading", "uploaded"


@dataclass(frozen=True)
class UploadedObject:
    id: str
    user_id: str
    object_key: str
    file_id: str
    file_name: str
    file_type: str
    content_type: str
    max_size: int
    internal_uri: str
    state: str
    size: int | None
    sha256: str | None
    engine_key: str | None
    signed_at_ms: int
    upload_expires_at_ms: int
    expires_at_ms: int


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _object(row: Row) -> UploadedObject:
    return UploadedObject(
        row["id"], row["user_id"], row["object_key"], row["file_id"], row["file_name"],
        row["file_type"], row["content_type"], row["max_size"], row["internal_uri"],
        row["state"], row["size"], row["sha256"], row["engine_key"], row["signed_at_ms"],
        row["upload_expires_at_ms"], row["expires_at_ms"],
    )


async def insert(db: Database, objects: list[UploadedObject], tokens: list[str | None]) -> None:
    """Record freshly signed objects (with the hash of each one's form token, if any)."""
    async with db.write() as tx:
        for obj, token in zip(objects, tokens, strict=True):
            await tx.execute(
                "INSERT INTO uploaded_objects (id, user_id, object_key, file_id, file_name, "
                "file_type, content_type, max_size, internal_uri, token_sha256, state, "
                "signed_at_ms, upload_expires_at_ms, expires_at_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (obj.id, obj.user_id, obj.object_key, obj.file_id, obj.file_name, obj.file_type,
                 obj.content_type, obj.max_size, obj.internal_uri,
                 None if token is None else token_hash(token), SIGNED, obj.signed_at_ms,
                 obj.upload_expires_at_ms, obj.expires_at_ms),
            )


async def by_key(db: Database, user_id: str, object_key: str) -> UploadedObject | None:
    row = await db.read_one(
        "SELECT * FROM uploaded_objects WHERE user_id = ? AND object_key = ?",
        (user_id, object_key),
    )
    return None if row is None else _object(row)


async def claim_form(db: Database, token: str) -> UploadedObject | None:
    """Take the upload form `token` opens, once: None when it is unknown, used, being used or
    expired."""
    digest = token_hash(token)
    async with db.write() as tx:
        row = await tx.read_one(
            "SELECT * FROM uploaded_objects WHERE token_sha256 = ? AND state = ? "
            "AND upload_expires_at_ms > ?", (digest, SIGNED, now_ms()))
        if row is None:
            return None
        await tx.update("uploaded_objects", {"state": UPLOADING}, "id = ?", (row["id"],))
    return _object(row)


async def release_form(db: Database, object_id: str) -> None:
    """A failed upload gives its form back (the SDK may retry until it expires)."""
    async with db.write() as tx:
        await tx.update("uploaded_objects", {"state": SIGNED}, "id = ? AND state = ?",
                        (object_id, UPLOADING))


async def mark_uploaded(db: Database, user_id: str, object_id: str, internal_uri: str,
                        size: int, sha256: str | None) -> None:
    async with db.write() as tx:
        await tx.update(
            "uploaded_objects",
            {"state": UPLOADED, "internal_uri": internal_uri, "size": size, "sha256": sha256,
             "uploaded_at_ms": now_ms(), "token_sha256": None},
            "user_id = ? AND id = ?", (user_id, object_id))


async def remember_engine_key(db: Database, user_id: str, object_id: str, engine_key: str
                              ) -> None:
    """The engine's own key for the object, once the gateway has uploaded it there."""
    async with db.write() as tx:
        await tx.update("uploaded_objects", {"engine_key": engine_key},
                        "user_id = ? AND id = ?", (user_id, object_id))


async def expired(db: Database, before_ms: int) -> list[UploadedObject]:
    """Objects whose key may no longer be named (any user), for `gc`."""
    rows = await db.read(
        "SELECT * FROM uploaded_objects WHERE expires_at_ms <= ? ORDER BY expires_at_ms, id",
        (before_ms,))
    return [_object(row) for row in rows]


async def live_uris(db: Database, now: int) -> set[str]:
    """The files of objects still within their lifetime (gc keeps them)."""
    rows = await db.read(
        "SELECT internal_uri FROM uploaded_objects WHERE expires_at_ms > ?", (now,))
    return {row["internal_uri"] for row in rows}


async def delete(db: Database, object_ids: list[str]) -> None:
    async with db.write() as tx:
        for object_id in object_ids:
            await tx.execute("DELETE FROM uploaded_objects WHERE id = ?", (object_id,))
