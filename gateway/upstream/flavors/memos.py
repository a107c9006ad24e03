"""MemOS's server API: `POST /product/add` and `POST /product/search`, scoped by user and cube.

Messages are OpenAI-style (`content` a string, a list of `text` / `image_url` / `file` parts, or
one part; a part may also stand alone in `messages`). MemOS reads files into text memories, so
each file is named by a text part before it. Answers are `{"code", "message", "data": {"text_mem":
[{"cube_id", "memories": [...]}], "pref_mem", "tool_mem", "skill_mem"}}`; an item's session is its
`metadata.session_id`. Cubes are owned like sessions, by the add that first writes them
(memos_models.py says which cubes each route reaches).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gateway.attachments.add_body import WHOLE_CONTENT, WHOLE_MESSAGE, AttachmentItem
from gateway.errors import UpstreamBadResponse
from gateway.search.items import FoundItem
from gateway.upstream.flavors import memos_models as models
from gateway.upstream.flavors.base import (
    DEFAULT_SCOPE,
    AddScope,
    DataOwner,
    Dialect,
    EngineCall,
    Flavor,
    file_line,
    scope_value,
    session_filter,
    string,
    text_part,
    top_k,
)
from gateway.upstream.routes import EngineRoute, route

MEMORY_GROUPS = ("text_mem", "pref_mem", "tool_mem", "skill_mem")
_FETCHABLE = ("http://", "https://")


def _engine_part(item: AttachmentItem) -> dict[str, Any] | None:
    """The OpenAI-style part MemOS reads for a file, or None when it could not fetch it."""
    image = item.content_type.startswith("image/")
    if item.url is not None:  # the gateway stored the file and signed a URL to it
        if image:
            return {"type": "image_url", "image_url": {"url": item.url}}
        return {"type": "file", "file": {"file_data": item.url, "filename": item.name}}
    if item.uri is not None:
        if not item.uri.startswith(_FETCHABLE):
            return None  # file://, s3://...: not the engine's to read; named in text only
        if image:
            return {"type": "image_url", "image_url": {"url": item.uri}}
        return {"type": "file", "file": {"file_data": item.uri, "filename": item.name}}
    if image:
        url = f"data:{item.content_type};base64,{item.base64}"
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"file_data": item.base64, "filename": item.name}}


def _chat_time(timestamp: Any) -> str | None:
    if isinstance(timestamp, int | float) and not isinstance(timestamp, bool):
        return datetime.fromtimestamp(timestamp / 1000, UTC).isoformat(timespec="seconds")
    return timestamp if isinstance(timestamp, str) else None


class MemOS(Dialect):
    name = "memos"
    names_files = True

    def add_scope(self, body: Mapping[str, Any]) -> AddScope:
        # MemOS sessions are global: owned in the default scope, whatever project_id says.
        return AddScope(DEFAULT_SCOPE, DEFAULT_SCOPE, string(body.get("session_id")))

    def add_payload(self, body: Mapping[str, Any], caller: str,
                    items: list[AttachmentItem]) -> dict[str, Any] | None:
        by_place = {(item.message, item.part): item for item in items}
        messages: list[Any] = []
        for m_index, message in enumerate(body.get("messages") or []):
            if not isinstance(message, Mapping):
                continue
            if (m_index, WHOLE_MESSAGE) in by_place:
                item = by_place[(m_index, WHOLE_MESSAGE)]
                messages.append(text_part(file_line(item)))
                if part := _engine_part(item):
                    messages.append(part)
                continue
            content = message.get("content")
            if isinstance(content, Mapping):
                content = [content]
                if (m_index, WHOLE_CONTENT) in by_place:
                    by_place[(m_index, 0)] = by_place[(m_index, WHOLE_CONTENT)]
            if isinstance(content, list):
                parts: list[Any] = []
                for c_index, part in enumerate(content):
                    if (m_index, c_index) in by_place:
                        item = by_place[(m_index, c_index)]
                        parts.append(text_part(file_line(item)))
                        if engine_part := _engine_part(item):
                            parts.append(engine_part)
                    elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                        parts.append(text_part(part["text"]))
                content = parts
            out: dict[str, Any] = {"role": message.get("role") or "user", "content": content}
            if chat_time := _chat_time(message.get("timestamp")):
                out["chat_time"] = chat_time
            messages.append(out)
        payload: dict[str, Any] = {"user_id": caller, "messages": messages}
        if session_id := string(body.get("session_id")):
            payload["session_id"] = session_id
        info = dict(body["info"]) if isinstance(body.get("info"), Mapping) else {}
        for key in ("app_id", "project_id"):
            if (value := scope_value(body, key)) != DEFAULT_SCOPE:
                info.setdefault(key, value)
        if info:
            payload["info"] = info
        return payload

    def search_payload(self, body: Mapping[str, Any], caller: str) -> dict[str, Any] | None:
        payload: dict[str, Any] = {"query": body.get("query") or "", "user_id": caller}
        if session_id := session_filter(body):
            payload["session_id"] = session_id
        if (limit := top_k(body)) is not None:
            payload["top_k"] = limit
        return payload

    def find_items(self, answer: Any) -> list[FoundItem]:
        data = answer.get("data") if isinstance(answer, Mapping) else None
        if not isinstance(data, Mapping):
            raise UpstreamBadResponse("MemOS search answer has no `data` object")
        found: list[FoundItem] = []
        for group in MEMORY_GROUPS:
            cubes = data.get(group)
            if cubes is None:
                continue
            if not isinstance(cubes, list):
                raise UpstreamBadResponse(f"upstream search answer: data.{group} is not a list")
            for cube in cubes:
                memories = cube.get("memories") if isinstance(cube, Mapping) else None
                if isinstance(memories, list):
                    found.extend(FoundItem(group, item, memories) for item in memories)
        return found


MEMOS = MemOS()

# MemOS's server API past add and search (`src/memos/api/routers/server_router.py`; it serves
# no `/product/chat`). User and cube registration, `/product/configure`, the scheduler, the
# playground and business-user chats, feedback (by memory ids), the reads by memory id and the
# inner routes (`exist_mem_cube_id`, `get_user_names_by_memory_ids`, record ids, the dashboard)
# and `/admin/*` are engine-wide or cannot be checked for their owner, and stay closed.
MEMOS_ROUTES: tuple[EngineRoute, ...] = (
    route("POST /product/get_all", models.GET_ALL, "one cube's memories", reads=True),
    route("POST /product/get_memory", models.GET_MEMORY,
          "one cube's memories, paged and filtered", reads=True),
    route("POST /product/delete_memory", models.DELETE,
          "delete the caller's memories by filter or file ids"),
    route("POST /product/chat/complete", models.CHAT_COMPLETE, "chat over the caller's cubes"),
    route("POST /product/chat/stream", models.CHAT_STREAM,
          "streamed chat over the caller's cubes"),
    route("POST /product/suggestions", models.SUGGESTIONS, "suggested queries from one cube",
          reads=True),
)


def _failed(answer: Any) -> str | None:
    """handlers/memory_handler.py answers a failed delete with 200 and `data.status: failure`."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if isinstance(data, dict) and data.get("status") == "failure":
        return str(answer.get("message") or "the engine could not delete")
    return None


def erase_calls(owner: DataOwner) -> list[EngineCall]:
    """`POST /product/delete_memory {"user_id"}`: the filter mode of `handle_delete_memories`
    (handlers/memory_handler.py), which deletes the user's text and preference memories."""
    return [EngineCall("POST", "/product/delete_memory", {"user_id": owner.user_id},
                       refusal=_failed)]


def export_calls(owner: DataOwner) -> list[EngineCall]:
    """`POST /product/get_all` of the user's own cube (`GetAllRequest`, product_models.py)."""
    return [EngineCall("POST", "/product/get_all",
                       {"user_id": owner.user_id, "memory_type": kind})
            for kind in ("text_mem", "act_mem", "para_mem")]


FLAVOR = Flavor(
    name="memos",
    dialect=MEMOS,
    native=(MEMOS.add_route("/product/add", models.ADD),
            MEMOS.search_route("/product/search", models.SEARCH)),
    table=MEMOS_ROUTES,
    erase_calls=erase_calls,
    export_calls=export_calls,
)
