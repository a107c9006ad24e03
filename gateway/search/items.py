"""Search answers (SPEC §6, §9): find the result items in any known container, pure and in place.

The EverOS envelope `{"data": {"episodes", "profiles", "agent_cases", "agent_skills",
"unprocessed_messages"}}` comes first; then `{"results"}`, `{"memories"}` and
`{"data": {"memories" | "raw_messages"}}` from other engines and older versions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from gateway.errors import UpstreamBadResponse

EVEROS_GROUPS: dict[str, str] = {
    "episodes": "episode",
    "profiles": "profile",
    "agent_cases": "agent_case",
    "agent_skills": "agent_skill",
    "unprocessed_messages": "unprocessed_message",
}
CONTENT_KEYS = ("episode", "summary", "memory", "content", "text", "description")


@dataclass
class FoundItem:
    type: str
    raw: Any
    container: list[Any]  # the list the item sits in, so it can be dropped in place
    # Keys naming the item's session, first present wins (mem0 calls it `run_id`).
    session_keys: tuple[str, ...] = ("session_id",)
    session_id: str | None = dataclass_field(init=False)

    def __post_init__(self) -> None:
        self.session_id = _session_of(self.raw, self.session_keys)

    def scope(self, default_app: str, default_project: str) -> tuple[str, str]:
        raw = self.raw if isinstance(self.raw, dict) else {}
        app, project = raw.get("app_id"), raw.get("project_id")
        return (
            app if isinstance(app, str) and app else default_app,
            project if isinstance(project, str) and project else default_project,
        )

    @property
    def content(self) -> str | None:
        if isinstance(self.raw, str):
            return self.raw
        if not isinstance(self.raw, dict):
            return None
        for key in CONTENT_KEYS:
            value = self.raw.get(key)
            if isinstance(value, str):
                return value
        return derived_content(self.raw)

    def field(self, *keys: str) -> Any:
        """The first present key, at the top, else in `metadata` (where MemOS keeps them)."""
        if not isinstance(self.raw, dict):
            return None
        metadata = self.raw.get("metadata")
        for where in (self.raw, metadata if isinstance(metadata, dict) else {}):
            for key in keys:
                if where.get(key) is not None:
                    return where[key]
        return None


# EverOS items with no text field of their own (`memory/search/dto.py`): a profile is its
# `profile_data.summary` (else the whole `profile_data`), an agent case its intent, approach
# and insight.
DERIVED_CONTENT_MARKERS = (b'"profile_data"', b'"task_intent"')


def derived_content(raw: dict[str, Any]) -> str | None:
    profile = raw.get("profile_data")
    if isinstance(profile, dict):
        summary = profile.get("summary")
        if isinstance(summary, str) and summary:
            return summary
        return json.dumps(profile, ensure_ascii=False, sort_keys=True)
    parts = [raw.get(key) for key in ("task_intent", "approach", "key_insight")]
    texts = [part for part in parts if isinstance(part, str) and part]
    return "\n".join(texts) if texts and isinstance(raw.get("task_intent"), str) else None


def _session_of(raw: Any, keys: tuple[str, ...] = ("session_id",)) -> str | None:
    """The item's session key (`session_id`), else `metadata.session_id`, else none."""
    if not isinstance(raw, dict):
        return None
    value = None
    for key in keys:
        value = raw.get(key)
        if value:
            break
    if not value:
        metadata = raw.get("metadata")
        value = metadata.get("session_id") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) and value else None


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise UpstreamBadResponse(f"upstream search answer: {where} is not a list")
    return value


def find_items(payload: Any) -> list[FoundItem]:
    """The result items of a search answer, in answer order; UpstreamBadResponse for others."""
    if not isinstance(payload, dict):
        raise UpstreamBadResponse(
            f"upstream search answer is a JSON {type(payload).__name__}, not an object"
        )
    data = payload.get("data")
    if isinstance(data, dict) and any(key in data for key in EVEROS_GROUPS):
        found: list[FoundItem] = []
        for group, item_type in EVEROS_GROUPS.items():
            if data.get(group) is None:
                continue
            items = _list(data[group], f"data.{group}")
            found.extend(FoundItem(item_type, item, items) for item in items)
        return found
    for key in ("results", "memories"):
        if key in payload:
            items = _list(payload[key], key)
            return [FoundItem(_item_type(item, "memory"), item, items) for item in items]
    if isinstance(data, dict):
        for key, default_type in (("memories", "memory"), ("raw_messages", "raw_message")):
            if key in data:
                items = _list(data[key], f"data.{key}")
                return [FoundItem(_item_type(item, default_type), item, items) for item in items]
    keys = ", ".join(sorted(str(k) for k in payload)) or "none"
    raise UpstreamBadResponse(
        "upstream search answer has none of the known shapes (data.episodes…, results, "
        f"memories, data.memories, data.raw_messages); its keys: {keys}"
    )


def _item_type(item: Any, default: str) -> str:
    if isinstance(item, dict):
        for key in ("type", "memory_type"):
            value = item.get(key)
            if isinstance(value, str) and value:
                return value
    return default


# EverMemOS v0 (`GET /api/v0/memories[/search]`): `{"result": {"memories", "pending_messages",
# "profiles"}}`; an item's conversation is its `group_id`.
V0_GROUPS = {"memories": "memory", "pending_messages": "pending_message", "profiles": "profile"}


def v0_items(payload: Any) -> list[FoundItem]:
    """The items of an EverMemOS v0 read answer (UpstreamBadResponse for another shape)."""
    result = payload.get("result") if isinstance(payload, dict) else None
    if not isinstance(result, dict):
        raise UpstreamBadResponse("EverMemOS v0 answer has no `result` object")
    found: list[FoundItem] = []
    for key, kind in V0_GROUPS.items():
        items = result.get(key)
        if items is None:
            continue
        for item in _list(items, f"result.{key}"):
            found.append(FoundItem(kind, item, items, ("group_id", "session_id")))
    return found


def drop(items: list[FoundItem], dropped: list[FoundItem]) -> None:
    """Remove items from the containers they sit in (identity, not equality)."""
    gone = {id(item.raw) for item in dropped}
    for container in {id(i.container): i.container for i in dropped}.values():
        container[:] = [entry for entry in container if id(entry) not in gone]


def result(item: FoundItem, index: int, attachments: list[dict[str, str]]) -> dict[str, Any]:
    """One normalised result of `/memories/search`."""
    identifier = item.field("id", "memory_id", "episode_id", "message_id")
    return {
        "id": str(identifier) if identifier is not None else f"{item.type}:{index}",
        "type": item.type,
        "content": item.content,
        "score": item.field("score", "relativity"),
        "session_id": item.session_id,
        "created_at": item.field("created_at", "timestamp"),
        "raw": item.raw,
        "attachments": attachments,
    }
