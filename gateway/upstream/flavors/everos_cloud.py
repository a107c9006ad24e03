"""EverOS Cloud: its v2 API (`everos-cloud` ≥ 1.0 client), its legacy v1 API (the `everos` 0.4 and
`everos-cloud` 0.4.x clients) and EverMemOS v0 (the `evermemos` client).

v2 (`/api/v2/memory/add|search|flush`) has the local engine's bodies and answers (plus
`async_mode`, 202 "queued"); v1 (`/api/v1/memories`, `/api/v1/memories/search`, `/flush`) scopes by
`user_id` and answers `{"data": {"episodes", "profiles", "raw_messages", "agent_memory"}}`. Both
are intercepted whichever is configured. The Cloud turns files into generated text and cannot
read the gateway's disk, so adds get a text line naming each file, and uploads are ingested by
name. What each route reads is cloud_models.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.attachments.add_body import AttachmentItem
from gateway.errors import UpstreamBadResponse
from gateway.identity.canonical import sender_groups
from gateway.search.items import FoundItem, v0_items
from gateway.store.ids import now_ms
from gateway.upstream.flavors import cloud_models as models
from gateway.upstream.flavors.base import (
    AddScope,
    DataOwner,
    Dialect,
    EngineCall,
    Flavor,
    name_files,
    session_filter,
    string,
    top_k,
)
from gateway.upstream.flavors.everos import HEALTH, EverosV2
from gateway.upstream.routes import EngineRoute, route

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
    adds_as_sent = False  # files are named in the text (`add_payload`)
    sign_path = "/api/v2/object/sign"

    def add_payload(self, body: Mapping[str, Any], caller: str,
                    items: list[AttachmentItem]) -> dict[str, Any] | None:
        return name_files(body, items) if items else None


class CloudV1(Dialect):
    """The Cloud's legacy v1 memories API (everos-cloud 0.4.x)."""

    name = "everos-cloud-v1"
    names_files = True
    sign_path = "/api/v1/object/sign"

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


# The Cloud's v1 API past add and search (the everos 0.4 SDK). Its settings are engine-wide
# administration and stay closed.
CLOUD_V1_ROUTES: tuple[EngineRoute, ...] = (
    route("POST /api/v1/memories/flush", models.V1_FLUSH, "one user's sessions"),
    route("POST /api/v1/memories/agent/flush", models.V1_AGENT_FLUSH, "one user's agent sessions"),
    route("POST /api/v1/memories/get", models.V1_GET, "pages by filters", reads=True),
    route("POST /api/v1/memories/delete", models.V1_DELETE, "delete by user or group"),
    route("POST /api/v1/memories/group", models.V1_GROUP_ADD,
          "add to a group; the group is claimed", claims=True),
    route("POST /api/v1/memories/group/flush", models.V1_GROUP_FLUSH, "one group"),
    route("POST /api/v1/groups", models.V1_GROUP_CREATE, "create a group: claimed", claims=True),
    route("GET /api/v1/groups/{group_id}", models.V1_GROUP_ONE, "one group"),
    route("PATCH /api/v1/groups/{group_id}", models.V1_GROUP_PATCH, "rename one group"),
    route("POST /api/v1/senders", models.V1_SENDER_CREATE, "name a sender: yourself"),
    route("GET /api/v1/senders/{sender_id}", models.V1_SENDER_ONE, "one sender: yourself"),
    route("PATCH /api/v1/senders/{sender_id}", models.V1_SENDER_PATCH,
          "rename one sender: yourself"),
    route("GET /api/v1/tasks/{task_id}", models.V1_TASK,
          "an async add's status by its task id; no content"),
)
# The Cloud's v2 API past add and search (the everos-cloud 1.x SDK). It serves no task routes.
CLOUD_V2_ROUTES: tuple[EngineRoute, ...] = (
    route("POST /api/v2/memory/flush", models.V2_FLUSH,
          "one session's extraction; the session must be the caller's"),
    route("POST /api/v2/memory/get", models.V2_GET,
          "pages of one owner's memories (user_id or agent_id)", reads=True),
    route("POST /api/v2/memory/delete", models.V2_DELETE, "delete one owner's memories"),
    route("POST /api/v2/memory/edit", models.V2_EDIT, "edit one user's profile"),
)
# EverMemOS v0 (the `evermemos` SDK), which the Cloud still serves: one message per add,
# `sender` the owner and `group_id` the conversation; reads by query string (or a GET body).
# Its fetch and search are answered like a search: others' items dropped, attachments added.
CLOUD_V0_ROUTES: tuple[EngineRoute, ...] = (
    route("POST /api/v0/memories", models.V0_ADD, "add one message; group_id claimed",
          claims=True),
    route("GET /api/v0/memories", models.V0_FETCH, "fetch by memory type; answered like a "
          "search (others' items dropped, attachments added)", answer_items=v0_items),
    route("GET /api/v0/memories/search", models.V0_SEARCH, "search; answered like a search "
          "(others' items dropped, attachments added)", answer_items=v0_items),
    route("DELETE /api/v0/memories", models.V0_DELETE, "delete by combined criteria"),
    route("GET /api/v0/status/request", models.V0_STATUS, "an add's processing status"),
)
CLOUD_TABLE: tuple[EngineRoute, ...] = (
    *CLOUD_V2_ROUTES,
    *CLOUD_V1_ROUTES,
    *CLOUD_V0_ROUTES,
    HEALTH,
)


