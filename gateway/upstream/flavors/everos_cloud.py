"""EverOS Cloud: its v2 API (`everos-cloud` ≥ 1.0 client) and its legacy v1 API (0.4.x client).

v2 (`/api/v2/memory/add|search|flush`) has the local engine's bodies and answers (plus
`async_mode`, 202 "queued"); v1 (`/api/v1/memories`, `/api/v1/memories/search`, `/flush`) scopes by
`user_id` and answers `{"data": {"episodes", "profiles", "raw_messages", "agent_memory"}}`. Both
are intercepted whichever is configured. The Cloud turns files into generated text and cannot
read the gateway's disk, so adds get a text line naming each file, and uploads are ingested by
name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.attachments.add_body import AttachmentItem
from gateway.errors import UpstreamBadResponse
from gateway.ids import now_ms
from gateway.search.items import FoundItem
from gateway.upstream.flavors.base import (
    ADD,
    SEARCH,
    AddScope,
    Dialect,
    Flavor,
    NativeRoute,
    name_files,
    session_filter,
    string,
    top_k,
)
from gateway.upstream.flavors.everos import EVERMEMOS_V0, HEALTH, EverosV2, everos_v2_routes
from gateway.upstream.routes import GROUP, USER, EngineRoute, fields

V1_GROUPS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("episodes",), "episode"),
    (("profiles",), "profile"),
    (("raw_messages",), "raw_message"),
    (("agent_memory", "cases"), "agent_case"),
    (("agent_memory", "skills"), "agent_skill"),
)
V1_MEMORY_TYPES = ["episodic_memory", "profile", "raw_message"]


class CloudV2(EverosV2):
    """The Cloud's v2 API: EverOS v2 bodies, with files named in text."""

    name = "everos-cloud-v2"
    names_files = True

    def add_payload(self, body: Mapping[str, Any], caller: str,
                    items: list[AttachmentItem]) -> dict[str, Any] | None:
        return name_files(body, items) if items else None


class CloudV1(Dialect):
    """The Cloud's legacy v1 memories API (everos-cloud 0.4.x)."""

    name = "everos-cloud-v1"
    names_files = True

    def add_payload(self, body: Mapping[str, Any], caller: str,
                    items: list[AttachmentItem]) -> dict[str, Any] | None:
        named = name_files(body, items) if items else body
        messages = []
        for message in named.get("messages") or []:
            if isinstance(message, Mapping):
                message = dict(message)
                message.setdefault("timestamp", now_ms())  # v1 requires it
            messages.append(message)
        payload: dict[str, Any] = {"user_id": caller, "messages": messages}
        if session_id := string(body.get("session_id")):
            payload["session_id"] = session_id
        if isinstance(body.get("async_mode"), bool):
            payload["async_mode"] = body["async_mode"]
        return payload

    def search_payload(self, body: Mapping[str, Any], caller: str) -> dict[str, Any] | None:
        filters: dict[str, Any] = {"user_id": caller}
        if session_id := session_filter(body):
            filters["session_id"] = session_id
        payload: dict[str, Any] = {"query": body.get("query") or "", "filters": filters,
                                   "memory_types": V1_MEMORY_TYPES}
        if isinstance(body.get("method"), str):
            payload["method"] = body["method"]
        if (limit := top_k(body)) is not None:
            payload["top_k"] = limit
        return payload

    def flush_payload(self, scope: AddScope, caller: str) -> dict[str, Any] | None:
        return {"user_id": caller, "session_id": scope.session_id}

    def find_items(self, answer: Any) -> list[FoundItem]:
        data = answer.get("data") if isinstance(answer, Mapping) else None
        if not isinstance(data, Mapping):
            raise UpstreamBadResponse("EverOS Cloud v1 search answer has no `data` object")
        found: list[FoundItem] = []
        for where, item_type in V1_GROUPS:
            node: Any = data
            for key in where:
                node = node.get(key) if isinstance(node, Mapping) else None
            if node is None:
                continue
            if not isinstance(node, list):
                raise UpstreamBadResponse(f"upstream search answer: data.{'.'.join(where)} "
                                          "is not a list")
            found.extend(FoundItem(item_type, item, node) for item in node)
        return found


CLOUD_V2 = CloudV2()
CLOUD_V1 = CloudV1()


# The Cloud's v1 API past add and search (everos-cloud 0.4.x). Its settings are engine-wide
# administration and stay closed.
CLOUD_V1_ROUTES: tuple[EngineRoute, ...] = (
    EngineRoute("POST", "/api/v1/memories/flush", note="one user's session"),
    EngineRoute("POST", "/api/v1/memories/agent/flush", note="one user's agent session"),
    EngineRoute("POST", "/api/v1/memories/get", scoped=True, note="pages by filters"),
    EngineRoute("POST", "/api/v1/memories/delete", scoped=True, note="delete by filters"),
    EngineRoute("POST", "/api/v1/memories/group", claims=True,
                note="add to a group; user messages' sender_id = caller, group_id claimed"),
    EngineRoute("POST", "/api/v1/memories/group/flush", note="one group"),
    EngineRoute("POST", "/api/v1/groups", claims=True, note="create a group: claimed"),
    EngineRoute("GET", "/api/v1/groups/{group_id}", fields(GROUP, "path.group_id")),
    EngineRoute("PATCH", "/api/v1/groups/{group_id}", fields(GROUP, "path.group_id")),
    EngineRoute("POST", "/api/v1/senders", note="sender_id = caller"),
    EngineRoute("GET", "/api/v1/senders/{sender_id}", fields(USER, "path.sender_id")),
    EngineRoute("PATCH", "/api/v1/senders/{sender_id}", fields(USER, "path.sender_id")),
    EngineRoute("POST", "/api/v1/object/sign", note="presigned upload; names no one"),
    EngineRoute("GET", "/api/v1/tasks/{task_id}", note="an async add's status by task id"),
)
CLOUD_TABLE: tuple[EngineRoute, ...] = (
    *everos_v2_routes("v2"),
    EngineRoute("POST", "/api/v2/object/sign", note="presigned upload; names no one"),
    *CLOUD_V1_ROUTES,
    *EVERMEMOS_V0,
    HEALTH,
)


def _flavor(name: str, primary: Dialect) -> Flavor:
    return Flavor(
        name=name,
        dialect=primary,
        native=(
            NativeRoute("/api/v2/memory/add", ADD, CLOUD_V2, follows_config=primary is CLOUD_V2),
            NativeRoute("/api/v2/memory/search", SEARCH, CLOUD_V2,
                        follows_config=primary is CLOUD_V2),
            NativeRoute("/api/v1/memories", ADD, CLOUD_V1, follows_config=primary is CLOUD_V1),
            NativeRoute("/api/v1/memories/agent", ADD, CLOUD_V1, follows_config=False),
            NativeRoute("/api/v1/memories/search", SEARCH, CLOUD_V1,
                        follows_config=primary is CLOUD_V1, scoped=True),
        ),
        table=CLOUD_TABLE,
    )


FLAVOR = _flavor("everos-cloud", CLOUD_V2)
FLAVOR_V1 = _flavor("everos-cloud-v1", CLOUD_V1)
