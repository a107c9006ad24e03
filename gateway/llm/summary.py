"""The optional rolling conversation summary (SPEC §11), refreshed off the request path.

Every `llm.summary_every_n_messages` messages, a background task asks the configured model to fold
the messages since the last summary into it, and stores the result on the conversation row.
Without `[llm]` nothing is scheduled and no model is called; a failed call keeps the old summary
(the next refresh, N messages later, covers what this one missed).
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any, Protocol

from gateway.config import Settings
from gateway.llm.client import LlmClient
from gateway.store import conversations, messages
from gateway.store.cursors import Cursor
from gateway.store.database import Database

log = logging.getLogger("gateway.summariser")


class Host(Protocol):
    """What a refresh needs of the app's services (gateway/services.py `Services`)."""

    settings: Settings
    db: Database
    llm: LlmClient | None

    def spawn(self, work: Coroutine[Any, Any, Any], what: str) -> Any: ...

MAX_MESSAGES_PER_REFRESH = 200
MAX_CHARS_PER_MESSAGE = 2000
SYSTEM_PROMPT = (
    "You maintain the rolling summary of a conversation between a user and an assistant. "
    "Given the previous summary and the newer messages, answer with the updated summary only: "
    "a few short paragraphs in the conversation's language, keeping facts, decisions, open "
    "requests and the user's preferences; no preamble."
)


def due(message_count: int, every_n: int) -> bool:
    return every_n > 0 and message_count > 0 and message_count % every_n == 0


def schedule(svc: Host, user_id: str, conversation_id: str, message_count: int) -> bool:
    """Start a refresh when this append made the count a multiple of N; True when started."""
    llm = svc.llm
    if llm is None or not due(message_count, svc.settings.llm.summary_every_n_messages):
        return False
    svc.spawn(refresh(svc.db, llm, user_id, conversation_id), "summary")
    return True


def _transcript(lines: list[messages.Message]) -> str:
    return "\n".join(
        f"{message.role}: {message.content[:MAX_CHARS_PER_MESSAGE]}" for message in lines
    )


async def refresh(db: Database, llm: LlmClient, user_id: str, conversation_id: str) -> bool:
    """Fold the messages since the last summary into it; False when nothing was stored."""
    conversation = await conversations.get(db, user_id, conversation_id)
    unsummarised = conversation.message_count - conversation.summary_message_count
    if unsummarised <= 0:
        return False
    # Messages appended after the read above are newer than its last_message_at_ms (append
    # times increase strictly per conversation), so this page is exactly the unsummarised tail.
    upto = Cursor((conversation.last_message_at_ms or 0) + 1, "")
    recent, _ = await messages.page(
        db, user_id, conversation_id, min(unsummarised, MAX_MESSAGES_PER_REFRESH), upto
    )
    prompt = (
        f"Previous summary:\n{conversation.summary or '(none)'}\n\n"
        f"Newer messages:\n{_transcript(recent)}"
    )
    answer = await llm.chat(
        [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
    )
    if answer is None or not answer.strip():
        log.warning("summary of %s not refreshed: no usable model answer", conversation_id)
        return False
    return await conversations.store_summary(
        db, user_id, conversation_id, answer.strip(), conversation.message_count
    )
