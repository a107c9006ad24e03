"""Attachment mappings, session ownership and the intents recorded before upstream calls.

An intent is written before the engine is called and holds everything needed to finish the work
(mappings to make, a resource row, files written). Success settles it into rows; failure deletes
it; a crash leaves it, and gateway/attachments/recovery.py settles it once its owner (the
process that recorded it) is gone: its lease expired, or it is known dead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from gateway.errors import SessionOwnedByAnotherUser
from gateway.store.database import Database, Row, Transaction
from gateway.store.ids import new_id, now_ms

RESOURCE_SOURCE = "resource_upload"
RESOURCE_COLUMNS = ("id", "user_id", "name", "safe_name", "content_type", "size", "sha256",
                    "app_id", "project_id", "session_id", "internal_uri", "metadata", "created_at")
BASE64_SOURCE = "memory_add_base64"
OBJECT_SOURCE = "memory_add_object"  # a file an engine SDK uploaded to the gateway (SPEC §18)
# the gateway stores their files: search attachments get a download url, which serves them
STORED_SOURCES = frozenset({RESOURCE_SOURCE, BASE64_SOURCE, OBJECT_SOURCE})


@dataclass(frozen=True)
class AttachmentMapping:
    id: str
    user_id: str
    app_id: str
    project_id: str
    session_id: str
    resource_id: str | None
    content_type: str
    name: str
    internal_uri: str
    source: str
    sha256: str | None = None


@dataclass
class Intent:
    """Work started before an upstream call; `payload` is everything needed to finish it."""

    id: str
    user_id: str
    kind: str  # "memory_add" | "resource_upload"
    mappings: list[AttachmentMapping] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    resource: dict[str, Any] | None = None
    owner: str = ""  # the process holding it ("" = nobody)
    lease_until: int = 0  # ms; the owner renews it while alive

    def payload(self) -> str:
        return json.dumps(
            {
                "mappings": [asdict(m) for m in self.mappings],
                "folders": self.folders,
                "resource": self.resource,
            }
        )

    @classmethod
    def from_row(cls, row: Row) -> Intent:
        data = json.loads(row["payload"])
        return cls(
            id=row["id"],
            user_id=row["user_id"],
            kind=row["kind"],
            mappings=[AttachmentMapping(**m) for m in data["mappings"]],
            folders=list(data["folders"]),
            resource=data.get("resource"),
            owner=row["owner"],
            lease_until=row["lease_until"],
        )


# --- sessions ---------------------------------------------------------------------------------


async def session_owner(db: Database, app_id: str, project_id: str, session_id: str) -> str | None:
    """Who owns a session: an indexed row read on every add and every request naming a session,
    so by the adapter's cheapest route (`read_now`: no thread hand-off on SQLite)."""
    rows = await db.read_now(
        "SELECT user_id FROM memory_sessions WHERE app_id = ? AND project_id = ? "
        "AND session_id = ?",
        (app_id, project_id, session_id),
    )
    return str(rows[0][0]) if rows else None


async def _claim_session(
    tx: Transaction, user_id: str, app_id: str, project_id: str, session_id: str
) -> bool:
    """Make the caller the owner if nobody is; True when this call created the claim."""
    created = await tx.execute(
        "INSERT INTO memory_sessions (app_id, project_id, session_id, user_id, "
        "created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (app_id, project_id, session_id, user_id, now_ms()),
    )
    if created:
        return True
    row = await tx.read_one(
        "SELECT user_id FROM memory_sessions WHERE app_id = ? AND project_id = ? "
        "AND session_id = ?",
        (app_id, project_id, session_id),
    )
    if row is None or row["user_id"] != user_id:
        raise SessionOwnedByAnotherUser()
    return False


async def claim_session(
    db: Database, user_id: str, app_id: str, project_id: str, session_id: str
) -> None:
    """The caller owns the session from now on, unless another user does (403)."""
    async with db.write() as tx:
        await _claim_session(tx, user_id, app_id, project_id, session_id)


# --- intents ----------------------------------------------------------------------------------


async def begin_intent(
    db: Database, intent: Intent, session: tuple[str, str, str], owner: str = "",
    lease_until: int = 0,
) -> None:
    """Claim the session (403 if another user owns it) and record the intent, atomically,
    held by `owner` until `lease_until` (ms)."""
    intent.owner, intent.lease_until = owner, lease_until
    async with db.write() as tx:
        await _claim_session(tx, intent.user_id, *session)
        await tx.execute(
            "INSERT INTO pending_intents (id, user_id, kind, payload, created_at, owner, "
            "lease_until) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (intent.id, intent.user_id, intent.kind, intent.payload(), now_ms(), owner,
             lease_until),
        )


