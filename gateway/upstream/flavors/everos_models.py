"""EverOS 1.5.1's request models, as its own DTOs parse them (SPEC §5).

Written from the engine's source (the wheel `everos==1.5.1`):
- add, flush: `everos/entrypoints/api/routes/memorize.py` (`MemorizeAddRequest`,
  `MessageItemDTO`, `ContentItemDTO`, `MemorizeFlushRequest`);
- search: `everos/memory/search/dto.py` (`SearchRequest`, `FilterNode`) and the filter compiler
  `everos/memory/search/filters.py` (`ALLOWED_FIELDS`, `RESERVED_FIELDS`);
- get: `everos/memory/get/dto.py` (`GetRequest`).

What the engine does with what: `user_id` XOR `agent_id` is the owner every search and get is
pinned to (`owner_id`, `owner_type` in the storage `where`); filters can never name an owner
(`user_id` is an unsupported filter field, `owner_id` a reserved one). A message's `sender_id`
owns what is extracted from it: a `user` sender the episodes, an `assistant` sender (and the
sender of an assistant's tool calls) the agent cases and skills (`memory/strategies/
extract_agent_case.py`). A search whose `filters` is exactly `{"session_id": "<id>"}` also answers
that session's unprocessed buffer, which carries no owner (`memory/search/manager.py`). Routes
read their body only: query strings are ignored (FastAPI body models).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)

from gateway.errors import ValidationFailed
from gateway.identity.named import AGENT, FILTERS, SESSION, USER
from gateway.upstream.models import (
    QUERY,
    SENDERS,
    Id,
    ItemsOrText,
    KeptOfAny,
    RouteModel,
    lean_of,
)

SOURCE_MEMORIZE = "everos/entrypoints/api/routes/memorize.py"
SOURCE_SEARCH = "everos/memory/search/dto.py, everos/memory/search/filters.py"
SOURCE_GET = "everos/memory/get/dto.py"
SOURCE_TASKS = "everos/entrypoints/api/routes/tasks.py"

_SAFE = re.compile(r"^[a-zA-Z0-9_.@+-]+$")


def _path_safe(value: str) -> str:
    if value in (".", ".."):
        raise ValueError("'.' and '..' are reserved (path traversal)")
    if not _SAFE.match(value):
        raise ValueError("Only alphanumerics, underscore, dot, hyphen, @, and + are allowed")
    return value


def _not(reserved: str) -> AfterValidator:
    def check(value: str) -> str:
        _path_safe(value)
        if value == reserved:
            raise ValueError(f"{reserved!r} is the directory name of the default scope; "
                             "use 'default'")
        return value
    return AfterValidator(check)


_Bounded = Field(default="default", min_length=1, max_length=128)
AppId = Annotated[str, _not("default_app"), _Bounded]
ProjectId = Annotated[str, _not("default_project"), _Bounded]
SenderId = Annotated[str, AfterValidator(_path_safe), Field(min_length=1, max_length=128)]


class ToolFunction(BaseModel):
    name: str
    arguments: str


class ToolCall(BaseModel):
    id: str
    type: str = "function"
    function: ToolFunction


class ContentItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["text", "image", "audio", "doc", "pdf", "html", "email"]
    text: str | None = None
    uri: str | None = None
    base64: str | None = None
    ext: str | None = None
    name: str | None = None
    extras: dict[str, Any] | None = None


class Message(BaseModel):
    sender_id: SenderId
    sender_name: str | None = None
    role: Literal["user", "assistant", "tool"]
    timestamp: int = Field(gt=0)
    content: str | list[ContentItem]
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    @model_validator(mode="after")
    def _tool_row_needs_call_id(self) -> Self:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("tool_call_id is required when role is 'tool'")
        return self


class AddBody(BaseModel):
    session_id: str = Field(min_length=1, max_length=128)
    app_id: AppId = "default"
    project_id: ProjectId = "default"
    messages: list[Message] = Field(min_length=1, max_length=500)
    defer_extraction: bool = False
    async_mode: bool = False


class FlushBody(BaseModel):
    session_id: str = Field(min_length=1, max_length=128)
    app_id: AppId = "default"
    project_id: ProjectId = "default"


class FilterNode(BaseModel):
    model_config = ConfigDict(extra="allow")

    AND: list[FilterNode] | None = None
    OR: list[FilterNode] | None = None


def _one_owner(user_id: str | None, agent_id: str | None) -> None:
    if (user_id is None) == (agent_id is None):
        raise ValueError("exactly one of user_id / agent_id must be provided")


class SearchMethod(StrEnum):
    KEYWORD = "keyword"
    VECTOR = "vector"
    HYBRID = "hybrid"
    AGENTIC = "agentic"
    LLM_MULTIROUND = "llm_multiround"


class SearchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(default=None, min_length=1)
    agent_id: str | None = Field(default=None, min_length=1)
    app_id: str = "default"
    project_id: str = "default"
    query: str = Field(min_length=1)
    method: SearchMethod = SearchMethod.HYBRID
    top_k: int = -1
    radius: float | None = Field(default=None, ge=0.0, le=1.0)
    min_score: float | None = Field(default=None, ge=0.0, le=1.0)
    include_profile: bool = False
    enable_llm_rerank: bool = False
    filters: FilterNode | None = None

    @model_validator(mode="after")
    def _checks(self) -> Self:
        _one_owner(self.user_id, self.agent_id)
        if self.top_k == 0 or self.top_k < -1 or self.top_k > 100:
            raise ValueError("top_k must be -1 or in 1..100")
        return self


class GetMemoryType(StrEnum):
    EPISODE = "episode"
    PROFILE = "profile"
    AGENT_CASE = "agent_case"
    AGENT_SKILL = "agent_skill"


_USER_KINDS = {GetMemoryType.EPISODE, GetMemoryType.PROFILE}


class GetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(default=None, min_length=1)
    agent_id: str | None = Field(default=None, min_length=1)
    app_id: str = "default"
    project_id: str = "default"
    memory_type: GetMemoryType
    page: int = Field(default=1, ge=1)
    page_size: int = Field(default=20, ge=1, le=100)
    sort_by: Literal["timestamp", "updated_at"] = "timestamp"
    sort_order: Literal["asc", "desc"] = "desc"
    filters: FilterNode | None = None

    @model_validator(mode="after")
    def _checks(self) -> Self:
        _one_owner(self.user_id, self.agent_id)
        owner = "user_id" if self.user_id is not None else "agent_id"
        if (self.memory_type in _USER_KINDS) != (owner == "user_id"):
            raise ValueError(f"memory_type {self.memory_type.value!r} is not valid "
                             f"when {owner} is set")
        return self


class TasksQuery(BaseModel):
    session_id: str | None = None
    status: str | None = None
    page: int = Field(default=1, ge=1)
    page_size: int = Field(default=20, ge=1)
    app_id: str = "default"
    project_id: str = "default"


# --- the same models as the gateway validates them (SPEC §13) ----------------------------------
# Validated from a body's bytes (`RouteModel.lean`): the engine's fields, validators and
# refusals, keeping only what the gateway reads. A content item is validated and then dropped
# unless it carries a file (attachments, gateway/attachments/add_body.py), text as well; a
# message keeps its role, sender and content; a filter node becomes the plain mapping the
# filter walk reads. Their errors name the engine's models (`lean_of`).

_FILE_KEYS = ("type", "uri", "base64", "name", "ext")


def _file_item(item: BaseModel) -> dict[str, Any] | None:
    """What the gateway reads of a content item: its file, when it names one."""
    if not (getattr(item, "uri", None) or getattr(item, "base64", None)):
        return None
    return {key: value for key in _FILE_KEYS if (value := getattr(item, key)) is not None}


def _no_text(text: str) -> None:
    return None


def _message_read(message: Message) -> dict[str, Any]:
    """What the gateway reads of a message: who sends it, and its files (`content`)."""
    return {"role": message.role, "sender_id": message.sender_id, "content": message.content}


@lean_of(Message)
class LeanMessage(Message):
    content: Annotated[Any, ItemsOrText(ContentItem, _file_item, _no_text)]


ReadMessage = Annotated[LeanMessage, AfterValidator(_message_read)]


@lean_of(AddBody)
class LeanAddBody(AddBody):
    # Each message validated as the engine's, holding what `_message_read` keeps of it.
    messages: list[ReadMessage] = Field(  # type: ignore[assignment]
        min_length=1, max_length=500)


# Folded nodes made only of string conditions are kept once per request, up to this many.
_SHARED_NODES = 4096


def _folded(node: FilterNode, info: ValidationInfo) -> dict[str, Any]:
    """A validated filter node as the plain mapping `filter_ids` walks: its conditions in
    order, then `AND` and `OR` where given. Node instances (with their dicts of conditions)
    cost many times the body; a node of string conditions seen before is that same mapping."""
    folded = dict(node.__pydantic_extra__ or {})
    given = node.model_fields_set
    if "AND" in given:
        folded["AND"] = node.AND
    if "OR" in given:
        folded["OR"] = node.OR
    shared = info.context.setdefault("filter_nodes", {}) if info.context is not None else None
    if shared is None or not all(type(value) is str for value in folded.values()):
        return folded
    key = tuple(folded.items())
    if (seen := shared.get(key)) is not None:
        return seen  # type: ignore[no-any-return]
    if len(shared) < _SHARED_NODES:
        shared[key] = folded
    return folded


@lean_of(FilterNode)
class LeanFilterNode(FilterNode):
    # Each child validated as the engine's node, holding its `_folded` mapping.
    AND: list[Annotated[LeanFilterNode, AfterValidator(_folded)]] | None = None  # type: ignore[assignment]
    OR: list[Annotated[LeanFilterNode, AfterValidator(_folded)]] | None = None  # type: ignore[assignment]


LeanFilters = Annotated[LeanFilterNode, AfterValidator(_folded)] | None


@lean_of(SearchBody)
class LeanSearchBody(SearchBody):
    filters: LeanFilters = None


@lean_of(GetBody)
class LeanGetBody(GetBody):
    filters: LeanFilters = None


# --- filters -----------------------------------------------------------------------------------

ALLOWED_FILTER_FIELDS = frozenset({"session_id", "parent_type", "parent_id", "timestamp",
                                   "sender_id"})
RESERVED_FILTER_FIELDS = frozenset({"owner_id", "owner_type", "app_id", "project_id"})
_OPERATORS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in"})


def filter_ids(tree: Any, where: str) -> Iterator[tuple[str, str, Any, bool]]:
    """The sessions an EverOS filter tree names (eq / in), refusing what the engine refuses.

    EverOS filters never name an owner, so nothing here pins the caller: the route is scoped by
    its top-level `user_id` / `agent_id`. Every session named positively is checked for its
    owner (a plain top-level `session_id` also reads that session's unprocessed buffer).

    Depth first: a node's own conditions in order, then its `OR` children and its `AND`
    children, each list from its last child, whatever order the body wrote `AND` and `OR` in
    (the order a tree folded by the lean models has, `_folded`). Children are walked off their
    lists: no path is made before its node is reached.
    """
    below: list[tuple[list[Any], str, int]] = []  # (children, their path, next index)
    node, at = tree, where
    while True:
        if not isinstance(node, dict):
            raise ValidationFailed(f"{at}: filter nodes must be objects", field=at)
        for key, value in node.items():
            if value is None and key in _COMBINATORS:
                continue
            here = f"{at}.{key}"
            if key in _COMBINATORS:
                if not isinstance(value, list):
                    raise ValidationFailed(f"{here}: expects an array of nodes", field=here)
            elif key in RESERVED_FILTER_FIELDS:
                raise ValidationFailed(f"{here}: filter field {key!r} is reserved; pass it at "
                                       "the top of the request", field=here)
            elif key not in ALLOWED_FILTER_FIELDS:
                raise ValidationFailed(f"{here}: unsupported filter field: {key!r}", field=here)
            elif key == "session_id":
                for one in _positive(value, here):
                    yield SESSION, here, one, False
            elif isinstance(value, dict):
                bad = set(value) - _OPERATORS
                if not value or bad:
                    raise ValidationFailed(f"{here}: unsupported operator", field=here)
        for key in _COMBINATORS:
            if children := node.get(key):
                below.append((children, f"{at}.{key}", len(children) - 1))
        if not below:
            return
        children, path, index = below.pop()
        if index:
            below.append((children, path, index - 1))
        node, at = children[index], f"{path}[{index}]"


_COMBINATORS = ("AND", "OR")


def _positive(value: Any, where: str) -> list[Any]:
    if isinstance(value, dict):
        if not value or set(value) - _OPERATORS:
            raise ValidationFailed(f"{where}: unsupported operator", field=where)
        out: list[Any] = []
        if "eq" in value:
            out.append(value["eq"])
        if "in" in value:
            if not isinstance(value["in"], list) or not value["in"]:
                raise ValidationFailed(f"{where}: 'in' must be a non-empty list", field=where)
            out.extend(value["in"])
        return out
    return [value]


# --- the route models --------------------------------------------------------------------------

SENDER_OWNERS = {"user": USER, "assistant": AGENT, "tool": AGENT}

ADD = RouteModel(
    source=SOURCE_MEMORIZE, body=AddBody, lean=LeanAddBody,
    ids=(Id(SESSION, "session_id"), Id(SENDERS, "messages")),
    senders=SENDER_OWNERS,
    notes=("query string ignored", "unknown body keys ignored; unknown content-item keys "
           "refused", "assistant and tool senders own the agent memory extracted"),
)
FLUSH = RouteModel(
    source=SOURCE_MEMORIZE, body=FlushBody, lean=FlushBody,
    ids=(Id(SESSION, "session_id", scopes=True),),
    notes=("query string ignored (app_id and project_id default in the body)",),
)
_OWNER_IDS = (Id(USER, "user_id", scopes=True), Id(AGENT, "agent_id", scopes=True))
SEARCH = RouteModel(
    source=SOURCE_SEARCH, body=SearchBody, lean=LeanSearchBody,
    ids=(*_OWNER_IDS, Id(FILTERS, "filters")), filters=filter_ids,
    notes=("user_id XOR agent_id required; unknown keys refused",
           "filters.session_id alone also returns that session's unprocessed messages"),
)
GET = RouteModel(
    source=SOURCE_GET, body=GetBody, lean=LeanGetBody,
    ids=(*_OWNER_IDS, Id(FILTERS, "filters")), filters=filter_ids,
    notes=("user_id XOR agent_id required, paired with memory_type; unknown keys refused",),
)
TASKS = RouteModel(
    source=SOURCE_TASKS, query=TasksQuery,
    ids=(Id(SESSION, "session_id", where=QUERY, scopes=True),),
    notes=("without session_id it lists every session's tasks: session_id required here",),
)
TASK = RouteModel(
    source=SOURCE_TASKS, path=("task_id",),
    notes=("task ids are the engine's random request ids; the answer is a status only",),
)


# --- the gateway's own /memories/add and /memories/search (EverOS-shaped, SPEC §8, §9) ---------
# Looser than the engine's: other flavours' payloads are made from them (user_id, timestamps
# filled in); for EverOS the bytes go upstream unchanged and the engine refuses what it refuses.

class OwnMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str | None = None
    sender_id: str | None = None


class OwnAddBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    session_id: str | None = None
    app_id: str = "default"
    project_id: str = "default"
    messages: list[OwnMessage]


# What gateway/attachments/add_body.py `attachment_items` reads of a content item or of a
# message that is itself one: its file, in whichever of the engines' shapes it comes.
_OWN_FILE_KEYS = ("type", "uri", "base64", "name", "ext", "image_url", "file")


def _own_file_item(item: Any) -> dict[str, Any] | None:
    """A content item as `attachment_items` reads it: an object's file keys, else nothing (an
    object naming no file gives no attachment, as nothing does)."""
    if not isinstance(item, dict):
        return None
    kept = {key: item[key] for key in _OWN_FILE_KEYS if key in item}
    return kept if ("uri" in kept or "base64" in kept or "image_url" in kept
                    or "file" in kept) else None


@lean_of(OwnMessage)
class LeanOwnMessage(OwnMessage):
    content: Annotated[Any, KeptOfAny(_own_file_item)] = None


def _own_message_read(message: LeanOwnMessage) -> dict[str, Any]:
    """What the gateway reads of a message of its own add: its role and sender where given
    (a message without a role may be an item itself), its other keys, and its files."""
    given = message.model_fields_set
    read = dict(message.__pydantic_extra__ or {})
    for key in ("role", "sender_id", "content"):
        if key in given:
            read[key] = getattr(message, key)
    return read


@lean_of(OwnAddBody)
class LeanOwnAddBody(OwnAddBody):
    messages: list[Annotated[LeanOwnMessage,  # type: ignore[assignment]
                             AfterValidator(_own_message_read)]]


class OwnSearchBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    query: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    app_id: str = "default"
    project_id: str = "default"
    filters: FilterNode | None = None


@lean_of(OwnSearchBody)
class LeanOwnSearchBody(OwnSearchBody):
    filters: LeanFilters = None


OWN_ADD = RouteModel(
    source="gateway/routes/memories.py", body=OwnAddBody, lean=LeanOwnAddBody,
    ids=(Id(SESSION, "session_id"), Id(USER, "user_id"), Id(AGENT, "agent_id"),
         Id(SENDERS, "messages")), senders=SENDER_OWNERS,
)
OWN_SEARCH = RouteModel(
    source="gateway/routes/search.py", body=OwnSearchBody, lean=LeanOwnSearchBody,
    ids=(Id(USER, "user_id"), Id(AGENT, "agent_id"), Id(FILTERS, "filters")),
    filters=filter_ids,
)
