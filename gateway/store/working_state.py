"""Per-chat working memory (`conversation_working_state`) and turn results (`chat_turn_results`).

A chat id is the client's own string, scoped by user. A chat with no row reads as the defaults.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from gateway.store.assets import require_owned
from gateway.store.database import Database, Row, Transaction
from gateway.store.ids import new_id, now_ms
from gateway.store.records import Record


class ChatWorkingState(Record):
    current_focus_asset_id: str | None = None
    selected_asset_ids: list[str] = []
    last_uploaded_asset_ids: list[str] = []
    last_generated_asset_ids: list[str] = []
    last_referenced_asset_ids: list[str] = []
    last_resolved_asset_ids: list[str] = []
    active_canvas_node_ids: list[str] = []
    last_canvas_snapshot: list[dict[str, Any]] | None = None
    turn_count: int = 0
    updated_at_ms: int | None = Field(
        default=None, description="null until the chat has a stored state"
    )

    def asset_ids(self) -> list[str]:
        """Every asset id the state names, focus first."""
        ids = [self.current_focus_asset_id] if self.current_focus_asset_id else []
        for group in (
            self.selected_asset_ids,
            self.last_uploaded_asset_ids,
            self.last_generated_asset_ids,
            self.last_referenced_asset_ids,
            self.last_resolved_asset_ids,
        ):
            ids.extend(group)
        return list(dict.fromkeys(ids))


class TurnResult(Record):
    id: str
    chat_id: str
    asset_ids: list[str]
    created_at_ms: int


_ID_LISTS = ("selected_asset_ids", "last_uploaded_asset_ids", "last_generated_asset_ids",
             "last_referenced_asset_ids", "last_resolved_asset_ids", "active_canvas_node_ids")


def _state(row: Row | None) -> ChatWorkingState:
    if row is None:
        return ChatWorkingState()
    snapshot = row["last_canvas_snapshot"]
    return ChatWorkingState.from_row(
        row, last_canvas_snapshot=None if snapshot is None else json.loads(snapshot),
        **{name: json.loads(row[name]) for name in _ID_LISTS},
    )


def _result(row: Row) -> TurnResult:
    return TurnResult.from_row(row, asset_ids=json.loads(row["asset_ids"]))


_SELECT_STATE = "SELECT * FROM conversation_working_state WHERE user_id = ? AND chat_id = ?"


async def get(db: Database | Transaction, user_id: str, chat_id: str) -> ChatWorkingState:
    return _state(await db.read_one(_SELECT_STATE, (user_id, chat_id)))


async def write_state(
    tx: Transaction, user_id: str, chat_id: str, state: ChatWorkingState
) -> ChatWorkingState:
    """Store the whole state (inside the caller's transaction); returns it as stored."""
    now = now_ms()
    snapshot = state.last_canvas_snapshot
    await tx.execute(
        "INSERT INTO conversation_working_state (user_id, chat_id, current_focus_asset_id,"
        " selected_asset_ids, last_uploaded_asset_ids, last_generated_asset_ids,"
        " last_referenced_asset_ids, last_resolved_asset_ids, active_canvas_node_ids,"
        " last_canvas_snapshot, turn_count, updated_at_ms)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (user_id, chat_id) DO UPDATE SET"
        " current_focus_asset_id = excluded.current_focus_asset_id,"
        " selected_asset_ids = excluded.selected_asset_ids,"
        " last_uploaded_asset_ids = excluded.last_uploaded_asset_ids,"
        " last_generated_asset_ids = excluded.last_generated_asset_ids,"
        " last_referenced_asset_ids = excluded.last_referenced_asset_ids,"
        " last_resolved_asset_ids = excluded.last_resolved_asset_ids,"
        " active_canvas_node_ids = excluded.active_canvas_node_ids,"
        " last_canvas_snapshot = excluded.last_canvas_snapshot,"
        " turn_count = excluded.turn_count,"
        " updated_at_ms = excluded.updated_at_ms",
        (
            user_id,
            chat_id,
            state.current_focus_asset_id,
            json.dumps(state.selected_asset_ids),
            json.dumps(state.last_uploaded_asset_ids),
            json.dumps(state.last_generated_asset_ids),
            json.dumps(state.last_referenced_asset_ids),
            json.dumps(state.last_resolved_asset_ids),
            json.dumps(state.active_canvas_node_ids),
            None if snapshot is None else json.dumps(snapshot, ensure_ascii=False),
            state.turn_count,
            now,
        ),
    )
    return _state(await tx.read_one(_SELECT_STATE, (user_id, chat_id)))


async def replace(
    db: Database, user_id: str, chat_id: str, state: ChatWorkingState
) -> ChatWorkingState:
    """Replace a chat's working state; the turn count is kept (it counts resolutions).

    The caller has checked that every asset id it names is the user's.
    """
    async with db.write() as tx:
        current = await get(tx, user_id, chat_id)
        return await write_state(
            tx, user_id, chat_id, state.model_copy(update={"turn_count": current.turn_count})
        )


async def record_result(
    db: Database, user_id: str, chat_id: str, asset_ids: list[str]
) -> tuple[TurnResult, ChatWorkingState]:
    """A turn's result assets: a `chat_turn_results` row, and they become the last generated
    assets and (the first of them) the focus. Raises UnknownAssets for ids not the user's."""
    async with db.write() as tx:
        return await record_result_in(tx, user_id, chat_id, asset_ids)


async def record_result_in(
    tx: Transaction, user_id: str, chat_id: str, asset_ids: list[str]
) -> tuple[TurnResult, ChatWorkingState]:
    """`record_result` inside the caller's transaction."""
    ids = list(dict.fromkeys(asset_ids))
    result = TurnResult(id=new_id("trn"), chat_id=chat_id, asset_ids=ids, created_at_ms=now_ms())
    await require_owned(tx, user_id, ids)
    await tx.execute(
        "INSERT INTO chat_turn_results (id, user_id, chat_id, asset_ids, created_at_ms)"
        " VALUES (?, ?, ?, ?, ?)",
        (result.id, user_id, chat_id, json.dumps(ids), result.created_at_ms),
    )
    current = await get(tx, user_id, chat_id)
    updated = current.model_copy(
        update={"last_generated_asset_ids": ids, "current_focus_asset_id": ids[0]}
    )
    state = await write_state(tx, user_id, chat_id, updated)
    return result, state


RESULT_TURNS = 100  # how many of a chat's most recent result turns the resolver reads


async def result_turns(
    db: Database | Transaction, user_id: str, chat_id: str, *, limit: int = RESULT_TURNS
) -> list[TurnResult]:
    """The chat's most recent `limit` turn results, oldest first."""
    rows = await db.read(
        "SELECT * FROM chat_turn_results WHERE user_id = ? AND chat_id = ?"
        " ORDER BY created_at_ms DESC, rowid DESC LIMIT ?",
        (user_id, chat_id, limit),
    )
    return [_result(row) for row in reversed(rows)]


async def latest_result(
    db: Database | Transaction, user_id: str, chat_id: str, *, min_assets: int = 1
) -> TurnResult | None:
    """The chat's most recent turn result with at least `min_assets` assets."""
    row = await db.read_one(
        "SELECT * FROM chat_turn_results WHERE user_id = ? AND chat_id = ?"
        " AND json_array_length(asset_ids) >= ? ORDER BY created_at_ms DESC, rowid DESC LIMIT 1",
        (user_id, chat_id, min_assets),
    )
    return None if row is None else _result(row)
