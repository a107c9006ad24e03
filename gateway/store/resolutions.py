"""The target-resolution audit (`message_target_resolutions`), written with the working state.

One resolution is one transaction: the audit row and the chat's working-state update commit
together or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from gateway.store import working_state
from gateway.store.cursors import Cursor
from gateway.store.database import Database, Row
from gateway.store.ids import new_id, now_ms
from gateway.store.records import Record
from gateway.store.working_state import ChatWorkingState


class Audit(Record):
    """What one resolution saw and decided."""

    raw_text: str
    uploaded_asset_ids: list[str]
    selected_asset_ids: list[str]
    candidate_asset_ids: list[str]
    resolved_asset_ids: list[str]
    resolution_mode: str
    confidence: int
    needs_clarification: bool
    reasoning: str


class _Key(Record):
    id: str
    chat_id: str


# A stored audit, also the API's answer: id and chat, the audit, then the time (pydantic lists
# the fields of the last base first, hence the order of the bases).
class Resolution(Audit, _Key):
    created_at_ms: int


_ID_LISTS = ("uploaded_asset_ids", "selected_asset_ids", "candidate_asset_ids",
             "resolved_asset_ids")  # JSON text in their columns


def _resolution(row: Row) -> Resolution:
    return Resolution.from_row(row, **{name: json.loads(row[name]) for name in _ID_LISTS})


async def record(
    db: Database,
    user_id: str,
    chat_id: str,
    audit: Audit,
    next_state: Callable[[ChatWorkingState], ChatWorkingState],
) -> tuple[Resolution, ChatWorkingState]:
    """Write the audit row and the working state `next_state` makes of the stored one.

    The stored state is read inside the write transaction, so concurrent turns of one chat
    each count once.
    """
    resolution = Resolution(
        id=new_id("rsl"), chat_id=chat_id, created_at_ms=now_ms(), **dict(audit)
    )
    async with db.write() as tx:
        await tx.execute(
            "INSERT INTO message_target_resolutions (id, user_id, chat_id, raw_text,"
            " uploaded_asset_ids, selected_asset_ids, candidate_asset_ids, resolved_asset_ids,"
            " resolution_mode, confidence, needs_clarification, reasoning, created_at_ms)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                resolution.id,
                user_id,
                chat_id,
                audit.raw_text,
                json.dumps(audit.uploaded_asset_ids),
                json.dumps(audit.selected_asset_ids),
                json.dumps(audit.candidate_asset_ids),
                json.dumps(audit.resolved_asset_ids),
                audit.resolution_mode,
                audit.confidence,
                int(audit.needs_clarification),
                audit.reasoning,
                resolution.created_at_ms,
            ),
        )
        current = await working_state.get(tx, user_id, chat_id)
        state = await working_state.write_state(tx, user_id, chat_id, next_state(current))
    return resolution, state


async def list_for_chat(
    db: Database,
    user_id: str,
    chat_id: str,
    limit: int,
    before: Cursor | None = None,
) -> list[Resolution]:
    """A chat's resolutions, newest first; `before` = (created_at_ms, id) of the last one seen."""
    if before is None:
        rows = await db.read(
            "SELECT * FROM message_target_resolutions WHERE user_id = ? AND chat_id = ?"
            " ORDER BY created_at_ms DESC, id DESC LIMIT ?",
            (user_id, chat_id, limit),
        )
    else:
        rows = await db.read(
            "SELECT * FROM message_target_resolutions WHERE user_id = ? AND chat_id = ?"
            " AND (created_at_ms < ? OR (created_at_ms = ? AND id < ?))"
            " ORDER BY created_at_ms DESC, id DESC LIMIT ?",
            (user_id, chat_id, before.key, before.key, before.id, limit),
        )
    return [_resolution(row) for row in rows]


async def recent(db: Database, user_id: str | None, chat_id: str | None, limit: int,
                 before: Cursor | None = None) -> list[tuple[str, Resolution]]:
    """Resolutions of every user (or of one user, or one chat of theirs), newest first, each
    with its user: the operator console's view of the audit."""
    where: list[str] = []
    params: list[object] = []
    if user_id:
        where.append("user_id = ?")
        params.append(user_id)
    if chat_id:
        where.append("chat_id = ?")
        params.append(chat_id)
    if before is not None:
        where.append("(created_at_ms < ? OR (created_at_ms = ? AND id < ?))")
        params += [before.key, before.key, before.id]
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    rows = await db.read(
        f"SELECT * FROM message_target_resolutions {clause}"
        "ORDER BY created_at_ms DESC, id DESC LIMIT ?", (*params, limit))
    return [(row["user_id"], _resolution(row)) for row in rows]
