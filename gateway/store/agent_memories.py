"""Agent memories: what an agent remembers about its user, with the message it came from (§11).

`active` ones go into prompts, `disabled` ones are kept but left out, `deleted` ones are gone.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import NotFound, ValidationFailed
from gateway.store import agents, messages
from gateway.store.cursors import Cursor, read_page
from gateway.store.database import Database, Row, Transaction
from gateway.store.ids import new_id, now_ms
from gateway.store.records import Record

_UNSET: Any = object()


class SourceMessage(Record):
    id: str
    role: str
    content: str
    created_at_ms: int


class AgentMemory(Record):
    id: str
    agent_id: str
    type: str
    content: str
    importance: int
    status: str
    source_message_id: str | None
    source_message: SourceMessage | None
    created_at_ms: int
    updated_at_ms: int


# The source message is embedded while it is still readable (its conversation not deleted).
_SELECT = (
    "SELECT am.*, m.id AS src_id, m.role AS src_role, m.content AS src_content,"
    " m.created_at_ms AS src_created_at_ms"
    " FROM agent_memories am"
    " LEFT JOIN conversation_messages m ON m.id = am.source_message_id AND m.user_id = am.user_id"
    " AND EXISTS (SELECT 1 FROM conversations c WHERE c.id = m.conversation_id"
    " AND c.user_id = am.user_id AND c.deleted_at_ms IS NULL)"
    " WHERE am.user_id = ? AND am.agent_id = ?"
)


def _memory(row: Row) -> AgentMemory:
    source = None
    if row["src_id"] is not None:
        source = SourceMessage(
            id=row["src_id"], role=row["src_role"], content=row["src_content"],
            created_at_ms=row["src_created_at_ms"],
        )
    return AgentMemory.from_row(row, source_message=source)


async def _require(
    db: Database | Transaction, user_id: str, agent_id: str, memory_id: str
) -> AgentMemory:
    row = await db.read_one(
        _SELECT + " AND am.id = ? AND am.status != 'deleted'", (user_id, agent_id, memory_id)
    )
    if row is None:
        raise NotFound("no such memory")
    return _memory(row)


async def get(db: Database, user_id: str, agent_id: str, memory_id: str) -> AgentMemory:
    await agents.require(db, user_id, agent_id)
    return await _require(db, user_id, agent_id, memory_id)


async def create(
    db: Database,
    user_id: str,
    agent_id: str,
    *,
    type: str,
    content: str,
    importance: int,
    status: str,
    source_message_id: str | None,
) -> AgentMemory:
    now = now_ms()
    memory_id = new_id("mem")
    async with db.write() as tx:
        await agents.require(tx, user_id, agent_id)
        if source_message_id is not None:
            source = await messages.find_in_agent(tx, user_id, agent_id, source_message_id)
            if source is None:
                raise ValidationFailed(
                    "sourceMessageId: not a message of your conversations with this agent",
                    field="sourceMessageId",
                )
        await tx.execute(
            "INSERT INTO agent_memories (id, user_id, agent_id, type, content, importance, status,"
            " source_message_id, created_at_ms, updated_at_ms)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (memory_id, user_id, agent_id, type, content, importance, status, source_message_id,
             now, now),
        )
        return await _require(tx, user_id, agent_id, memory_id)


async def list_page(
    db: Database,
    user_id: str,
    agent_id: str,
    statuses: tuple[str, ...],
    limit: int,
    after: Cursor | None,
) -> tuple[list[AgentMemory], str | None]:
    """Newest first, with the given statuses (never `deleted`)."""
    await agents.require(db, user_id, agent_id)
    marks = ", ".join("?" * len(statuses))
    sql = _SELECT + f" AND am.status IN ({marks})"
    return await read_page(db, sql, [user_id, agent_id, *statuses], ("am.created_at_ms", "am.id"),
                           after, limit, _memory, lambda memory: (memory.created_at_ms, memory.id))


async def for_prompt(db: Database, user_id: str, agent_id: str, limit: int) -> list[AgentMemory]:
    """The top active memories: most important first, then most recently updated."""
    rows = await db.read(
        _SELECT + " AND am.status = 'active'"
        " ORDER BY am.importance DESC, am.updated_at_ms DESC, am.id DESC LIMIT ?",
        (user_id, agent_id, limit),
    )
    return [_memory(row) for row in rows]


async def update(
    db: Database,
    user_id: str,
    agent_id: str,
    memory_id: str,
    *,
    type: str = _UNSET,
    content: str = _UNSET,
    importance: int = _UNSET,
    status: str = _UNSET,
) -> AgentMemory:
    changes = {
        column: value
        for column, value in (
            ("type", type), ("content", content), ("importance", importance), ("status", status)
        )
        if value is not _UNSET
    }
    async with db.write() as tx:
        await agents.require(tx, user_id, agent_id)
        await _require(tx, user_id, agent_id, memory_id)
        changes["updated_at_ms"] = now_ms()
        await tx.update("agent_memories", changes, "id = ? AND user_id = ? AND agent_id = ?",
                        (memory_id, user_id, agent_id))
        return await _require(tx, user_id, agent_id, memory_id)


async def delete(db: Database, user_id: str, agent_id: str, memory_id: str) -> None:
    async with db.write() as tx:
        await agents.require(tx, user_id, agent_id)
        changed = await tx.execute(
            "UPDATE agent_memories SET status = 'deleted', updated_at_ms = ?"
            " WHERE id = ? AND user_id = ? AND agent_id = ? AND status != 'deleted'",
            (now_ms(), memory_id, user_id, agent_id),
        )
        if changed != 1:
            raise NotFound("no such memory")
