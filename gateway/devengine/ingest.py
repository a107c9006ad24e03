"""An add's messages in the engine's canonical form (EverOS 1.5.1
`memory/extract/ingest/{service,multimodal,id_gen}.py`): content as a list of items, file items
parsed (`gateway.devengine.parse`), the derived text the engine's extractors read, its own
message ids, and timestamps read as the engine reads them (seconds below 10**12)."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gateway.devengine.parse import parse_item
from gateway.upstream.flavors.everos_models import Message

MS_THRESHOLD = 10**12  # the engine's sec-vs-ms auto-detection


@dataclass(frozen=True)
class CanonicalMessage:
    message_id: str
    sender_id: str
    sender_name: str | None
    role: str
    timestamp_ms: int
    content_items: list[dict[str, Any]]
    text: str
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None

    @property
    def calls_tools(self) -> bool:
        return self.role == "assistant" and bool(self.tool_calls)


def message_id(session_id: str, timestamp: int, index: int) -> str:
    """The engine's id: the same payload sent again makes the same ids, and the buffer keeps the
    first message of an id."""
    return f"m_{session_id}_{timestamp}_{index:03d}"


def timestamp_ms(value: int) -> int:
    """Epoch ms of a timestamp in ms or (below 10**12) seconds; a value no datetime can hold
    raises, as it does in the engine (a 500)."""
    ms = value if value >= MS_THRESHOLD else value * 1000
    datetime.fromtimestamp(ms / 1000, UTC)  # OverflowError, ValueError or OSError when too far
    return ms


def canonical(session_id: str, messages: list[Message],
              objects: Container[str] = ()) -> list[CanonicalMessage]:
    """The engine's `ingest.process`: may raise `parse.UnsupportedFile` (415); `objects`: the
    keys of uploaded objects (`parse.parse_item`)."""
    out: list[CanonicalMessage] = []
    for index, message in enumerate(messages):
        if isinstance(message.content, str):
            items: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
        else:
            items = [item.model_dump() for item in message.content]
        for item in items:
            if item.get("type") != "text" and "parsed_content" not in item:
                parse_item(item, objects)
        raw_ts = int(message.timestamp)
        out.append(CanonicalMessage(
            message_id=message_id(session_id, raw_ts, index),
            sender_id=message.sender_id, sender_name=message.sender_name, role=message.role,
            timestamp_ms=timestamp_ms(raw_ts), content_items=items, text=derive_text(items),
            tool_calls=[call.model_dump() for call in message.tool_calls]
            if message.tool_calls else None,
            tool_call_id=message.tool_call_id,
        ))
    return out


def derive_text(items: list[dict[str, Any]]) -> str:
    """Text items as they are; a parsed file as `[TYPE: name]` and its parsed content; an
    unparsed file contributes nothing (the engine's `derive_text`)."""
    parts: list[str] = []
    for item in items:
        if item.get("type") == "text":
            if item.get("text"):
                parts.append(str(item["text"]))
            continue
        parsed = item.get("parsed_content")
        if not parsed:
            continue
        kind = str(item.get("type") or "file").upper()
        name = item.get("name") or ""
        parts.append(f"[{kind}: {name}]\n{parsed}" if name else f"[{kind}]\n{parsed}")
    return "\n".join(parts)


def shown_content(items: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Buffered content as the engine answers it: one text item collapses to its string."""
    if len(items) == 1 and items[0].get("type") == "text" and isinstance(items[0].get("text"),
                                                                         str):
        text: str = items[0]["text"]
        return text
    return items
