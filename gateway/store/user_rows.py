"""Every row a user owns, table by table (SPEC §3: each carries `user_id`), and the erasure
records that remove them (migrations/0012): read in pages for an export, deleted in batches for
an erasure. `USER_TABLES` must name every table with a `user_id` column (tests/test_user_data.py
checks it against the schema), children before the parents their foreign keys point at.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import NotFound
from gateway.store.database import Database, Row, Transaction
from gateway.store.ids import now_ms


@dataclass(frozen=True)
class UserTable:
    name: str
    key: tuple[str, ...] = ("id",)  # the primary key: pages and batches walk it
    hidden: tuple[str, ...] = ()  # columns never exported (secrets, even hashed)
    # Rows an erasure hands to TOMBSTONE instead of deleting: what they name stays reserved.
    tombstoned: bool = False


# Deleted in this order (foreign keys: messages → conversations → agents, observations → facts,
# relations → assets); the keys go last, so a resumed erasure still finds the user revoked.
USER_TABLES: tuple[UserTable, ...] = (
    UserTable("memory_attachments"),
    UserTable("uploaded_objects", hidden=("token_sha256",)),
    UserTable("resources"),
    UserTable("pending_intents"),
    UserTable("tool_calls", ("message_id",)),
    UserTable("conversation_messages"),
    UserTable("conversations"),
    UserTable("agent_memories"),
    UserTable("agents"),
    UserTable("memory_fact_observations"),
    UserTable("memory_facts"),
    UserTable("media_asset_relations"),
    UserTable("media_assets"),
    UserTable("conversation_working_state", ("user_id", "chat_id")),
    UserTable("conversation_summary_memory", ("user_id", "chat_id")),
    UserTable("chat_turn_results"),
    UserTable("message_target_resolutions"),
    UserTable("dev_jobs"),
    UserTable("memory_sessions", ("app_id", "project_id", "session_id"), tombstoned=True),
    UserTable("api_keys", hidden=("secret_sha256",)),
)
PAGE_ROWS = 500
# The owner of an erased user's sessions, groups, runs and cubes (SPEC §17 "tombstoned"): the
# engine may still hold data under them, so they stay claimed by an owner no caller can be (a
# user id starts with a letter or digit) and every ownership check refuses them to everyone,
# a `fresh` returning user of the same id included. Kept for good: the gateway cannot tell
# when an engine stops holding data under an id (an add already on its way when the erasure
# began may land after the engine's own delete).
TOMBSTONE = "_erased"


def user_sha256(user_id: str) -> str:
    """What is kept of an erased user's id (domain-separated, so it is no other digest's)."""
    return hashlib.sha256(b"memory-gateway erased user\x00" + user_id.encode()).hexdigest()


async def tables_with_user_id(db: Database) -> set[str]:
    """Every table of the live schema that has a `user_id` column."""
    if db.dialect == "postgresql":
        rows = await db.read(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND column_name = 'user_id'")
        return {row[0] for row in rows}
    tables = await db.read("SELECT name FROM sqlite_master WHERE type = 'table'")
    found = set()
    for (name,) in ((row[0],) for row in tables):
        columns = await db.read(f"SELECT name FROM pragma_table_info('{name}')")
        if any(column[0] == "user_id" for column in columns):
            found.add(name)
    return found


def _after(table: UserTable) -> str:
    """`(k1, k2) > (?, ?)`: keyset paging on the table's key (row values: SQLite and PostgreSQL)."""
    columns = ", ".join(table.key)
    marks = ", ".join("?" for _ in table.key)
    return f"({columns}) > ({marks})" if len(table.key) > 1 else f"{columns} > ?"


async def user_rows(db: Database, table: UserTable, user_id: str
                    ) -> AsyncIterator[dict[str, Any]]:
    """The user's rows of `table` in key order, PAGE_ROWS at a time (bounded memory)."""
    order = ", ".join(table.key)
    last: tuple[Any, ...] | None = None
    while True:
        if last is None:
            rows = await db.read(f"SELECT * FROM {table.name} WHERE user_id = ? ORDER BY {order} "
                                 "LIMIT ?", (user_id, PAGE_ROWS))
        else:
            rows = await db.read(f"SELECT * FROM {table.name} WHERE user_id = ? AND "
                                 f"{_after(table)} ORDER BY {order} LIMIT ?",
                                 (user_id, *last, PAGE_ROWS))
        for row in rows:
            found = dict(row)
            for column in table.hidden:
                found.pop(column, None)
            yield found
        if len(rows) < PAGE_ROWS:
            return
        last = tuple(rows[-1][column] for column in table.key)


