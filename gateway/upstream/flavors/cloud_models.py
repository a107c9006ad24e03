"""EverOS Cloud's request models, as its client SDKs build them (SPEC §5).

The Cloud's server is not public; its two SDKs are generated from its API documents, so their
request builders say what each route reads:
- v1: the `everos` 0.4 SDK (`everos/resources/v1/...`: `memories/memories.py` add, search, get,
  flush, delete; `memories/agent.py`, `memories/group.py`; `groups.py`, `senders.py`,
  `tasks.py`; the bodies in `everos/types/v1/*_params.py`). Every route reads its body only.
  Reads are bounded by `filters.user_id` or `filters.group_id` (the filters DSL: `AND` / `OR`,
  `eq` / `in` on `user_id` and `group_id`, unknown fields ignored); a top-level `user_id` is
  not read on get or search.
- v2: the `everos-cloud` 1.x SDK (`everos_cloud/api/memory_api.py`; the bodies in
  `everos_cloud/models/`: `AddInput`, `MessageItem`, `SearchInput`, `GetInput`, `FlushInput`,
  `DeleteInput`, `EditInput`, `FilterNode`). The local engine's shapes, with the Cloud's own
  differences: `mode` and `async_mode` on add, a delete and a profile edit the local engine
  lacks, no `llm_multiround` search, and filters that may hold any field.

- v0 (EverMemOS, the `evermemos` 0.3 SDK, `evermemos/resources/v0/`): one message per add, its
  `sender` the owner; reads take their parameters from the query string and a GET body, the
  body's winning (EverMemOS's `memory_controller.py`, `request_converter.py`); a read without
  `user_id` or `group_id` spans every user.

Groups (v0, v1) are owned like sessions: the first to add to or create a group owns it.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.errors import Forbidden
from gateway.identity.named import AGENT, FILTERS, GROUP, SESSION, USER
from gateway.upstream.flavors.filter_trees import owner_ids
from gateway.upstream.models import PATH, QUERY, SENDERS, Id, RouteModel

SOURCE_V1 = "everos/resources/v1/memories/memories.py"
SOURCE_V1_AGENT = "everos/resources/v1/memories/agent.py"
SOURCE_V1_GROUP = "everos/resources/v1/memories/group.py"
SOURCE_V1_GROUPS = "everos/resources/v1/groups.py"
SOURCE_V1_SENDERS = "everos/resources/v1/senders.py"
SOURCE_V1_TASKS = "everos/resources/v1/tasks.py"
SOURCE_V2 = "everos_cloud/api/memory_api.py"
SOURCE_V0 = ("evermemos/resources/v0/memories/memories.py, "
             "src/infra_layer/adapters/input/api/memory/memory_controller.py")
SOURCE_V0_STATUS = "evermemos/resources/v0/status/request.py"

ContentType = Literal["text", "audio", "image", "doc", "pdf", "html", "email"]


# --- filters -----------------------------------------------------------------------------------

_V1_OWNERS = {"user_id": USER, "group_id": GROUP, "session_id": SESSION}
_V2_OWNERS = {"user_id": USER, "agent_id": AGENT, "session_id": SESSION}


def v1_filter_ids(tree: Any, where: str) -> list[tuple[str, str, Any, bool]]:
    """The users, groups and sessions a v1 filter names; `user_id` / `group_id` reached
    through `AND` alone bound the read (a session narrows it, the Cloud wants one of those)."""
    return [(kind, at, value, pins and kind != SESSION)
            for kind, at, value, pins in owner_ids(tree, where, _V1_OWNERS, every=("AND",),
                                                   some=("OR",))]


def v2_filter_ids(tree: Any, where: str) -> list[tuple[str, str, Any, bool]]:
    """Every user, agent and session a v2 filter names (checked; the top-level `user_id` /
    `agent_id` bound the read, never a filter)."""
    return [(kind, at, value, False)
            for kind, at, value, _ in owner_ids(tree, where, _V2_OWNERS, every=("AND",),
                                                some=("OR",))]


# --- v1 (the everos 0.4 SDK) ------------------------------------------------------------------

class Content(BaseModel):  # the same item in both SDKs (v1 ContentItemParam, v2 ContentItem)
    type: ContentType
    text: str | None = None
    uri: str | None = None
    base64: str | None = None
    ext: str | None = None
    name: str | None = None
    source: str | None = None
    source_info: dict[str, Any] | None = None
    extras: dict[str, Any] | None = None


class V1Message(BaseModel):
    content: str | list[Content]
    role: Literal["user", "assistant"]
    timestamp: int
    sender_id: str | None = None


class ToolFunction(BaseModel):
    name: str
    arguments: str


class ToolCall(BaseModel):  # the same in both SDKs
    id: str
    function: ToolFunction
    type: str = "function"


class V1AgentMessage(BaseModel):
    role: Literal["user", "assistant", "tool"]
    timestamp: int
    content: str | list[Content] | None = None
    sender_id: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[ToolCall] | None = None


class V1GroupMessage(BaseModel):
    content: str | list[Content]
    role: Literal["user", "assistant"]
    sender_id: str
    timestamp: int
    message_id: str | None = None
    sender_name: str | None = None


class V1Add(BaseModel):
    messages: list[V1Message] = Field(min_length=1, max_length=500)
    user_id: str
    async_mode: bool | None = None
    session_id: str | None = None


class V1AgentAdd(BaseModel):
    messages: list[V1AgentMessage] = Field(min_length=1, max_length=500)
    user_id: str
    async_mode: bool | None = None
    session_id: str | None = None


class V1Flush(BaseModel):
    user_id: str
    session_id: str | None = None


V1MemoryType = Literal["episodic_memory", "profile", "agent_case", "agent_skill"]


class V1Get(BaseModel):
    filters: dict[str, Any]
    memory_type: V1MemoryType
    page: int | None = None
    page_size: int | None = None
    rank_by: str | None = None
    rank_order: Literal["asc", "desc"] | None = None


class V1Search(BaseModel):
    filters: dict[str, Any]
    query: str
    include_original_data: bool | None = None
    memory_types: list[Literal["episodic_memory", "profile", "raw_message",
                               "agent_memory"]] | None = None
    method: Literal["keyword", "vector", "hybrid", "agentic"] | None = None
    radius: float | None = None
    top_k: int | None = None


class V1Delete(BaseModel):
    group_id: str | None = None
    memory_id: str | None = None
    sender_id: str | None = None
    session_id: str | None = None
    user_id: str | None = None

    @model_validator(mode="after")
    def _by_filters(self) -> Self:
        if self.memory_id is not None:
            # By id (a MemCell id, with no other field): the gateway knows no owner of it.
            raise Forbidden("deleting by memory_id cannot be checked for its owner; delete by "
                            "user_id or group_id", field="memory_id")
        return self


class V1GroupAdd(BaseModel):
    group_id: str
    messages: list[V1GroupMessage] = Field(min_length=1, max_length=500)
    async_mode: bool | None = None
    group_meta: dict[str, Any] | None = None


class V1GroupFlush(BaseModel):
    group_id: str


class V1GroupCreate(BaseModel):
    group_id: str
    description: str | None = None
    name: str | None = None


class V1GroupPatch(BaseModel):
    description: str | None = None
    name: str | None = None


class V1SenderCreate(BaseModel):
    sender_id: str
    name: str | None = None


class V1SenderPatch(BaseModel):
    name: str | None = None


# --- v2 (the everos-cloud 1.x SDK) ------------------------------------------------------------

class V2Message(BaseModel):
    sender_id: str
    sender_name: str | None = None
    role: Literal["user", "assistant", "tool"]
    timestamp: int
    content: str | list[Content]
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class V2Add(BaseModel):
    app_id: str = "default"
    project_id: str = "default"
    session_id: str = Field(min_length=1, max_length=128)
    mode: Literal["chat", "agent"] = "chat"
    messages: list[V2Message] = Field(min_length=1, max_length=500)
    async_mode: bool = True


class V2Search(BaseModel):
    app_id: str = "default"
    project_id: str = "default"
    user_id: str | None = Field(default=None, min_length=1)
    agent_id: str | None = Field(default=None, min_length=1)
    query: str = Field(min_length=1)
    method: Literal["keyword", "vector", "hybrid", "agentic"] = "hybrid"
    top_k: int = -1
    radius: float | None = Field(default=None, ge=0.0, le=1.0)
    min_score: float | None = Field(default=None, ge=0.0, le=1.0)
    include_profile: bool = False
    enable_llm_rerank: bool = False
    filters: dict[str, Any] | None = None


class V2Get(BaseModel):
    app_id: str = "default"
    project_id: str = "default"
    user_id: str | None = Field(default=None, min_length=1)
    agent_id: str | None = Field(default=None, min_length=1)
    memory_type: Literal["episode", "profile", "agent_case", "agent_skill"]
    page: int = Field(default=1, ge=1)
    page_size: int = Field(default=20, ge=1, le=100)
    sort_by: Literal["timestamp", "updated_at"] = "timestamp"
    sort_order: Literal["asc", "desc"] = "desc"
    filters: dict[str, Any] | None = None


class V2Flush(BaseModel):
    app_id: str = "default"
    project_id: str = "default"
    session_id: str = Field(min_length=1)


class V2Delete(BaseModel):
    app_id: str = "default"
    project_id: str = "default"
    user_id: str | None = Field(default=None, min_length=1)
    agent_id: str | None = Field(default=None, min_length=1)
    session_id: str | None = None


class V2EditOperation(BaseModel):
    action: Literal["add", "update", "delete"]
    type: Literal["explicit_info", "implicit_traits"]
    item_id: str | None = None
    data: dict[str, Any] | None = None
    reason: str | None = Field(default=None, max_length=256)


class V2Edit(BaseModel):
    app_id: str = "default"
    project_id: str = "default"
    user_id: str = Field(min_length=1)
    memory_type: Literal["profile"] = "profile"
    operations: list[V2EditOperation] = Field(min_length=1, max_length=50)

    @model_validator(mode="after")
    def _no_item_ids(self) -> Self:
        for index, operation in enumerate(self.operations):
            if operation.item_id is not None:
                # A profile item id says nothing of whose profile holds it.
                raise Forbidden("an item_id cannot be checked for its owner; only adds to "
                                "your own profile are forwarded",
                                field=f"operations[{index}].item_id")
        return self


# --- v0 (EverMemOS, the evermemos 0.3 SDK) ----------------------------------------------------

class V0Add(BaseModel):
    message_id: str = Field(min_length=1)
    create_time: str = Field(min_length=1)
    sender: str = Field(min_length=1)
    content: str = Field(min_length=1)
    flush: bool | None = None
    group_id: str | None = None
    group_name: str | None = None
    refer_list: list[Any] | None = None
    role: str | None = None
    sender_name: str | None = None


class V0Read(BaseModel):
    """`fetch_memories` / `search_memories`: the query's parameters, the body's over them.

    The controller updates the query's parameters with the body's (memory_controller.py:
    `params.update(body_data)`), so a JSON `null` in the body erases the query's id and the
    engine reads "no filter": refused. `group_ids` (a list, or a comma-separated string, items
    stripped) wins over `group_id` (request_converter.py); an empty one filters nothing."""

    user_id: str | None = None
    group_id: str | None = None
    group_ids: list[str] | None = None
    query: str | None = None
    memory_type: str | None = None
    memory_types: str | list[str] | None = None
    retrieve_method: str | None = None
    top_k: int | None = None
    limit: int | None = None
    offset: int | None = None
    start_time: str | None = None
    end_time: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_erasing_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in _V0_ID_KEYS:
                if key in data and data[key] is None:
                    raise ValueError(f"{key}: null erases the query's {key} (the engine reads "
                                     "no filter)")
            groups = data.get("group_ids")
            if isinstance(groups, str):  # split as the engine splits it; padding stays (422)
                data = {**data, "group_ids": groups.split(",")}
            if data.get("group_ids") == []:
                raise ValueError("group_ids: an empty list filters no group")
        return data


_V0_ID_KEYS = ("user_id", "group_id", "group_ids")


class V0Delete(BaseModel):
    id: str | None = None
    event_id: str | None = None
    memory_id: str | None = None
    group_id: str | None = None
    user_id: str | None = None


class V0StatusQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")  # request_id only: nothing unread forwarded

    request_id: str | None = None


# --- the route models --------------------------------------------------------------------------

_V1_FILTERS = Id(FILTERS, "filters", scopes=True)
# v1 personal and agent adds: `user_id` owns what is extracted, a sender is a label.
_V1_SENDERS = {"user": USER}
# Group adds have no user_id: each sender is a participant the Cloud keeps memory of.
_GROUP_SENDERS = {"user": USER, "assistant": AGENT}
_V2_SENDERS = {"user": USER, "assistant": AGENT, "tool": AGENT}

V1_ADD = RouteModel(
    source=SOURCE_V1, body=V1Add, senders=_V1_SENDERS,
    ids=(Id(USER, "user_id"), Id(SESSION, "session_id"), Id(SENDERS, "messages")),
    notes=("user_id required and owns what is extracted",),
)
V1_AGENT_ADD = RouteModel(
    source=SOURCE_V1_AGENT, body=V1AgentAdd, senders=_V1_SENDERS,
    ids=(Id(USER, "user_id"), Id(SESSION, "session_id"), Id(SENDERS, "messages")),
    notes=("user_id required and owns the agent memory extracted",),
)
_V1_READ = ("bounded by filters.user_id or filters.group_id (AND only); a top-level user_id "
            "is not read",)
V1_SEARCH = RouteModel(
    source=SOURCE_V1, body=V1Search, filters=v1_filter_ids, ids=(_V1_FILTERS,), notes=_V1_READ,
)
V1_GET = RouteModel(
    source=SOURCE_V1, body=V1Get, filters=v1_filter_ids, ids=(_V1_FILTERS,), notes=_V1_READ,
)
V1_FLUSH = RouteModel(
    source=SOURCE_V1, body=V1Flush,
    ids=(Id(USER, "user_id", scopes=True), Id(SESSION, "session_id")),
)
V1_AGENT_FLUSH = RouteModel(
    source=SOURCE_V1_AGENT, body=V1Flush,
    ids=(Id(USER, "user_id", scopes=True), Id(SESSION, "session_id")),
)
V1_DELETE = RouteModel(
    source=SOURCE_V1, body=V1Delete,
    ids=(Id(USER, "user_id", scopes=True), Id(GROUP, "group_id", scopes=True),
         Id(SESSION, "session_id")),
    notes=("by user_id and/or group_id (session_id, sender_id narrow it); by memory_id: "
           "refused", "null or \"\" match records without the field"),
)
V1_GROUP_ADD = RouteModel(
    source=SOURCE_V1_GROUP, body=V1GroupAdd, senders=_GROUP_SENDERS,
    ids=(Id(GROUP, "group_id"), Id(SENDERS, "messages")),
    notes=("every message names its sender",),
)
V1_GROUP_FLUSH = RouteModel(
    source=SOURCE_V1_GROUP, body=V1GroupFlush, ids=(Id(GROUP, "group_id", scopes=True),),
)
V1_GROUP_CREATE = RouteModel(
    source=SOURCE_V1_GROUPS, body=V1GroupCreate, ids=(Id(GROUP, "group_id"),),
    notes=("an upsert by group_id",),
)
V1_GROUP_ONE = RouteModel(
    source=SOURCE_V1_GROUPS, path=("group_id",),
    ids=(Id(GROUP, "group_id", where=PATH, scopes=True),),
)
V1_GROUP_PATCH = RouteModel(
    source=SOURCE_V1_GROUPS, path=("group_id",), body=V1GroupPatch,
    ids=(Id(GROUP, "group_id", where=PATH, scopes=True),),
)
V1_SENDER_CREATE = RouteModel(
    source=SOURCE_V1_SENDERS, body=V1SenderCreate, ids=(Id(USER, "sender_id"),),
    notes=("an upsert by sender_id",),
)
V1_SENDER_ONE = RouteModel(
    source=SOURCE_V1_SENDERS, path=("sender_id",),
    ids=(Id(USER, "sender_id", where=PATH, scopes=True),),
)
V1_SENDER_PATCH = RouteModel(
    source=SOURCE_V1_SENDERS, path=("sender_id",), body=V1SenderPatch,
    ids=(Id(USER, "sender_id", where=PATH, scopes=True),),
)
V1_TASK = RouteModel(source=SOURCE_V1_TASKS, path=("task_id",))

_V2_OWNER_IDS = (Id(USER, "user_id", scopes=True), Id(AGENT, "agent_id", scopes=True))
V2_ADD = RouteModel(
    source=SOURCE_V2, body=V2Add, senders=_V2_SENDERS,
    ids=(Id(SESSION, "session_id"), Id(SENDERS, "messages")),
    notes=("assistant and tool senders own the agent memory extracted",),
)
V2_SEARCH = RouteModel(
    source=SOURCE_V2, body=V2Search, filters=v2_filter_ids,
    ids=(*_V2_OWNER_IDS, Id(FILTERS, "filters")),
)
V2_GET = RouteModel(
    source=SOURCE_V2, body=V2Get, filters=v2_filter_ids,
    ids=(*_V2_OWNER_IDS, Id(FILTERS, "filters")),
)
V2_FLUSH = RouteModel(
    source=SOURCE_V2, body=V2Flush, ids=(Id(SESSION, "session_id", scopes=True),),
)
V2_DELETE = RouteModel(
    source=SOURCE_V2, body=V2Delete, ids=(*_V2_OWNER_IDS, Id(SESSION, "session_id")),
    notes=("Cloud only; session_id narrows it",),
)
V2_EDIT = RouteModel(
    source=SOURCE_V2, body=V2Edit, ids=(Id(USER, "user_id", scopes=True),),
    notes=("Cloud only", "operations naming an item_id (update, delete): refused, an item id "
           "has no owner the gateway can check"),
)

_V0_READ_IDS = (Id(USER, "user_id", where=QUERY, scopes=True),
                Id(GROUP, "group_id", where=QUERY, scopes=True),
                Id(GROUP, "group_ids", where=QUERY, scopes=True),
                Id(USER, "user_id", scopes=True), Id(GROUP, "group_id", scopes=True),
                Id(GROUP, "group_ids", scopes=True))
V0_ADD = RouteModel(
    source=SOURCE_V0, body=V0Add, ids=(Id(USER, "sender"), Id(GROUP, "group_id")),
    notes=("one message; sender owns what is extracted; without group_id the engine makes "
           "one of the sender",),
)
V0_FETCH = RouteModel(
    source=SOURCE_V0, query=V0Read, body=V0Read, body_required=False, ids=_V0_READ_IDS,
    notes=("query and a GET body, the body's values winning: both are checked",),
)
V0_SEARCH = RouteModel(
    source=SOURCE_V0, query=V0Read, body=V0Read, body_required=False, ids=_V0_READ_IDS,
    notes=("query and a GET body, the body's values winning: both are checked",),
)
V0_DELETE = RouteModel(
    source=SOURCE_V0, body=V0Delete,
    ids=(Id(USER, "user_id", scopes=True), Id(GROUP, "group_id", scopes=True)),
    notes=("the criteria are combined: a memory id only beside your user_id or group",),
)
V0_STATUS = RouteModel(source=SOURCE_V0_STATUS, query=V0StatusQuery,
                       notes=("an add's processing status by request id",))
