"""Rows of `tool_calls`: one per `role = "tool"` message (SPEC §16), scoped to the user.

Every change is a compare-and-set on the columns the state machine reads (status,
confirmed_at_ms, external_job_id), so two processes can never both move one call: the loser
changes no row and reads the winner's result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.errors import IdempotencyConflict
from gateway.store import assets, conversations, messages, working_state
from gateway.store.conversations import Conversation
from gateway.store.cursors import Cursor
from gateway.store.database import Database, Row, Transaction
from gateway.store.ids import new_id, now_ms
from gateway.store.messages import Message, NewMessage


@dataclass(frozen=True)
class ToolCall:
    message_id: str
    conversation_id: str
    tool_name: str
    job_kind: str
    args: dict[str, Any]
    display_args: dict[str, Any]
    input_images: list[dict[str, Any]]
    status: str  # not_completed | completed | failed | cancelled
    dedupe_key: str
    external_job_id: str | None
    confirmed_at_ms: int | None
    result: dict[str, Any] | None
    error: str | None
    created_at_ms: int
    updated_at_ms: int

    @property
    def input_asset_ids(self) -> list[str]:
        return list(dict.fromkeys(image["assetId"] for image in self.input_images))


@dataclass(frozen=True)
class NewToolCall:
    client_message_id: str
    tool_name: str
    job_kind: str
    args: dict[str, Any]
    display_args: dict[str, Any]
    input_images: list[dict[str, Any]]
    assistant_text: str
    fingerprint: str  # of toolName, canonical args and assistantText: what a retry repeats


@dataclass(frozen=True)
class Proposed:
    conversation: Conversation
    message: Message
    created: bool  # False: a retry answered with the stored call


@dataclass(frozen=True)
class GeneratedImage:
    """An image a finished job made, to register as a generated asset of the chat."""

    asset_id: str
    url: str
    mime_type: str | None
    width: int | None
    height: int | None


@dataclass(frozen=True)
class Settlement:
    """What one read of a job decided for a running call."""

    message_id: str
    job_id: str
    status: str  # completed | failed
    result: dict[str, Any] | None = None
    error: str | None = None
    images: tuple[GeneratedImage, ...] = ()


def dedupe_key(conversation_id: str, message_id: str, tool_name: str) -> str:
    return f"editor-agent:{conversation_id}:{message_id}:{tool_name}"


def _call(row: Row) -> ToolCall:
    return ToolCall(
        message_id=row["message_id"],
        conversation_id=row["conversation_id"],
        tool_name=row["tool_name"],
        job_kind=row["job_kind"],
        args=json.loads(row["args"]),
        display_args=json.loads(row["display_args"]),
        input_images=json.loads(row["input_images"]),
        status=row["status"],
        dedupe_key=row["dedupe_key"],
        external_job_id=row["external_job_id"],
        confirmed_at_ms=row["confirmed_at_ms"],
        result=None if row["result"] is None else json.loads(row["result"]),
        error=row["error"],
        created_at_ms=row["created_at_ms"],
        updated_at_ms=row["updated_at_ms"],
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def propose(
    db: Database, user_id: str, conversation_id: str, new: NewToolCall
) -> Proposed:
    """Append the tool message and its call in one transaction; idempotent by clientMessageId."""
    async with db.write() as tx:
        conversation = await conversations.get(tx, user_id, conversation_id)
        stored = await messages.find_by_client_id(
            tx, user_id, conversation_id, new.client_message_id
        )
        if stored is not None:
            if stored.fingerprint != new.fingerprint or stored.message.role != "tool":
                raise IdempotencyConflict(field="clientMessageId")
            message = (await attach(tx, user_id, [stored.message]))[0]
            return Proposed(conversation, message, created=False)
        message_id = new_id("msg")
        message = await messages.insert(
            tx, user_id, conversation,
            NewMessage(new.client_message_id, "tool", new.assistant_text),
            new.fingerprint, message_id=message_id,
        )
        now = now_ms()
        await tx.execute(
            "INSERT INTO tool_calls (message_id, user_id, conversation_id, tool_name, job_kind,"
            " args, display_args, input_images, status, dedupe_key, created_at_ms,"
            " updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'not_completed', ?, ?, ?)",
            (message_id, user_id, conversation_id, new.tool_name, new.job_kind, _json(new.args),
             _json(new.display_args), _json(new.input_images),
             dedupe_key(conversation_id, message_id, new.tool_name), now, now),
        )
        message = (await attach(tx, user_id, [message]))[0]
        return Proposed(
            await conversations.get(tx, user_id, conversation_id), message, created=True
        )


_SELECT = "SELECT * FROM tool_calls WHERE user_id = ? AND conversation_id = ? AND message_id = ?"


async def get(
    db: Database | Transaction, user_id: str, conversation_id: str, message_id: str
) -> ToolCall | None:
    """The caller's call on this message of this conversation; None for any other."""
    row = await db.read_one(_SELECT, (user_id, conversation_id, message_id))
    return None if row is None else _call(row)


