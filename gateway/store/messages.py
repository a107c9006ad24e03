"""Conversation messages: idempotent append with its bookkeeping, and keyset history pages.

An append runs in one write transaction: the `clientMessageId` check, the attachment ownership
check, the insert, and the conversation's and agent's bookkeeping. Writes are serialised
(`BEGIN IMMEDIATE`), so concurrent retries of one key append exactly once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from gateway.errors import IdempotencyConflict, ValidationFailed
from gateway.store import conversations
from gateway.store.conversations import Conversation
from gateway.store.cursors import Cursor, keyset_page
from gateway.store.database import Database, Row, Transaction
from gateway.store.ids import new_id, now_ms
from gateway.store.labels import normalise_label
from gateway.store.records import Record


@dataclass(frozen=True)
class AttachmentRef:
    """An attachment as the client sent it."""

    source: str  # "resource" | "asset"
    reference_id: str
    label: str | None


class MessageAttachment(Record):
    source: str
    reference_id: str
    label: str


@dataclass(frozen=True)
class NewMessage:
    client_message_id: str
    role: str
    content: str
    status: str = "completed"
    attachments: tuple[AttachmentRef, ...] = ()
    metadata: dict[str, Any] | None = None


class Message(Record):
    id: str
    conversation_id: str
    client_message_id: str
    role: str
    content: str
    status: str
    attachments: list[MessageAttachment]
    metadata: dict[str, Any]
    created_at_ms: int
    # role "tool" only: a gateway.store.tool_calls.ToolCall, attached by that module (which
    # imports this one, hence Any); shown through the routes' ToolCallOut, not this record
    tool_call: Any = Field(default=None, exclude=True)


@dataclass(frozen=True)
class Appended:
    conversation: Conversation
    message: Message
    created: bool  # False: a retry answered with the stored message


def message_from_row(row: Row) -> Message:
    return Message.from_row(
        row,
        attachments=[
            MessageAttachment(source=source, reference_id=reference_id, label=label)
            for source, reference_id, label in json.loads(row["attachments"])
        ],
        metadata=json.loads(row["metadata"]),
    )


def fingerprint(new: NewMessage) -> str:
    """What a retry must repeat: the content and the attachments exactly as sent."""
    identity = [new.content, [[a.source, a.reference_id, a.label] for a in new.attachments]]
    canonical = json.dumps(identity, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


# Where each attachment source lives and its display-name column (the label fallback).
_REFERENCE_TABLES = {
    "resource": "SELECT id, name FROM resources"
    " WHERE user_id = ? AND deleted_at IS NULL AND id IN ({marks})",
    "asset": "SELECT id, display_name AS name FROM media_assets"
    " WHERE user_id = ? AND id IN ({marks})",
}


async def _resolve_attachments(
    tx: Transaction, user_id: str, refs: Sequence[AttachmentRef]
) -> list[MessageAttachment]:
    names: dict[tuple[str, str], str | None] = {}
    for source, template in _REFERENCE_TABLES.items():
        wanted = sorted({ref.reference_id for ref in refs if ref.source == source})
        if wanted:
            sql = template.format(marks=", ".join("?" * len(wanted)))
            for row in await tx.read(sql, (user_id, *wanted)):
                names[(source, row["id"])] = row["name"]
    resolved = []
    for index, ref in enumerate(refs):
        key = (ref.source, ref.reference_id)
        if key not in names:
            field = f"attachments.{index}.referenceId"
            raise ValidationFailed(f"{field}: no {ref.source} of yours has this id", field=field)
        label = normalise_label(ref.label, names[key], ref.reference_id)
        resolved.append(
            MessageAttachment(source=ref.source, reference_id=ref.reference_id, label=label)
        )
    return resolved


async def append(db: Database, user_id: str, conversation_id: str, new: NewMessage) -> Appended:
    digest = fingerprint(new)
    async with db.write() as tx:
        conversation = await conversations.get(tx, user_id, conversation_id)
        stored = await find_by_client_id(tx, user_id, conversation_id, new.client_message_id)
        if stored is not None:
            if stored.fingerprint != digest or stored.message.role == "tool":
                raise IdempotencyConflict(field="clientMessageId")
            return Appended(conversation, stored.message, created=False)
        attachments = await _resolve_attachments(tx, user_id, new.attachments)
        message = await insert(tx, user_id, conversation, new, digest, attachments)
        return Appended(
            await conversations.get(tx, user_id, conversation_id), message, created=True
        )


@dataclass(frozen=True)
class StoredMessage:
    message: Message
    fingerprint: str  # what a retry with the same clientMessageId must repeat


async def find_by_client_id(
    tx: Transaction, user_id: str, conversation_id: str, client_message_id: str
) -> StoredMessage | None:
    row = await tx.read_one(
        "SELECT * FROM conversation_messages"
        " WHERE user_id = ? AND conversation_id = ? AND client_message_id = ?",
        (user_id, conversation_id, client_message_id),
    )
    return None if row is None else StoredMessage(message_from_row(row), row["fingerprint"])


async def insert(
    tx: Transaction,
    user_id: str,
    conversation: Conversation,
    new: NewMessage,
    digest: str,
    attachments: Sequence[MessageAttachment] = (),
    message_id: str | None = None,
) -> Message:
    """Append one message and its bookkeeping inside the caller's transaction."""
    # Strictly increasing per conversation, so history order is append order even when
    # appends share a millisecond (drifts ahead only past 1000 appends a second).
    now = now_ms()
    created_at = max(now, (conversation.last_message_at_ms or now - 1) + 1)
    message_id = message_id or new_id("msg")
    await tx.execute(
        "INSERT INTO conversation_messages (id, user_id, conversation_id, agent_id,"
        " client_message_id, role, content, status, attachments, metadata, fingerprint,"
        " created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (message_id, user_id, conversation.id, conversation.agent_id, new.client_message_id,
         new.role, new.content, new.status,
         json.dumps([[a.source, a.reference_id, a.label] for a in attachments],
                    ensure_ascii=False),
         json.dumps(new.metadata or {}, ensure_ascii=False), digest, created_at),
    )
    title = None
    if new.role == "user" and new.content.strip():
        title = conversations.title_from_text(new.content)
    await _bookkeeping(tx, user_id, conversation, 1, created_at, now, title)
    row = await tx.read_one("SELECT * FROM conversation_messages WHERE id = ?", (message_id,))
    assert row is not None
    return message_from_row(row)


