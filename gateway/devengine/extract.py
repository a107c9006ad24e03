"""What the dev engine extracts from a session's messages, by rules it can apply without a model.
Pure: messages in, cells, episode text and agent cases out.

Cells (EverOS's memcells): the engine's hard limit first (a buffer of 500 or more messages is cut
into cells of 499 from the front, as the engine's boundary primitive does), then a boundary
wherever two consecutive messages are more than 4 hours apart (the gap the engine's boundary
prompt names; the dev engine ignores the prompt's "and a new topic"). On add, every cell but the
last closes and the last stays buffered; a buffer without a user message stays whole until one
arrives. A flush closes every cell.

Episodes: one per user sender of a cell (the engine fans the cell's one narrative out to each user
sender). The dev engine has no model to write a narrative: its episode restates the cell's chat
messages, one `<sender name or id>: <text>` per message, where text is the engine's derived
text (file items included once parsed); tool calls and tool results are left out, as the
engine's episode extractor leaves them out. `summary` is the episode's first 200 characters, the
extractor's own fallback; `subject` (a model-written title) is empty.

Agent cases: the gates of the engine's case extractor that need no model (everalgo
`agent_memory/case.py`): from the first user message on, the cell must end with an assistant's
text reply and hold at least 3 tool-call rounds. Its model then writes the intent and approach;
the dev engine restates them: `task_intent` is the user messages' text, `approach` the assistant
side (its text and each call as `name(arguments)`), `quality_score` 0.5 (the extractor's default),
`key_insight` none. Each assistant sender of the cell (text or tool calls) owns a copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gateway.devengine.ingest import CanonicalMessage

BOUNDARY_GAP_MS = 4 * 3600 * 1000
HARD_MESSAGE_LIMIT = 500
MIN_TOOL_CALL_ROUNDS = 3
CASE_QUALITY_SCORE = 0.5
SUMMARY_CHARS = 200


@dataclass(frozen=True)
class Cell:
    messages: tuple[CanonicalMessage, ...]

    @property
    def timestamp_ms(self) -> int:
        """The closing message's time, the engine's memcell timestamp."""
        return self.messages[-1].timestamp_ms

    @property
    def sender_ids(self) -> list[str]:
        """Every speaker of the cell; a tool result has none (the engine's `sender_ids`)."""
        return _distinct(m.sender_id for m in self.messages if m.role != "tool")

    @property
    def user_ids(self) -> list[str]:
        return _distinct(m.sender_id for m in self.messages if m.role == "user")

    @property
    def agent_ids(self) -> list[str]:
        return _distinct(m.sender_id for m in self.messages if m.role == "assistant")


@dataclass(frozen=True)
class CaseText:
    task_intent: str
    approach: str
    quality_score: float = CASE_QUALITY_SCORE
    key_insight: str | None = None


def _distinct(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def merge_buffer(buffered: Sequence[CanonicalMessage],
                 fresh: Sequence[CanonicalMessage]) -> list[CanonicalMessage]:
    """The buffer and an add's messages: the first message of an id wins, sorted by time then
    id (the engine's `_merge_dedupe_sort`)."""
    seen = {m.message_id: m for m in buffered}
    for m in fresh:
        seen.setdefault(m.message_id, m)
    return sorted(seen.values(), key=lambda m: (m.timestamp_ms, m.message_id))


def cut(messages: Sequence[CanonicalMessage], *, final: bool
        ) -> tuple[list[Cell], list[CanonicalMessage]]:
    """(closed cells, the tail that stays buffered)."""
    remaining = list(messages)
    if not remaining or (not final and not any(m.role == "user" for m in remaining)):
        return [], remaining
    cells: list[Cell] = []
    while len(remaining) >= HARD_MESSAGE_LIMIT:
        cells.append(Cell(tuple(remaining[: HARD_MESSAGE_LIMIT - 1])))
        remaining = remaining[HARD_MESSAGE_LIMIT - 1:]
    segment: list[CanonicalMessage] = []
    for m in remaining:
        if segment and m.timestamp_ms - segment[-1].timestamp_ms > BOUNDARY_GAP_MS:
            cells.append(Cell(tuple(segment)))
            segment = []
        segment.append(m)
    if final and segment:
        cells.append(Cell(tuple(segment)))
        segment = []
    return cells, segment


def episode_text(cell: Cell) -> str:
    return "\n".join(f"{m.sender_name or m.sender_id}: {m.text}" for m in cell.messages
                     if m.role in ("user", "assistant") and not m.calls_tools and m.text)


def summary_of(episode: str) -> str:
    return episode[:SUMMARY_CHARS]


def agent_case(cell: Cell) -> CaseText | None:
    """The cell's case, or None where the engine's extractor would skip it."""
    start = next((i for i, m in enumerate(cell.messages) if m.role == "user"), None)
    if start is None:
        return None
    trajectory = cell.messages[start:]
    last = trajectory[-1]
    if last.role != "assistant" or last.calls_tools:
        return None  # not closed by the assistant's reply
    if sum(1 for m in trajectory if m.calls_tools) < MIN_TOOL_CALL_ROUNDS:
        return None
    intent = "\n".join(m.text for m in trajectory if m.role == "user" and m.text)
    steps: list[str] = []
    for m in trajectory:
        if m.role != "assistant":
            continue
        if m.text:
            steps.append(m.text)
        for call in m.tool_calls or []:
            function = call.get("function") or {}
            steps.append(f"{function.get('name', '')}({function.get('arguments', '')})")
    approach = "\n".join(steps)
    if not intent or not approach:
        return None
    return CaseText(task_intent=intent, approach=approach)


def merged_text(member_episodes: Iterable[str]) -> str:
    """A merged episode restates its members, oldest first (the engine's reflection writes a
    model narrative of them)."""
    return "\n\n".join(text for text in member_episodes if text)