async def renew_leases(db: Database, owner: str, lease_until: int) -> int:
    """Extend every intent `owner` holds; returns how many it holds."""
    held = await db.read_one("SELECT 1 FROM pending_intents WHERE owner = ? LIMIT 1", (owner,))
    if held is None:
        return 0
    async with db.write() as tx:
        return await tx.execute(
            "UPDATE pending_intents SET lease_until = ? WHERE owner = ?", (lease_until, owner)
        )


async def commit_intent(db: Database, intent: Intent) -> None:
    """The upstream succeeded: write the resource row and mappings, forget the intent."""
    async with db.write() as tx:
        await _apply(tx, intent)
        await tx.execute("DELETE FROM pending_intents WHERE id = ?", (intent.id,))


async def settle_if_pending(db: Database, intent: Intent, keep: bool) -> bool:
    """Recovery's settlement, atomic against another process settling the same intent: keep
    it (commit its rows) or drop it, only while it is still pending; True when this call did."""
    async with db.write() as tx:
        if not await tx.execute("DELETE FROM pending_intents WHERE id = ?", (intent.id,)):
            return False
        if keep:
            await _apply(tx, intent)
    return True


async def abandon_intent(db: Database, intent: Intent) -> bool:
    """The upstream failed: forget the intent; True when it was still pending.

    False means another process settled it meanwhile (its start-up recovery committed the
    mappings), so the caller must keep the files. A session claim made by the request stays:
    the session remains reserved to the user who tried first, which keeps two users from racing
    into one engine buffer.
    """
    async with db.write() as tx:
        return await tx.execute("DELETE FROM pending_intents WHERE id = ?", (intent.id,)) > 0


async def leftover_intents(db: Database) -> list[Intent]:
    rows = await db.read("SELECT * FROM pending_intents ORDER BY created_at")
    return [Intent.from_row(row) for row in rows]


async def _apply(tx: Transaction, intent: Intent) -> None:
    created = now_ms()
    if intent.resource is not None:
        await insert_resource_row(tx, intent.resource)
    await insert_mappings(tx, intent.mappings, created)


async def insert_resource_row(tx: Transaction, values: dict[str, Any]) -> int:
    """A `resources` row from its column values; 0 when a row with its id exists already."""
    return await tx.execute(
        f"INSERT INTO resources ({', '.join(RESOURCE_COLUMNS)}) "
        f"VALUES ({', '.join('?' for _ in RESOURCE_COLUMNS)}) ON CONFLICT (id) DO NOTHING",
        [values[column] for column in RESOURCE_COLUMNS],
    )


async def insert_mappings(
    tx: Transaction, mappings: Iterable[AttachmentMapping], created: int
) -> None:
    await tx.executemany(
        "INSERT INTO memory_attachments (id, user_id, app_id, project_id, session_id, "
        "resource_id, content_type, name, internal_uri, source, sha256, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (user_id, session_id, internal_uri) DO UPDATE SET deleted_at = NULL, "
        "name = excluded.name, content_type = excluded.content_type",
        [
            (m.id, m.user_id, m.app_id, m.project_id, m.session_id, m.resource_id,
             m.content_type, m.name, m.internal_uri, m.source, m.sha256, created)
            for m in mappings
        ],
    )


# --- reads for search -------------------------------------------------------------------------


async def session_versions(
    db: Database, session_ids: Sequence[str]
) -> list[tuple[str, str, str, str, int]]:
    """(app_id, project_id, session_id, owner, mappings_version) of every scope of these ids."""
    if not session_ids:
        return []
    return await db.read_now(
        "SELECT app_id, project_id, session_id, user_id, mappings_version FROM memory_sessions "
        "WHERE session_id IN (SELECT value FROM json_each(?))",
        (orjson.dumps(list(session_ids)).decode(),),
    )


async def live_mappings(
    db: Database, user_id: str, session_ids: Sequence[str]
) -> dict[str, list[Row]]:
    """The caller's live mappings of these sessions, grouped by session."""
    rows = await db.read(
        "SELECT id, session_id, name, internal_uri, content_type, source, resource_id "
        "FROM memory_attachments WHERE user_id = ? "
        "AND session_id IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL",
        (user_id, json.dumps(list(session_ids))),
    )
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row["session_id"], []).append(row)
    return grouped


async def stored_mapping(db: Database, user_id: str, mapping_id: str) -> AttachmentMapping | None:
    """The caller's live mapping whose file the gateway stores, or None."""
    row = await db.read_one(
        "SELECT id, user_id, app_id, project_id, session_id, resource_id, content_type, name, "
        "internal_uri, source, sha256 FROM memory_attachments "
        "WHERE id = ? AND user_id = ? AND deleted_at IS NULL",
        (mapping_id, user_id),
    )
    if row is None or row["source"] not in STORED_SOURCES:
        return None
    return AttachmentMapping(*(row[key] for key in (
        "id", "user_id", "app_id", "project_id", "session_id", "resource_id", "content_type",
        "name", "internal_uri", "source", "sha256")))


