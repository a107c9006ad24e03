"""mem0's open-source REST server: `POST /memories` and `POST /search`, sessions are `run_id`s.

Its messages carry string content (`{"role", "content"}`) and its add turns them into extracted
facts, so a file survives only as text: each file is named by a message of its own before the one
carrying it, and the names also go into `metadata.attachment_names` (mem0 returns an add's
metadata with every memory extracted from it). Answers are `{"results": [...]}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from gateway.attachments.add_body import WHOLE_CONTENT, WHOLE_MESSAGE, AttachmentItem
from gateway.errors import UpstreamBadResponse
from gateway.search.items import FoundItem
from gateway.upstream.flavors import mem0_models as models
from gateway.upstream.flavors.base import (
    DEFAULT_SCOPE,
    AddScope,
    DataOwner,
    Dialect,
    EngineCall,
    Flavor,
    file_line,
    session_filter,
    string,
    top_k,
)
from gateway.upstream.routes import AGENT, SESSION, USER, EngineRoute, route

NAMES_KEY = "attachment_names"


def _with_names(metadata: Any, items: list[AttachmentItem]) -> dict[str, Any]:
    out = dict(metadata) if isinstance(metadata, Mapping) else {}
    if items:
        out[NAMES_KEY] = [item.name for item in items]
    return out


def _text_of(content: Any, lines: dict[int, str]) -> str:
    """A message's content as the one string mem0 takes: its texts, and its files by name."""
    if isinstance(content, str):
        return content
    parts = [(WHOLE_CONTENT, content)] if isinstance(content, Mapping) else list(
        enumerate(content if isinstance(content, list) else []))
    texts: list[str] = []
    for index, part in parts:
        if index in lines:
            texts.append(lines[index])
        elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(text for text in texts if text)


class Mem0(Dialect):
    name = "mem0"
    names_files = True
    session_keys = ("run_id",)

    def add_scope(self, body: Mapping[str, Any]) -> AddScope:
        return AddScope(DEFAULT_SCOPE, DEFAULT_SCOPE, string(body.get("run_id")))

    def with_file_names(self, body: Mapping[str, Any], items: list[AttachmentItem]
                        ) -> dict[str, Any]:
        messages = list(body.get("messages") or [])
        by_message: dict[int, list[AttachmentItem]] = {}
        for item in items:
            by_message.setdefault(item.message, []).append(item)
        for index in sorted(by_message, reverse=True):
            message = messages[index]
            role = message.get("role") if isinstance(message, Mapping) else None
            lines = "\n".join(file_line(item) for item in by_message[index])
            messages.insert(index, {"role": role or "user", "content": lines})
        return {**body, "messages": messages, "metadata": _with_names(body.get("metadata"), items)}

    def add_payload(self, body: Mapping[str, Any], caller: str,
                    items: list[AttachmentItem]) -> dict[str, Any] | None:
        lines: dict[tuple[int, int], str] = {
            (item.message, item.part): file_line(item) for item in items
        }
        messages = []
        for m_index, message in enumerate(body.get("messages") or []):
            if not isinstance(message, Mapping):
                continue
            if lines.get((m_index, WHOLE_MESSAGE)):
                text = lines[(m_index, WHOLE_MESSAGE)]
            else:
                mine = {part: line for (m, part), line in lines.items() if m == m_index}
                text = _text_of(message.get("content"), mine)
            if text:
                messages.append({"role": message.get("role") or "user", "content": text})
        payload: dict[str, Any] = {"messages": messages, "user_id": caller}
        if run_id := string(body.get("session_id")):
            payload["run_id"] = run_id
        if agent_id := string(body.get("agent_id")):
            payload["agent_id"] = agent_id
        if metadata := _with_names(body.get("metadata"), items):
            payload["metadata"] = metadata
        return payload

    def search_payload(self, body: Mapping[str, Any], caller: str) -> dict[str, Any] | None:
        payload: dict[str, Any] = {"query": body.get("query") or "", "user_id": caller}
        if run_id := session_filter(body):
            payload["run_id"] = run_id
        if agent_id := string(body.get("agent_id")):
            payload["agent_id"] = agent_id
        if (limit := top_k(body)) is not None:
            payload["top_k"] = limit  # what mem0's REST server reads (SearchRequest.top_k)
        return payload

    def find_items(self, answer: Any) -> list[FoundItem]:
        # `{"results": [...], "relations": [...]}`; mem0 before v1.1 answered a bare list.
        results = answer.get("results") if isinstance(answer, Mapping) else answer
        if not isinstance(results, list):
            raise UpstreamBadResponse("mem0 search answer has no `results` list")
        return [FoundItem(_type(item), item, results, self.session_keys) for item in results]