async def _bookkeeping(
    tx: Transaction,
    user_id: str,
    conversation: Conversation,
    appended: int,
    last_message_at: int,
    now: int,
    title: str | None,
) -> None:
    await tx.execute(
        "UPDATE conversations SET message_count = message_count + ?, last_message_at_ms = ?,"
        " updated_at_ms = ?,"
        " title = CASE WHEN title_fixed = 0 AND CAST(? AS TEXT) IS NOT NULL THEN ? ELSE title END,"
        " title_fixed = CASE WHEN CAST(? AS TEXT) IS NOT NULL THEN 1 ELSE title_fixed END"
        " WHERE id = ? AND user_id = ?",
        (appended, last_message_at, now, title, title, title, conversation.id, user_id),
    )
    await tx.execute(
        "UPDATE agents SET last_message_at_ms = ?,"
        " activity_at_ms = CASE WHEN activity_at_ms > ? THEN activity_at_ms ELSE ? END"
        " WHERE id = ? AND user_id = ?",
        (last_message_at, last_message_at, last_message_at, conversation.agent_id, user_id),
    )


def page_sql(with_cursor: bool) -> str:
    """The history page query; it walks `conversation_messages_history` backwards (see bench/)."""
    cursor = " AND (created_at_ms, id) < (?, ?)" if with_cursor else ""
    return (
        "SELECT * FROM conversation_messages WHERE conversation_id = ? AND user_id = ?"
        f"{cursor} ORDER BY created_at_ms DESC, id DESC LIMIT ?"
    )


async def page(
    db: Database | Transaction,
    user_id: str,
    conversation_id: str,
    limit: int,
    before: Cursor | None = None,
) -> tuple[list[Message], str | None]:
    """Up to `limit` messages older than `before` (newest first when absent), oldest first.

    The cursor returned points at the oldest message of the page; None when nothing is older.
    """
    params: list[Any] = [conversation_id, user_id]
    if before is not None:
        params += [before.key, before.id]
    rows = await db.read(page_sql(before is not None), (*params, limit + 1))
    newest_first, next_cursor = keyset_page([message_from_row(row) for row in rows], limit,
                                            lambda message: (message.created_at_ms, message.id))
    return newest_first[::-1], next_cursor




async def find_in_agent(
    db: Database | Transaction, user_id: str, agent_id: str, message_id: str
) -> Message | None:
    """A message of one of the caller's live conversations with this agent."""
    row = await db.read_one(
        "SELECT m.* FROM conversation_messages m JOIN conversations c ON c.id = m.conversation_id"
        " WHERE m.id = ? AND m.user_id = ? AND c.user_id = ? AND c.agent_id = ?"
        " AND c.deleted_at_ms IS NULL",
        (message_id, user_id, user_id, agent_id),
    )
    return None if row is None else message_from_row(row)


async def bulk_append(
    db: Database,
    user_id: str,
    conversation_id: str,
    messages: Sequence[tuple[int, str, str]],
) -> None:
    """Append already-timestamped `(created_at_ms, role, content)` messages in one transaction.

    For imports and the history benchmark: no idempotency key is offered (one is generated),
    no title is derived and no summary is scheduled.
    """
    if not messages:
        return
    async with db.write() as tx:
        conversation = await conversations.get(tx, user_id, conversation_id)
        rows = []
        for created_at, role, content in messages:
            message_id = new_id("msg")
            digest = fingerprint(NewMessage(message_id, role, content))
            rows.append((message_id, user_id, conversation_id, conversation.agent_id, message_id,
                         role, content, "completed", digest, created_at))
        await tx.executemany(
            "INSERT INTO conversation_messages (id, user_id, conversation_id, agent_id,"
            " client_message_id, role, content, status, fingerprint, created_at_ms)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        latest = max(created_at for created_at, _, _ in messages)
        latest = max(latest, conversation.last_message_at_ms or latest)
        await _bookkeeping(tx, user_id, conversation, len(messages), latest, now_ms(), None)