def v2_erase_calls(owner: DataOwner) -> list[EngineCall]:
    """`POST /api/v2/memory/delete` (`V2Delete`, everos_cloud/api/memory_api.py) once per scope
    for the user, and once per scope for each of their agents (agent memories)."""
    return [EngineCall("POST", "/api/v2/memory/delete",
                       {"app_id": app_id, "project_id": project_id, key: value})
            for app_id, project_id in owner.scopes
            for key, value in (("user_id", owner.user_id),
                               *(("agent_id", agent) for agent in owner.agent_ids))]


def v1_erase_calls(owner: DataOwner) -> list[EngineCall]:
    """`POST /api/v1/memories/delete` (`V1Delete`, everos/resources/v1/memories/memories.py:
    "omitted fields skip filtering"): `{"user_id"}` for every memory of the user, then
    `{"group_id"}` for each group they claimed (group memories are scoped by group_id) and for
    the group the engine made of them as a sender (theirs by its name, never claimed)."""
    derived = sender_groups(owner.user_id)[0]
    groups = (*owner.groups, *(() if derived in owner.groups else (derived,)))
    return [EngineCall("POST", "/api/v1/memories/delete", body)
            for body in ({"user_id": owner.user_id}, *({"group_id": group} for group in groups))]


def _flavor(name: str, primary: Dialect) -> Flavor:
    v2 = primary is CLOUD_V2  # the v2 routes follow upstream.add_path/search_path, else v1's
    return Flavor(
        name=name,
        dialect=primary,
        native=(
            CLOUD_V2.add_route("/api/v2/memory/add", models.V2_ADD, follows_config=v2),
            CLOUD_V2.search_route("/api/v2/memory/search", models.V2_SEARCH, follows_config=v2),
            CLOUD_V1.add_route("/api/v1/memories", models.V1_ADD, follows_config=not v2),
            CLOUD_V1.add_route("/api/v1/memories/agent", models.V1_AGENT_ADD,
                               follows_config=False),
            CLOUD_V1.search_route("/api/v1/memories/search", models.V1_SEARCH,
                                  follows_config=not v2),
        ),
        table=CLOUD_TABLE,
        erase_calls=v2_erase_calls if v2 else v1_erase_calls,
        signs_files=True,
    )


FLAVOR = _flavor("everos-cloud", CLOUD_V2)
FLAVOR_V1 = _flavor("everos-cloud-v1", CLOUD_V1)