async def mappings_of_uris(
    db: Database, user_id: str, internal_uris: Sequence[str], session_id: str | None = None
) -> list[Row]:
    """The caller's live mappings of these files (of one session when given), oldest first:
    what a search attachment or an added file is known as (the MCP tools' `uri`s)."""
    if not internal_uris:
        return []
    sql = ("SELECT id, session_id, resource_id, content_type, name, internal_uri, source, sha256 "
           "FROM memory_attachments WHERE user_id = ? AND deleted_at IS NULL "
           "AND internal_uri IN (SELECT value FROM json_each(?))")
    params: list[Any] = [user_id, json.dumps(list(internal_uris))]
    if session_id is not None:
        sql += " AND session_id = ?"
        params.append(session_id)
    return await db.read(sql + " ORDER BY created_at, id", params)


async def added_mappings(db: Database, user_id: str, session_id: str,
                         sha256s: Sequence[str]) -> list[Row]:
    """The caller's live inline files of one session with these digests, newest first."""
    if not sha256s:
        return []
    return await db.read(
        "SELECT id, name, content_type, sha256 FROM memory_attachments WHERE user_id = ? "
        "AND session_id = ? AND source = ? AND deleted_at IS NULL "
        "AND sha256 IN (SELECT value FROM json_each(?)) ORDER BY created_at DESC, id DESC",
        (user_id, session_id, BASE64_SOURCE, json.dumps(list(sha256s))),
    )


async def sessions_page(db: Database, user_id: str, limit: int,
                        before: tuple[int, str] | None) -> list[Row]:
    """The caller's sessions (first claimed at `created_at`), newest first; `before` continues
    strictly below a (created_at, session_id) pair. Resource sessions are not listed."""
    sql = ("SELECT session_id, MIN(created_at) AS created_at FROM memory_sessions "
           "WHERE user_id = ? AND session_id NOT LIKE 'resource:%' GROUP BY session_id")
    params: list[Any] = [user_id]
    if before is not None:
        sql += " HAVING MIN(created_at) < ? OR (MIN(created_at) = ? AND session_id < ?)"
        params += [before[0], before[0], before[1]]
    return await db.read(sql + " ORDER BY created_at DESC, session_id DESC LIMIT ?",
                         [*params, limit])


# --- backfill ---------------------------------------------------------------------------------


async def backfill(db: Database) -> int:
    """Give every live resource its mapping (idempotent); returns how many were (re)made."""
    async with db.write() as tx:
        missing = await tx.read(
            "SELECT r.id, r.user_id, r.app_id, r.project_id, r.session_id, r.content_type, r.name, "
            "r.internal_uri, r.sha256, r.created_at "
            "FROM resources r WHERE r.deleted_at IS NULL AND NOT EXISTS ("
            "  SELECT 1 FROM memory_attachments m WHERE m.user_id = r.user_id "
            "  AND m.session_id = r.session_id AND m.internal_uri = r.internal_uri "
            "  AND m.deleted_at IS NULL)"
        )
        for r in missing:
            await tx.execute(
                "INSERT INTO memory_attachments (id, user_id, app_id, project_id, session_id, "
                "resource_id, content_type, name, internal_uri, source, sha256, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (user_id, session_id, internal_uri) DO UPDATE SET deleted_at = NULL",
                (new_id("att"), r["user_id"], r["app_id"], r["project_id"], r["session_id"],
                 r["id"], r["content_type"], r["name"], r["internal_uri"], RESOURCE_SOURCE,
                 r["sha256"], r["created_at"]),
            )
        return len(missing)


def new_mapping(
    *,
    user_id: str,
    app_id: str,
    project_id: str,
    session_id: str,
    name: str,
    content_type: str,
    internal_uri: str,
    source: str,
    resource_id: str | None = None,
    sha256: str | None = None,
    mapping_id: str | None = None,
) -> AttachmentMapping:
    return AttachmentMapping(
        mapping_id or new_id("att"), user_id, app_id, project_id, session_id, resource_id,
        content_type, name, internal_uri, source, sha256,
    )


async def user_mappings(db: Database, user_id: str, limit: int) -> list[Row]:
    """A user's live mappings by session, then name (the operator console's user page)."""
    return await db.read(
        "SELECT id, session_id, name, internal_uri, content_type, source, resource_id "
        "FROM memory_attachments "
        "WHERE user_id = ? AND deleted_at IS NULL ORDER BY session_id, name, id LIMIT ?",
        (user_id, limit))