async def count_rows(db: Database, table: UserTable, user_id: str) -> int:
    row = await db.read_one(f"SELECT COUNT(*) FROM {table.name} WHERE user_id = ?", (user_id,))
    return int(row[0]) if row is not None else 0


# --- erasures ---------------------------------------------------------------------------------

ERASING = "erasing"
ERASED = "erased"


@dataclass
class Erasure:
    user_sha256: str
    user_id: str | None  # None once finished
    status: str
    admin_key_id: str
    sessions: list[str]  # the user's engine sessions, as known when the erasure began
    engine: dict[str, Any]
    counts: dict[str, int] = field(default_factory=dict)
    started_at_ms: int = 0
    finished_at_ms: int | None = None


def _erasure(row: Row) -> Erasure:
    return Erasure(row["user_sha256"], row["erasing_user_id"], row["status"],
                   row["admin_key_id"], json.loads(row["sessions"]), json.loads(row["engine"]),
                   json.loads(row["counts"]), row["started_at_ms"], row["finished_at_ms"])


async def erasure(db: Database, user_id: str) -> Erasure | None:
    row = await db.read_one("SELECT * FROM user_erasures WHERE user_sha256 = ?",
                            (user_sha256(user_id),))
    return None if row is None else _erasure(row)


async def erasure_status(db: Database, user_id: str) -> str | None:
    """The status of the user's erasure, by the cheapest read (every request asks)."""
    rows = await db.read_now("SELECT status FROM user_erasures WHERE user_sha256 = ?",
                             (user_sha256(user_id),))
    return str(rows[0][0]) if rows else None


async def unfinished(db: Database) -> list[str]:
    """The user ids of erasures a crash interrupted (or that run in another process)."""
    rows = await db.read("SELECT erasing_user_id FROM user_erasures WHERE status = ? "
                         "ORDER BY started_at_ms", (ERASING,))
    return [row[0] for row in rows if row[0]]


async def _sessions(tx: Transaction, user_id: str) -> list[str]:
    found: set[str] = set()
    for table in ("memory_sessions", "resources", "memory_attachments"):
        rows = await tx.read(f"SELECT DISTINCT session_id FROM {table} WHERE user_id = ?",
                             (user_id,))
        found.update(row[0] for row in rows)
    return sorted(found)


async def begin_erasure(db: Database, user_id: str, admin_key_id: str) -> tuple[Erasure, bool]:
    """Record the erasure and revoke every key of the user, in one transaction, before anything
    else is removed; (the erasure, whether it was started now). An erasure already running is
    returned as it stands; a finished one too, unless the user has rows again (an id let back
    in by `auth.erased_users = "fresh"`), which starts a new one."""
    digest = user_sha256(user_id)
    now = now_ms()
    async with db.write() as tx:
        row = await tx.read_one("SELECT * FROM user_erasures WHERE user_sha256 = ?", (digest,))
        if row is not None and row["status"] == ERASING:
            return _erasure(row), False
        if row is not None and not await _has_rows(tx, user_id):
            return _erasure(row), False
        if row is None and not await _has_rows(tx, user_id):
            raise NotFound(f"no such user: {user_id}")  # never seen: nothing to erase or record
        sessions = json.dumps(await _sessions(tx, user_id))
        if row is None:
            await tx.execute(
                "INSERT INTO user_erasures (user_sha256, erasing_user_id, status, admin_key_id, "
                "sessions, started_at_ms) VALUES (?, ?, ?, ?, ?, ?)",
                (digest, user_id, ERASING, admin_key_id, sessions, now))
        else:
            # What an earlier erasure left upstream is still there: the new one reports it too.
            kept = {"remaining": json.loads(row["engine"]).get("remaining", [])}
            await tx.update("user_erasures", {
                "erasing_user_id": user_id, "status": ERASING, "admin_key_id": admin_key_id,
                "sessions": sessions, "engine": json.dumps(kept), "counts": "{}",
                "started_at_ms": now, "finished_at_ms": None}, "user_sha256 = ?", (digest,))
        await tx.execute("UPDATE api_keys SET revoked_at_ms = ? WHERE user_id = ? "
                         "AND revoked_at_ms IS NULL", (now, user_id))
        found = await tx.read_one("SELECT * FROM user_erasures WHERE user_sha256 = ?", (digest,))
    assert found is not None
    return _erasure(found), True


