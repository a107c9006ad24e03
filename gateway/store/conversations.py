"""Conversations: the default one per user and agent, further ones, soft delete, rolling summary.

Messages and their bookkeeping live in `gateway/store/messages.py`.
"""

from __future__ import annotations

from pydantic import Field

from gateway.errors import NotFound
from gateway.store import agents
from gateway.store.cursors import Cursor, read_page
from gateway.store.database import Database, Row, Transaction
from gateway.store.ids import new_id, now_ms
from gateway.store.records import Record

DEFAULT_TITLE = "新对话"
TITLE_MAX_CODE_POINTS = 24


class Conversation(Record):
    id: str
    agent_id: str
    is_default: bool
    title: str
    summary: str | None
    summary_message_count: int = Field(exclude=True)  # the summariser's bookmark, not shown
    message_count: int
    last_message_at_ms: int | None
    created_at_ms: int
    updated_at_ms: int


def conversation_from_row(row: Row) -> Conversation:
    return Conversation.from_row(row)


def title_from_text(text: str) -> str:
    """A conversation title from the first user message: its first 24 code points, trimmed."""
    return text.strip()[:TITLE_MAX_CODE_POINTS].rstrip()


_LIVE = "user_id = ? AND deleted_at_ms IS NULL"


async def get(db: Database | Transaction, user_id: str, conversation_id: str) -> Conversation:
    """The caller's live conversation, or NotFound (deleted and foreign ones are missing)."""
    row = await db.read_one(
        f"SELECT * FROM conversations WHERE id = ? AND {_LIVE}", (conversation_id, user_id)
    )
    if row is None:
        raise NotFound("no such conversation")
    return conversation_from_row(row)


async def find_default(
    db: Database | Transaction, user_id: str, agent_id: str
) -> Conversation | None:
    row = await db.read_one(
        f"SELECT * FROM conversations WHERE agent_id = ? AND {_LIVE} AND is_default = 1",
        (agent_id, user_id),
    )
    return None if row is None else conversation_from_row(row)


async def default_for(db: Database, user_id: str, agent_id: str) -> Conversation:
    """Get-or-create the default conversation of (user, agent); the same one on every call."""
    found = await find_default(db, user_id, agent_id)
    if found is not None:
        return found
    async with db.write() as tx:
        await agents.require(tx, user_id, agent_id)
        # Checked again under the write lock: a concurrent first call may have created it.
        found = await find_default(tx, user_id, agent_id)
        if found is not None:
            return found
        return await _insert(tx, user_id, agent_id, is_default=True, title=None)


async def create(db: Database, user_id: str, agent_id: str, title: str | None) -> Conversation:
    async with db.write() as tx:
        await agents.require(tx, user_id, agent_id)
        return await _insert(tx, user_id, agent_id, is_default=False, title=title)


async def _insert(
    tx: Transaction, user_id: str, agent_id: str, *, is_default: bool, title: str | None
) -> Conversation:
    now = now_ms()
    conversation_id = new_id("cnv")
    await tx.execute(
        "INSERT INTO conversations (id, user_id, agent_id, is_default, title, title_fixed,"
        " created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (conversation_id, user_id, agent_id, int(is_default), title or DEFAULT_TITLE,
         int(title is not None), now, now),
    )
    return await get(tx, user_id, conversation_id)


async def list_for_agent(
    db: Database, user_id: str, agent_id: str, limit: int, after: Cursor | None
) -> tuple[list[Conversation], str | None]:
    """Most recently updated first; NotFound when the agent is not the caller's."""
    await agents.require(db, user_id, agent_id)
    sql = f"SELECT * FROM conversations WHERE agent_id = ? AND {_LIVE}"
    return await read_page(db, sql, [agent_id, user_id], ("updated_at_ms", "id"), after, limit,
                           conversation_from_row,
                           lambda conversation: (conversation.updated_at_ms, conversation.id))


async def delete(db: Database, user_id: str, conversation_id: str) -> None:
    async with db.write() as tx:
        changed = await tx.update(
            "conversations", {"deleted_at_ms": now_ms()}, f"id = ? AND {_LIVE}",
            (conversation_id, user_id),
        )
    if changed != 1:
        raise NotFound("no such conversation")


async def store_summary(
    db: Database, user_id: str, conversation_id: str, summary: str, message_count: int
) -> bool:
    """Keep a summary covering the first `message_count` messages, unless a newer one is kept."""
    async with db.write() as tx:
        changed = await tx.execute(
            f"UPDATE conversations SET summary = ?, summary_message_count = ?,"
            f" summary_updated_at_ms = ? WHERE id = ? AND {_LIVE} AND summary_message_count < ?",
            (summary, message_count, now_ms(), conversation_id, user_id, message_count),
        )
    return changed == 1