async def message_of(db: Database, user_id: str, call: ToolCall) -> Message:
    row = await db.read_one(
        "SELECT * FROM conversation_messages WHERE user_id = ? AND id = ?",
        (user_id, call.message_id),
    )
    assert row is not None  # written with its call in one transaction
    return messages.message_from_row(row).model_copy(update={"tool_call": call})


async def _change(
    db: Database,
    user_id: str,
    call: ToolCall,
    changes: dict[str, Any],
    condition: str,
) -> ToolCall:
    """Apply `changes` when `condition` still holds; the call as stored afterwards."""
    async with db.write() as tx:
        await tx.update(
            "tool_calls", {**changes, "updated_at_ms": now_ms()},
            f"user_id = ? AND conversation_id = ? AND message_id = ? AND {condition}",
            (user_id, call.conversation_id, call.message_id),
        )
        found = await get(tx, user_id, call.conversation_id, call.message_id)
    assert found is not None
    return found


async def mark_confirmed(db: Database, user_id: str, call: ToolCall) -> ToolCall:
    """proposed → confirming, unless it moved meanwhile (the answer shows where it is)."""
    return await _change(
        db, user_id, call, {"confirmed_at_ms": now_ms()},
        "status = 'not_completed' AND confirmed_at_ms IS NULL",
    )


async def set_job(db: Database, user_id: str, call: ToolCall, job_id: str) -> ToolCall:
    """confirming → running with the job's id; a job id already written stays."""
    return await _change(
        db, user_id, call, {"external_job_id": job_id},
        "status = 'not_completed' AND confirmed_at_ms IS NOT NULL AND external_job_id IS NULL",
    )


async def cancel(db: Database, user_id: str, call: ToolCall) -> ToolCall:
    """proposed → cancelled, unless it was confirmed meanwhile."""
    return await _change(
        db, user_id, call, {"status": "cancelled"},
        "status = 'not_completed' AND confirmed_at_ms IS NULL",
    )


_WAITING = (
    "FROM tool_calls WHERE user_id = ? AND conversation_id = ?"
    " AND status = 'not_completed' AND external_job_id IS NOT NULL"
)


async def has_waiting(db: Database, user_id: str, conversation_id: str) -> bool:
    """Whether any call of the conversation waits on a job: one index probe on every read of a
    conversation, so it runs on the event loop's own connection (`read_now`)."""
    found = await db.read_now(f"SELECT 1 {_WAITING} LIMIT 1", (user_id, conversation_id))
    return bool(found)


async def waiting(db: Database, user_id: str, conversation_id: str) -> list[ToolCall]:
    rows = await db.read(
        f"SELECT * {_WAITING} ORDER BY created_at_ms, message_id", (user_id, conversation_id)
    )
    return [_call(row) for row in rows]


