"""Agents: rows of `agents`, listed by latest conversation activity (SPEC §10)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import Field

from gateway.errors import NotFound
from gateway.store.cursors import Cursor, read_page
from gateway.store.database import Database, Row, Transaction
from gateway.store.ids import new_id, now_ms
from gateway.store.records import Record

_UNSET: Any = object()


class Agent(Record):
    id: str
    name: str
    profile: dict[str, Any]
    opening_message: str | None
    created_at_ms: int
    updated_at_ms: int
    last_message_at_ms: int | None
    activity_at_ms: int = Field(exclude=True)  # the list's sort key, not shown


def _agent(row: Row) -> Agent:
    return Agent.from_row(row, profile=json.loads(row["profile"]))


_LIVE = "user_id = ? AND deleted_at_ms IS NULL"


async def create(
    db: Database, user_id: str, name: str, profile: dict[str, Any], opening_message: str | None
) -> Agent:
    now = now_ms()
    agent_id = new_id("agt")
    async with db.write() as tx:
        await tx.execute(
            "INSERT INTO agents (id, user_id, name, profile, opening_message, activity_at_ms,"
            " created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (agent_id, user_id, name, json.dumps(profile, ensure_ascii=False), opening_message,
             now, now, now),
        )
        return await require(tx, user_id, agent_id)


async def get(db: Database | Transaction, user_id: str, agent_id: str) -> Agent | None:
    row = await db.read_one(f"SELECT * FROM agents WHERE id = ? AND {_LIVE}", (agent_id, user_id))
    return None if row is None else _agent(row)


async def require(db: Database | Transaction, user_id: str, agent_id: str) -> Agent:
    """The caller's live agent, or NotFound (another user's agent is a missing one)."""
    agent = await get(db, user_id, agent_id)
    if agent is None:
        raise NotFound("no such agent")
    return agent


async def list_page(
    db: Database, user_id: str, limit: int, after: Cursor | None
) -> tuple[list[Agent], str | None]:
    """Most recent activity first; `after` continues a previous page."""
    sql = f"SELECT * FROM agents WHERE {_LIVE}"
    return await read_page(db, sql, [user_id], ("activity_at_ms", "id"), after, limit, _agent,
                           lambda agent: (agent.activity_at_ms, agent.id))


async def update(
    db: Database,
    user_id: str,
    agent_id: str,
    *,
    name: str = _UNSET,
    profile: dict[str, Any] = _UNSET,
    opening_message: str | None = _UNSET,
) -> Agent:
    changes: dict[str, Any] = {}
    if name is not _UNSET:
        changes["name"] = name
    if profile is not _UNSET:
        changes["profile"] = json.dumps(profile, ensure_ascii=False)
    if opening_message is not _UNSET:
        changes["opening_message"] = opening_message
    async with db.write() as tx:
        await require(tx, user_id, agent_id)
        changes["updated_at_ms"] = now_ms()
        await tx.update("agents", changes, f"id = ? AND {_LIVE}", (agent_id, user_id))
        return await require(tx, user_id, agent_id)


async def delete(db: Database, user_id: str, agent_id: str) -> None:
    """Soft delete: the agent and its conversations vanish from lists and reads."""
    now = now_ms()
    async with db.write() as tx:
        changed = await tx.update(
            "agents", {"deleted_at_ms": now}, f"id = ? AND {_LIVE}", (agent_id, user_id)
        )
        if changed != 1:
            raise NotFound("no such agent")
        await tx.execute(
            "UPDATE conversations SET deleted_at_ms = ?"
            " WHERE user_id = ? AND agent_id = ? AND deleted_at_ms IS NULL",
            (now, user_id, agent_id),
        )


def owns_agent(db: Database) -> Callable[[str, str], Awaitable[bool]]:
    """The proxy's "is this one of the caller's agents" check (SPEC §3): identity's
    `AgentCheck`, spelt out so the store imports nothing from the floors above it."""

    async def check(user_id: str, agent_id: str) -> bool:
        row = await db.read_one(
            f"SELECT 1 FROM agents WHERE id = ? AND {_LIVE}", (agent_id, user_id)
        )
        return row is not None

    return check