def _type(item: Any) -> str:
    kind = item.get("memory_type") if isinstance(item, Mapping) else None
    return kind if isinstance(kind, str) and kind else "memory"


MEM0 = Mem0()


def _entities(method: str, note: str) -> tuple[EngineRoute, ...]:
    return tuple(route(f"{method} /v2/entities/{name}/{{entity_id}}/", models.ENTITY[kind],
                       f"{note} ({name})")
                 for name, kind in (("user", USER), ("agent", AGENT), ("run", SESSION)))


# mem0's open-source server (`/memories`, `/search`; `/configure`, `/reset` and
# `/generate-instructions` are engine-wide and stay closed) and its platform API (`MemoryClient`:
# `/v1`..`/v3` paths, trailing slashes kept; entities lists, batch, events, webhooks,
# organisations and projects stay closed, as do the deprecated v1/v2 list and search). A memory
# id says nothing of its owner: routes by id first read the memory (`owner_probe`) and go on
# only when its `user_id` is the caller.
_ONE = "/memories/{memory_id}"
_PLATFORM_ONE = "/v1/memories/{memory_id}/"
OSS_ROUTES: tuple[EngineRoute, ...] = (
    route("GET /memories", models.LIST, "list one user, agent or run"),
    route("DELETE /memories", models.DELETE_ALL, "delete all of one user, agent or run"),
    route(f"GET {_ONE}", models.ONE, "one memory", owner_probe=_ONE),
    route(f"PUT {_ONE}", models.UPDATE, "edit one memory", owner_probe=_ONE),
    route(f"DELETE {_ONE}", models.ONE, "delete one memory", owner_probe=_ONE),
    route(f"GET {_ONE}/history", models.ONE, "its history", owner_probe=_ONE),
)
PLATFORM_ROUTES: tuple[EngineRoute, ...] = (
    route("GET /v1/ping/", models.PING, "MemoryClient's key check; names no one"),
    route("POST /v3/memories/", models.PLATFORM_LIST, "get_all by filters", reads=True),
    route(f"GET {_PLATFORM_ONE}", models.PLATFORM_ONE, "one memory",
          owner_probe=_PLATFORM_ONE),
    route(f"PUT {_PLATFORM_ONE}", models.PLATFORM_UPDATE, "edit one memory",
          owner_probe=_PLATFORM_ONE),
    route(f"DELETE {_PLATFORM_ONE}", models.PLATFORM_DELETE, "delete one memory",
          owner_probe=_PLATFORM_ONE),
    route(f"GET {_PLATFORM_ONE}history/", models.PLATFORM_ONE, "its history",
          owner_probe=_PLATFORM_ONE),
    route("DELETE /v1/memories/", models.PLATFORM_DELETE_ALL, "delete_all by entity"),
    *_entities("GET", "one entity's details"),
    *_entities("DELETE", "one entity and its memories"),
    route("POST /v1/exports/", models.EXPORT, "export by filters"),
    route("POST /v1/exports/get/", models.EXPORT_GET, "fetch an export by filters", reads=True),
    route("POST /v1/summary/", models.SUMMARY, "summary by filters", reads=True),
)


def erase_calls(owner: DataOwner) -> list[EngineCall]:
    """`DELETE /memories` with one identifier each (server/main.py `delete_all_memories`:
    `Memory.delete_all(user_id=…)`, or `agent_id=…`, the admin role required)."""
    return [EngineCall("DELETE", f"/memories?{urlencode({key: value})}")
            for key, value in (("user_id", owner.user_id),
                               *(("agent_id", agent) for agent in owner.agent_ids))]


def export_calls(owner: DataOwner) -> list[EngineCall]:
    """`GET /memories?user_id=…` (server/main.py `get_all_memories`)."""
    return [EngineCall("GET", f"/memories?{urlencode({'user_id': owner.user_id})}")]


FLAVOR = Flavor(
    name="mem0",
    dialect=MEM0,
    native=(
        MEM0.add_route("/memories", models.ADD),
        MEM0.search_route("/search", models.SEARCH),
        MEM0.add_route("/v3/memories/add/", models.PLATFORM_ADD, follows_config=False),
        MEM0.search_route("/v3/memories/search/", models.PLATFORM_SEARCH, follows_config=False),
    ),
    table=(*OSS_ROUTES, *PLATFORM_ROUTES),
    erase_calls=erase_calls,
    export_calls=export_calls,
)