async def require_known(db: Database, user_id: str) -> None:
    """NotFound (404) for an id the gateway has never seen (SPEC §17: erase and export of such an
    id record nothing), for every door: the admin API, the CLI and the console."""
    if not await known(db, user_id):
        raise NotFound(f"no such user: {user_id}")


async def known(db: Database, user_id: str) -> bool:
    """Whether the gateway has ever seen the user: a key or a row of theirs, or an erasure."""
    if await db.read_one("SELECT 1 FROM user_erasures WHERE user_sha256 = ?",
                         (user_sha256(user_id),)) is not None:
        return True
    for table in USER_TABLES:
        if await db.read_one(f"SELECT 1 FROM {table.name} WHERE user_id = ? LIMIT 1",
                             (user_id,)) is not None:
            return True
    return False


async def refused_in(tx: Transaction, user_id: str, refuse_erased: bool) -> bool:
    """Whether a credential naming the user would be refused as erased (userdata/refusal.py's
    rule, read in the caller's transaction): an erasure runs, or one finished under "refuse"."""
    row = await tx.read_one("SELECT status FROM user_erasures WHERE user_sha256 = ?",
                            (user_sha256(user_id),))
    return row is not None and (row[0] == ERASING or refuse_erased)


async def _has_rows(tx: Transaction, user_id: str) -> bool:
    for table in USER_TABLES:
        if await tx.read_one(f"SELECT 1 FROM {table.name} WHERE user_id = ? LIMIT 1",
                             (user_id,)) is not None:
            return True
    return False


async def _add_counts(tx: Transaction, digest: str, kind: str, removed: int) -> None:
    row = await tx.read_one("SELECT counts FROM user_erasures WHERE user_sha256 = ?", (digest,))
    counts = json.loads(row[0]) if row is not None else {}
    counts[kind] = counts.get(kind, 0) + removed
    await tx.update("user_erasures", {"counts": json.dumps(counts, sort_keys=True)},
                    "user_sha256 = ?", (digest,))


async def delete_batch(db: Database, table: UserTable, user_id: str, limit: int) -> int:
    """Delete up to `limit` of the user's rows of `table` (or hand them to TOMBSTONE, for a
    `tombstoned` table), counting them on the erasure in the same transaction; the rows
    removed from the user (0 once none are left)."""
    key = ", ".join(table.key)
    target = f"({key})" if len(table.key) > 1 else key
    change = (f"UPDATE {table.name} SET user_id = '{TOMBSTONE}'" if table.tombstoned
              else f"DELETE FROM {table.name}")
    async with db.write() as tx:
        removed = await tx.execute(
            f"{change} WHERE user_id = ? AND {target} IN "
            f"(SELECT {key} FROM {table.name} WHERE user_id = ? LIMIT ?)",
            (user_id, user_id, limit))
        if removed:
            await _add_counts(tx, user_sha256(user_id), table.name, removed)
    return removed


async def count_files(db: Database, user_id: str, removed: int) -> None:
    async with db.write() as tx:
        await _add_counts(tx, user_sha256(user_id), "files", removed)


async def settle_engine(db: Database, user_id: str, engine: dict[str, Any]) -> None:
    async with db.write() as tx:
        await tx.update("user_erasures", {"engine": json.dumps(engine, sort_keys=True)},
                        "user_sha256 = ?", (user_sha256(user_id),))


async def finish_erasure(db: Database, user_id: str) -> Erasure:
    """Mark the erasure done and forget the id in clear (only its digest stays)."""
    digest = user_sha256(user_id)
    async with db.write() as tx:
        await tx.update("user_erasures", {"status": ERASED, "erasing_user_id": None,
                                          "finished_at_ms": now_ms()},
                        "user_sha256 = ? AND status = ?", (digest, ERASING))
        row = await tx.read_one("SELECT * FROM user_erasures WHERE user_sha256 = ?", (digest,))
    assert row is not None
    return _erasure(row)