async def settle(
    db: Database,
    user_id: str,
    conversation_id: str,
    calls: Sequence[ToolCall],
    settlements: Sequence[Settlement],
) -> int:
    """Write what one read decided, all in one transaction; returns the calls settled.

    A call another reader settled meanwhile changes no row, and its images are not registered
    again. Completed images become generated assets of the chat whose id is the conversation's
    (parents: the call's input images), and each call's images one turn result, so "the latest
    result" resolves to them.
    """
    by_id = {call.message_id: call for call in calls}
    settled = 0
    async with db.write() as tx:
        for outcome in settlements:
            call = by_id[outcome.message_id]
            changed = await tx.update(
                "tool_calls",
                {"status": outcome.status,
                 "result": None if outcome.result is None else _json(outcome.result),
                 "error": outcome.error, "updated_at_ms": now_ms()},
                "user_id = ? AND conversation_id = ? AND message_id = ?"
                " AND status = 'not_completed' AND external_job_id = ?",
                (user_id, conversation_id, outcome.message_id, outcome.job_id),
            )
            if changed != 1:
                continue
            settled += 1
            if not outcome.images:
                continue
            parents = await assets.owned_asset_ids(tx, user_id, call.input_asset_ids)
            for image in outcome.images:
                await assets.insert(
                    tx, user_id,
                    assets.NewAsset(
                        media_type="image", source_type="generated", original_url=image.url,
                        chat_id=conversation_id, mime_type=image.mime_type, width=image.width,
                        height=image.height,
                        display_name=str(call.display_args.get("title") or call.tool_name),
                        prompt=_prompt(call), model_id=call.job_kind,
                        source_message_id=call.message_id,
                        metadata={"toolName": call.tool_name, "externalJobId": outcome.job_id},
                    ),
                    [a for a in call.input_asset_ids if a in parents],
                    "edited_from", asset_id=image.asset_id,
                )
            await working_state.record_result_in(
                tx, user_id, conversation_id, [image.asset_id for image in outcome.images]
            )
    return settled


def _prompt(call: ToolCall) -> str | None:
    prompt = call.display_args.get("prompt")
    return prompt if isinstance(prompt, str) else None


async def attach(
    db: Database | Transaction, user_id: str, found: Iterable[Message]
) -> list[Message]:
    """The messages with their tool calls set on the `tool` ones (one query for the page)."""
    page = list(found)
    wanted = [m.id for m in page if m.role == "tool"]
    if not wanted:
        return page
    rows = await db.read(
        "SELECT * FROM tool_calls WHERE user_id = ?"
        f" AND message_id IN ({', '.join('?' * len(wanted))})",
        (user_id, *wanted),
    )
    calls = {row["message_id"]: _call(row) for row in rows}
    return [
        m.model_copy(update={"tool_call": calls[m.id]}) if m.id in calls else m for m in page
    ]


# The operator console's three lists (SPEC §20): proposed and waiting for the user, confirmed
# and not finished, failed.
TOOL_CALL_STATES = {
    "pending": "status = 'not_completed' AND confirmed_at_ms IS NULL",
    "running": "status = 'not_completed' AND confirmed_at_ms IS NOT NULL",
    "failed": "status = 'failed'",
}


async def page_in_state(db: Database, state: str, before: Cursor | None,
                        limit: int) -> list[tuple[str, ToolCall]]:
    """Every user's calls in `state` (a TOOL_CALL_STATES key), newest change first, each with
    its user; `before` = (updated_at_ms, message_id) of the last one seen."""
    condition = TOOL_CALL_STATES[state]
    if before is None:
        rows = await db.read(
            f"SELECT * FROM tool_calls WHERE {condition} "
            "ORDER BY updated_at_ms DESC, message_id DESC LIMIT ?", (limit,))
    else:
        rows = await db.read(
            f"SELECT * FROM tool_calls WHERE {condition} AND (updated_at_ms < ? OR "
            "(updated_at_ms = ? AND message_id < ?)) "
            "ORDER BY updated_at_ms DESC, message_id DESC LIMIT ?",
            (before.key, before.key, before.id, limit))
    return [(row["user_id"], _call(row)) for row in rows]
